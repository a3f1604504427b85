package ws

import (
	"testing"
	"time"

	"github.com/anp2net/relay/relay/stream"
)

// TestAddrKey: an IPv6 client is keyed by its /64, an IPv4 one (also
// when mapped into IPv6) by its address.
func TestAddrKey(t *testing.T) {
	for _, c := range []struct{ ip, want string }{
		{"203.0.113.7", "203.0.113.7"},
		{"::ffff:203.0.113.7", "203.0.113.7"},
		{"2001:db8:1:2:aaaa::1", "2001:db8:1:2::/64"},
		{"2001:db8:1:2:bbbb:cccc:dddd:eeee", "2001:db8:1:2::/64"},
		{"2001:db8:1:3::1", "2001:db8:1:3::/64"},
		{"fe80::1%eth0", "fe80::/64"},
		{"not an address", "not an address"},
	} {
		if got := addrKey(c.ip); got != c.want {
			t.Errorf("addrKey(%q) = %q, want %q", c.ip, got, c.want)
		}
	}
}

// TestRowBucket: a bucket starts full, refills at its size per minute
// and never holds more than its size.
func TestRowBucket(t *testing.T) {
	var b stream.RowBucket
	at := time.Unix(1_700_000_000, 0)
	b.Fill(at, 600)
	if b.Tokens != 600 {
		t.Fatalf("new bucket holds %v", b.Tokens)
	}
	b.Tokens = 0
	b.Fill(at.Add(10*time.Second), 600)
	if b.Tokens != 100 {
		t.Fatalf("after 10 s: %v rows, want 100", b.Tokens)
	}
	if w := b.Wait(400, 600); w != 30*time.Second {
		t.Fatalf("wait for 400 rows: %s", w)
	}
	b.Fill(at.Add(time.Hour), 600)
	if b.Tokens != 600 {
		t.Fatalf("after an hour: %v rows, want the size", b.Tokens)
	}
}
