// Package netguard decides which addresses the relay may connect to on a
// peer's or an agent's behalf (federation lookups, webhooks): only public
// unicast ones, checked on the address actually dialled, after DNS, so a
// name cannot point the relay inside its own network (SSRF).
package netguard

import (
	"fmt"
	"net"
	"net/netip"
	"syscall"
)

// blocked lists the special-purpose ranges (IANA IPv4/IPv6 special-purpose
// registries) that are not the public internet.
var blocked = func() []netip.Prefix {
	var ps []netip.Prefix
	for _, s := range []string{
		"0.0.0.0/8",       // "this network"
		"10.0.0.0/8",      // private
		"100.64.0.0/10",   // carrier-grade NAT (shared address space)
		"127.0.0.0/8",     // loopback
		"169.254.0.0/16",  // link-local (cloud metadata)
		"172.16.0.0/12",   // private
		"192.0.0.0/24",    // IETF protocol assignments
		"192.0.2.0/24",    // TEST-NET-1
		"192.88.99.0/24",  // 6to4 relay anycast (deprecated)
		"192.168.0.0/16",  // private
		"198.18.0.0/15",   // benchmarking
		"198.51.100.0/24", // TEST-NET-2
		"203.0.113.0/24",  // TEST-NET-3
		"224.0.0.0/4",     // multicast
		"240.0.0.0/4",     // reserved, and 255.255.255.255 broadcast
		"::/96",           // IPv4-compatible (deprecated; ::a.b.c.d reaches IPv4 inside), with :: and ::1
		"::ffff:0:0:0/96", // IPv4-translated (SIIT, embeds an IPv4 address)
		"64:ff9b::/96",    // NAT64 well-known prefix (reaches IPv4 inside)
		"64:ff9b:1::/48",  // local-use NAT64
		"100::/64",        // discard-only
		"2001::/23",       // IETF protocol assignments (Teredo, ORCHID…)
		"2001:db8::/32",   // documentation
		"2002::/16",       // 6to4 (embeds an IPv4 address)
		"fc00::/7",        // unique local
		"fe80::/10",       // link-local
		"fec0::/10",       // site-local (deprecated)
		"ff00::/8",        // multicast
	} {
		ps = append(ps, netip.MustParsePrefix(s))
	}
	return ps
}()

// Public reports whether ip is a public unicast address the relay may
// connect to. IPv4-mapped IPv6 addresses (::ffff:a.b.c.d) are judged as
// the IPv4 address they carry; zoned addresses are refused.
func Public(ip netip.Addr) bool {
	if !ip.IsValid() || ip.Zone() != "" {
		return false
	}
	ip = ip.Unmap()
	for _, p := range blocked {
		if p.Contains(ip) {
			return false
		}
	}
	return true
}

// Control is a net.Dialer Control function that refuses to connect to an
// address that is not Public (what labels the error: "relay", "webhook").
func Control(what string) func(network, address string, c syscall.RawConn) error {
	return func(_, address string, _ syscall.RawConn) error {
		host, _, err := net.SplitHostPort(address)
		if err != nil {
			return err
		}
		ip, err := netip.ParseAddr(host)
		if err != nil || !Public(ip) {
			return fmt.Errorf("%s address %s refused (not public)", what, host)
		}
		return nil
	}
}
