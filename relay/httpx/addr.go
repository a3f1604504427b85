package httpx

import (
	"net/netip"
	"strings"
)

// DefaultIPv6Prefix is the prefix length by which IPv6 clients are keyed
// when none is configured: one /64 is what a single subscriber, host or
// cloud instance is usually given, so it is one client.
const DefaultIPv6Prefix = 64

// AddrKey returns the key under which every per-address limit counts the
// client at ip (a textual address, as echo.Context.RealIP gives it): an
// IPv4 address (IPv4-mapped IPv6 included) as itself, an IPv6 address as
// its network of v6Prefix bits, written "2001:db8:1:2::/64" (v6Prefix ≤ 0
// means DefaultIPv6Prefix, above 128 means 128). Anything that is not an
// address is returned unchanged, so a key given again is its own key.
func AddrKey(ip string, v6Prefix int) string {
	if strings.IndexByte(ip, ':') < 0 {
		return ip // IPv4 (or not an address): itself, without a parse
	}
	if i := strings.IndexByte(ip, '%'); i >= 0 {
		ip = ip[:i] // a zone names an interface, not a client
	}
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return ip
	}
	a = a.Unmap()
	if a.Is4() {
		return a.String()
	}
	if v6Prefix <= 0 {
		v6Prefix = DefaultIPv6Prefix
	}
	v6Prefix = min(v6Prefix, 128)
	p, _ := a.Prefix(v6Prefix)
	return p.String()
}
