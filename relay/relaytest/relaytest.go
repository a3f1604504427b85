// Package relaytest runs a real relay for the tests of the core and of
// every capability module: a real SQLite file in the test's temporary
// directory, a real HTTP server on loopback, an injectable clock, and
// helpers to send requests and signed events. Modules' tests live in their
// own packages, so the harness is exported here rather than kept in the
// core's test files.
package relaytest

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/anp2net/relay/client"
	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay"
	"github.com/anp2net/relay/relay/sqlite"
	"github.com/anp2net/relay/relay/views"
)

// VectorTime is near the conformance vectors' created_at: the default
// relay clock.
const VectorTime = 1763800000

// Clock is an injectable relay clock.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock returns a clock at unix second at.
func NewClock(at int64) *Clock { return &Clock{t: time.Unix(at, 0)} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

// Add moves the clock forward by d.
func (c *Clock) Add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

// Relay is a relay serving on loopback until the test ends.
type Relay struct {
	*httptest.Server
	Store *sqlite.Store
	Clock *Clock
	Core  *relay.Server
}

// Config is what Start begins with: the default config at VectorTime with
// no rate limits and no mandatory PoW, so tests can post plain events.
func Config(clk *Clock) relay.Config {
	cfg := relay.DefaultConfig()
	cfg.Now, cfg.RatePerAgent, cfg.RatePerIP = clk.Now, 0, 0
	cfg.Checker.PoW.Kinds = nil
	return cfg
}

// Start runs a relay over a fresh log with Config, changed by tweak, and
// the modules mods after the built-in views (views.Module), which every
// relay process serves.
func Start(t testing.TB, mods []relay.Module, tweak ...func(*relay.Config)) *Relay {
	t.Helper()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "relay.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return On(t, st, mods, tweak...)
}

// On runs a relay over st (closed by the caller), serving the built-in
// views and mods. Its public base URL is
// the loopback address it serves on (unless tweak sets another), so the
// links it hands out and the URLs D4 headers must name are the ones
// tests reach it at.
func On(t testing.TB, st *sqlite.Store, mods []relay.Module, tweak ...func(*relay.Config)) *Relay {
	t.Helper()
	clk := NewClock(VectorTime)
	cfg := Config(clk)
	cfg.Modules = append([]relay.Module{views.NewModule()}, mods...)
	ts := httptest.NewUnstartedServer(nil)
	cfg.PublicBaseURL = "http://" + ts.Listener.Addr().String()
	for _, f := range tweak {
		f(&cfg)
	}
	srv, err := relay.New(cfg, st)
	if err != nil {
		ts.Listener.Close()
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	for _, m := range mods {
		if r, ok := m.(relay.Runner); ok {
			go r.Run(ctx)
		}
	}
	ts.Config.Handler = srv.Handler()
	ts.Start()
	t.Cleanup(func() { cancel(); ts.Close() })
	return &Relay{Server: ts, Store: st, Clock: clk, Core: srv}
}

// Answer is one HTTP answer.
type Answer struct {
	Status int
	Header http.Header
	Body   []byte
}

// JSON decodes the body as a JSON object.
func (a Answer) JSON(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(a.Body, &m); err != nil {
		t.Fatalf("body %q: %v", a.Body, err)
	}
	return m
}

// Code returns the body's error code.
func (a Answer) Code(t testing.TB) string {
	t.Helper()
	c, _ := a.JSON(t)["code"].(string)
	return c
}

// Do sends one request; hdr are extra header name, value pairs.
func (r *Relay) Do(t testing.TB, method, path, ct string, body []byte, hdr ...string) Answer {
	t.Helper()
	req, err := http.NewRequest(method, r.URL+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if ct != "" {
		req.Header.Set("Content-Type", ct)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return Answer{resp.StatusCode, resp.Header, b}
}

// Post publishes e as JSON.
func (r *Relay) Post(t testing.TB, e *protocol.Event) Answer {
	t.Helper()
	return r.Do(t, "POST", "/events", "application/json", protocol.AppendJSON(nil, e))
}

// PostAll publishes evs over n concurrent clients and fails the test on
// the first refusal.
func (r *Relay) PostAll(t testing.TB, evs []*protocol.Event, n int) {
	t.Helper()
	c := client.New(r.URL)
	work := make(chan *protocol.Event)
	errs := make(chan error, n)
	for range n {
		go func() {
			var first error
			for e := range work {
				if _, err := c.Publish(context.Background(), e, false); err != nil && first == nil {
					first = err
				}
			}
			errs <- first
		}()
	}
	for _, e := range evs {
		work <- e
	}
	close(work)
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// Auth returns a D4 Authorization header for key on method and path at
// unix time at, for a request without a body. Each call signs a new
// header: the relay takes each for one request.
func (r *Relay) Auth(key ed25519.PrivateKey, method, path string, at int64) string {
	return protocol.HTTPAuth(key, method, r.URL+path, nil, at)
}

// AuthBody is Auth for a request with body, which the header binds with
// its payload tag.
func (r *Relay) AuthBody(key ed25519.PrivateKey, method, path string, body []byte, at int64) string {
	return protocol.HTTPAuth(key, method, r.URL+path, body, at)
}

// Count returns how many events the log holds.
func (r *Relay) Count(t testing.TB) int64 {
	t.Helper()
	st, err := r.Store.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return st.Events
}

// Eventually polls cond every 20 ms for up to 10 s and fails the test if
// it never holds.
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("%s: condition not reached", what)
}
