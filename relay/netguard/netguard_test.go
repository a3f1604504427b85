package netguard

import (
	"net"
	"net/netip"
	"strings"
	"testing"
)

func TestPublic(t *testing.T) {
	refused := []string{
		"0.0.0.0", "0.1.2.3", "10.0.0.1", "100.64.0.1", "100.127.255.254",
		"127.0.0.1", "127.9.9.9", "169.254.169.254", "172.16.0.1", "172.31.255.255",
		"192.0.0.8", "192.0.2.1", "192.88.99.1", "192.168.1.1", "198.18.0.1", "198.19.255.255",
		"198.51.100.7", "203.0.113.9", "224.0.0.1", "239.255.255.250", "240.0.0.1",
		"255.255.255.255",
		"::", "::1", "64:ff9b::7f00:1", "64:ff9b::a00:1", "64:ff9b:1::1", "100::1",
		"2001::1", "2001:db8::1", "2002:7f00:1::1", "fc00::1", "fd12:3456::1",
		"fe80::1", "fec0::1", "ff02::1",
		"::ffff:127.0.0.1", "::ffff:10.0.0.1", "::ffff:100.64.0.1", "::ffff:169.254.169.254",
		"::ffff:0.0.0.0", "fe80::1%eth0",
		// IPv4-compatible (::/96) and IPv4-translated (::ffff:0:0:0/96):
		// each embeds an IPv4 address, private or not.
		"::127.0.0.1", "::7f00:1", "::10.0.0.1", "::169.254.169.254", "::8.8.8.8", "::ffff:ffff",
		"::ffff:0:127.0.0.1", "::ffff:0:8.8.8.8",
	}
	allowed := []string{
		"1.1.1.1", "8.8.8.8", "100.63.255.255", "100.128.0.0", "172.15.255.255",
		"172.32.0.0", "198.17.255.255", "198.20.0.0", "192.0.1.1", "223.255.255.255",
		"::ffff:8.8.8.8", "2606:4700:4700::1111", "2a00:1450:4001::1",
		"64:ff9b::1:0:0:1", // outside the /96
		"::1:0:0:1",        // outside ::/96
	}
	for _, s := range refused {
		if Public(netip.MustParseAddr(s)) {
			t.Errorf("%s is public, want refused", s)
		}
	}
	for _, s := range allowed {
		if !Public(netip.MustParseAddr(s)) {
			t.Errorf("%s refused, want public", s)
		}
	}
	if Public(netip.Addr{}) {
		t.Error("the zero Addr is public")
	}
}

func TestControl(t *testing.T) {
	c := Control("webhook")
	for _, a := range []string{"127.0.0.1:80", "[::1]:443", "[::ffff:10.0.0.1]:80", "100.64.0.1:80", "[64:ff9b::a9fe:a9fe]:80", "nohost", "example.com:80"} {
		err := c("tcp", a, nil)
		if err == nil {
			t.Errorf("%s: dial allowed", a)
		} else if a != "nohost" && !strings.Contains(err.Error(), "webhook address") {
			t.Errorf("%s: error %v", a, err)
		}
	}
	if err := c("tcp", "8.8.8.8:443", nil); err != nil {
		t.Errorf("public address refused: %v", err)
	}
	if err := c("tcp", "[2606:4700:4700::1111]:443", nil); err != nil {
		t.Errorf("public v6 address refused: %v", err)
	}
}

// FuzzPublic checks Public against the ranges it must refuse, however the
// address is written (IPv4, IPv4-mapped, the 16-byte form).
func FuzzPublic(f *testing.F) {
	for _, s := range []string{"127.0.0.1", "::ffff:10.1.2.3", "64:ff9b::1", "8.8.8.8", "2001:db8::", "fe80::1%lo", "100.64.1.1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ip, err := netip.ParseAddr(s)
		if err != nil {
			return
		}
		pub := Public(ip)
		u := ip.Unmap()
		if u.Is4() {
			std := net.IP(u.AsSlice())
			if pub && (std.IsLoopback() || std.IsPrivate() || std.IsUnspecified() || std.IsMulticast() || std.IsLinkLocalUnicast()) {
				t.Fatalf("%s public", s)
			}
			// The mapped and plain forms agree.
			if Public(netip.AddrFrom16(u.As16())) != Public(u) {
				t.Fatalf("%s: mapped and plain forms disagree", s)
			}
		} else if pub && (u.IsLoopback() || u.IsPrivate() || u.IsUnspecified() || u.IsMulticast() || u.IsLinkLocalUnicast() || u.Zone() != "") {
			t.Fatalf("%s public", s)
		}
	})
}
