package httpx

import "testing"

// TestAddrKey: IPv6 clients within one prefix share a key, IPv4 and
// IPv4-mapped IPv6 are keyed by the address alone, and a key is its own
// key.
func TestAddrKey(t *testing.T) {
	for _, tc := range []struct {
		ip     string
		prefix int
		want   string
	}{
		{"203.0.113.7", 64, "203.0.113.7"},
		{"::ffff:203.0.113.7", 64, "203.0.113.7"},
		{"::ffff:203.0.113.7", 128, "203.0.113.7"},
		{"2001:db8:1:2:aaaa:bbbb:cccc:dddd", 64, "2001:db8:1:2::/64"},
		{"2001:db8:1:2::1", 64, "2001:db8:1:2::/64"},
		{"2001:DB8:1:2::1", 0, "2001:db8:1:2::/64"},
		{"2001:db8:1:2:aaaa::1", 48, "2001:db8:1::/48"},
		{"2001:db8:1:2:aaaa::1", 128, "2001:db8:1:2:aaaa::1/128"},
		{"2001:db8:1:2:aaaa::1", 200, "2001:db8:1:2:aaaa::1/128"},
		{"fe80::1%eth0", 64, "fe80::/64"},
		{"::1", 64, "::/64"},
		{"2001:db8:1:2::/64", 64, "2001:db8:1:2::/64"},
		{"", 64, ""},
		{"not-an-address", 64, "not-an-address"},
	} {
		if got := AddrKey(tc.ip, tc.prefix); got != tc.want {
			t.Errorf("AddrKey(%q, %d) = %q, want %q", tc.ip, tc.prefix, got, tc.want)
		}
		if got := AddrKey(AddrKey(tc.ip, tc.prefix), tc.prefix); got != tc.want {
			t.Errorf("AddrKey of its own key %q = %q", tc.want, got)
		}
	}
}

// FuzzAddrKey: AddrKey never panics and a key is its own key.
func FuzzAddrKey(f *testing.F) {
	for _, s := range []string{"203.0.113.7", "::ffff:1.2.3.4", "2001:db8::1", "fe80::1%lo", "", "::", "1.2.3.4/8"} {
		f.Add(s, 64)
	}
	f.Fuzz(func(t *testing.T, ip string, prefix int) {
		k := AddrKey(ip, prefix)
		if AddrKey(k, prefix) != k {
			t.Fatalf("AddrKey(%q) = %q is not its own key", ip, k)
		}
	})
}
