package relay

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/sqlite"
)

// newCore builds a relay over a fresh log at vectorTime without serving
// it: tests call its Handler directly with crafted client addresses.
func newCore(t *testing.T, tweak ...func(*Config)) *Server {
	t.Helper()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "relay.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	clk := &clock{t: time.Unix(vectorTime, 0)}
	cfg := DefaultConfig()
	cfg.Now, cfg.RatePerAgent = clk.now, 0
	cfg.Checker.PoW.Kinds = nil
	for _, f := range tweak {
		f(&cfg)
	}
	s, err := New(cfg, st)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// publishFrom posts e to s as if from the TCP peer remote ("[v6]:port"
// or "v4:port") and returns the status.
func publishFrom(s *Server, remote string, e *protocol.Event) int {
	req := httptest.NewRequest(http.MethodPost, "/events", strings.NewReader(string(protocol.AppendJSON(nil, e))))
	req.Header.Set("Content-Type", "application/json")
	req.RemoteAddr = remote
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, req)
	return rec.Code
}

// TestRateLimitKeysIPv6ByPrefix: publishes rotated across the addresses
// of one IPv6 /64 share one allowance; another /64 and an IPv4 client
// have their own; an IPv4-mapped IPv6 address is its IPv4 address; and
// the prefix length is configurable (at /128 each address is alone).
func TestRateLimitKeysIPv6ByPrefix(t *testing.T) {
	const limit = 5
	s := newCore(t, func(c *Config) { c.RatePerIP = limit })
	n := 0
	post := func(remote string) int {
		n++
		return publishFrom(s, remote, mk(key(n), vectorTime, 1, fmt.Sprint("post ", n)))
	}
	for i := 1; i <= limit; i++ {
		if st := post(fmt.Sprintf("[2001:db8:1:2::%x]:4000", i)); st != http.StatusOK {
			t.Fatalf("publish %d within the /64's allowance: %d", i, st)
		}
	}
	if st := post("[2001:db8:1:2:ffff:ffff:ffff:ffff]:4000"); st != http.StatusTooManyRequests {
		t.Fatalf("publish %d from a new address of the same /64: %d, want 429", limit+1, st)
	}
	if st := post("[2001:db8:1:3::1]:4000"); st != http.StatusOK {
		t.Fatalf("publish from the next /64: %d, want 200", st)
	}
	for i := 1; i <= limit; i++ {
		if st := post("[::ffff:198.51.100.7]:4000"); st != http.StatusOK {
			t.Fatalf("IPv4-mapped publish %d: %d", i, st)
		}
	}
	if st := post("198.51.100.7:4000"); st != http.StatusTooManyRequests {
		t.Fatalf("the IPv4 address of an IPv4-mapped client that spent its allowance: %d, want 429", st)
	}

	s128 := newCore(t, func(c *Config) { c.RatePerIP, c.IPv6Prefix = 1, 128 })
	if publishFrom(s128, "[2001:db8::1]:1", mk(key(900), vectorTime, 1, "a")) != http.StatusOK ||
		publishFrom(s128, "[2001:db8::2]:1", mk(key(901), vectorTime, 1, "b")) != http.StatusOK {
		t.Fatal("at --ipv6-prefix 128 two addresses of one /64 are two clients")
	}
}
