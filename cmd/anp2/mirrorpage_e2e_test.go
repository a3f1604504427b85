package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/sqlite"
)

// foreignPeer is another ANP2 implementation as far as a mirror can tell:
// it serves GET /events with since, until and limit (newest first, at most
// 50 a page, both bounds inclusive) and GET /health without a log sequence,
// and nothing else: no POST /sync, no ?ids=, no /export, no /stream.
type foreignPeer struct {
	mu    sync.Mutex
	evs   []*protocol.Event
	pages int
}

func (p *foreignPeer) add(evs ...*protocol.Event) {
	p.mu.Lock()
	p.evs = append(p.evs, evs...)
	p.mu.Unlock()
}

func (p *foreignPeer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	defer p.mu.Unlock()
	q := r.URL.Query()
	switch {
	case r.Method == "GET" && r.URL.Path == "/health":
		json.NewEncoder(w).Encode(map[string]any{"status": "ok", "events": len(p.evs)})
	case r.Method == "GET" && r.URL.Path == "/events" && q.Get("ids") == "":
		p.pages++
		since, until, limit := int64(0), int64(1)<<62, 50
		if s := q.Get("since"); s != "" {
			since, _ = strconv.ParseInt(s, 10, 64)
		}
		if s := q.Get("until"); s != "" {
			until, _ = strconv.ParseInt(s, 10, 64)
		}
		if n, err := strconv.Atoi(q.Get("limit")); err == nil && n < limit {
			limit = n
		}
		var out []*protocol.Event
		for _, e := range p.evs {
			if e.CreatedAt >= since && e.CreatedAt <= until {
				out = append(out, e)
			}
		}
		slices.SortStableFunc(out, func(a, b *protocol.Event) int { return int(b.CreatedAt - a.CreatedAt) })
		json.NewEncoder(w).Encode(out[:min(limit, len(out))])
	default:
		http.Error(w, `{"detail":"Not Found"}`, http.StatusNotFound)
	}
}

// foreignEvents returns n posts by a few agents over the past two days,
// with 40 of them in one second.
func foreignEvents(n int) []*protocol.Event {
	now := time.Now().Unix()
	var evs []*protocol.Event
	for i := range n {
		e := &protocol.Event{CreatedAt: now - 2*86400 + int64(i)*600, Kind: protocol.KindPost,
			Content: "foreign post " + strconv.Itoa(i), Tags: [][]string{{"t", "foreign"}}}
		if i < 40 {
			e.CreatedAt = now - 3*86400
		}
		e.Sign(seededKey(200 + i%7))
		evs = append(evs, e)
	}
	return evs
}

// TestMirrorAForeignRelayByPages: `anp2 mirror` and `anp2 serve --peer`
// mirror a peer that serves only GET /events with since/until/limit, and
// converge on every one of its events.
func TestMirrorAForeignRelayByPages(t *testing.T) {
	peer := &foreignPeer{}
	all := foreignEvents(233)
	peer.add(all[:230]...)
	srv := httptest.NewServer(peer)
	defer srv.Close()

	db := filepath.Join(t.TempDir(), "mirror.db")
	out := runCLI(t, "mirror", "--peer", srv.URL, "--db", db)
	if !strings.Contains(out, `"mode":"paged"`) {
		t.Fatalf("mirror did not page: %s", out)
	}
	st, err := sqlite.Open(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	stats, err := st.Stats(t.Context())
	st.Close()
	if err != nil || stats.Events != 230 {
		t.Fatalf("mirrored %d of 230 events (%v): %s", stats.Events, err, out)
	}

	// A relay process following the same peer picks up what it publishes
	// later.
	p := startProc(t, filepath.Join(t.TempDir(), "follow.db"), "--peer", srv.URL, "--mirror-interval", "200ms")
	peer.add(all[230:]...)
	deadline := time.Now().Add(20 * time.Second)
	for _, e := range append(all[:3:3], all[230:]...) {
		for {
			if st, _, _ := httpDo(t, "GET", p.base+"/events/"+e.ID, nil); st == 200 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the following relay never got %s", e.ID)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}
