package tlog

import (
	"crypto/ed25519"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay"
	"github.com/anp2net/relay/relay/relaytest"
)

// tlogRelay is an in-process relay with the module over a real SQLite
// file, holding n events.
func tlogRelay(t testing.TB, n int) (*relaytest.Relay, *Module) {
	m := NewModule(Options{})
	r := relaytest.Start(t, []relay.Module{m}, func(c *relay.Config) {
		c.RelayKey = ed25519.NewKeyFromSeed(make([]byte, 32))
		c.Logger = slog.New(slog.DiscardHandler)
	})
	k := ed25519.NewKeyFromSeed(make([]byte, 32))
	for i := range n {
		e := &protocol.Event{CreatedAt: r.Clock.Now().Unix(), Kind: 1, Content: fmt.Sprint("e", i), Tags: [][]string{}}
		e.Sign(k)
		if a := r.Post(t, e); a.Status != 200 {
			t.Fatalf("publish: %d", a.Status)
		}
	}
	return r, m
}

// TestBadRequestsAre4xx: malformed tile paths, sizes and ids are 400 or
// 404 with a code, never a 500.
func TestBadRequestsAre4xx(t *testing.T) {
	r, _ := tlogRelay(t, 300)
	for _, path := range []string{
		"/tlog/tile/0/001", "/tlog/tile/0/000.p/0", "/tlog/tile/0/000.p/300",
		"/tlog/tile/0/x001/000", "/tlog/tile/9/000", "/tlog/tile/4/x999/x999/x999/x999/x999/999",
		"/tlog/tile/1/000", "/tlog/tile/-1/000", "/tlog/tile/entries/001", "/tlog/tile/entries/000.p/45x",
		"/tlog/tile/0/0", "/tlog/tile/", "/tlog/tile/0/000/", "/tlog/proof?id=zz", "/tlog/proof?id=" + fmt.Sprintf("%064x", 1),
		"/tlog/proof", "/tlog/consistency", "/tlog/consistency?from=5&to=4", "/tlog/consistency?from=-1&to=4",
		"/tlog/consistency?from=1&to=100000", "/tlog/consistency?from=x",
	} {
		a := r.Do(t, http.MethodGet, path, "", nil)
		if a.Status < 400 || a.Status >= 500 || a.Code(t) == "" {
			t.Errorf("%s: %d %s", path, a.Status, a.Body)
		}
	}
	for _, path := range []string{"/tlog/tile/0/000", "/tlog/tile/0/001.p/44", "/tlog/tile/entries/000", "/tlog/tile/1/000.p/1", "/tlog/consistency?from=3&to=300"} {
		if a := r.Do(t, http.MethodGet, path, "", nil); a.Status != 200 {
			t.Errorf("%s: %d %s", path, a.Status, a.Body)
		}
	}
}

// FuzzTilePath: no path under /tlog/tile/ makes the relay answer 500.
func FuzzTilePath(f *testing.F) {
	for _, s := range []string{"0/000", "0/001.p/5", "entries/000", "entries/x001/002.p/255", "4/x999/000", "1/000.p/1", "0/-1", "0/000.p/0"} {
		f.Add(s)
	}
	r, _ := tlogRelay(f, 300)
	h := r.Core.Handler()
	f.Fuzz(func(t *testing.T, p string) {
		req, err := http.NewRequest(http.MethodGet, "http://relay/tlog/tile/"+p, nil)
		if err != nil {
			return
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code >= 500 {
			t.Fatalf("%q: %d %s", p, w.Code, w.Body)
		}
	})
}

// TestCheckpointNotResignedWithoutGrowth: readers asking for the
// checkpoint of a log that does not grow all get the same signed note
// (signing is paid for growth, not for requests).
func TestCheckpointNotResignedWithoutGrowth(t *testing.T) {
	r, m := tlogRelay(t, 5)
	relaytest.Eventually(t, "a checkpoint of the 5 events", func() bool {
		r.Do(t, http.MethodGet, "/tlog/checkpoint", "", nil)
		return m.latest.Load().Size == 5
	})
	first := r.Do(t, http.MethodGet, "/tlog/checkpoint", "", nil).Body
	for range 200 {
		if got := r.Do(t, http.MethodGet, "/tlog/checkpoint", "", nil).Body; string(got) != string(first) {
			t.Fatalf("checkpoint changed without growth:\n%s\n%s", first, got)
		}
	}
}
