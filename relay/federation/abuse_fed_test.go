package federation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay"
	"github.com/anp2net/relay/relay/sqlite"
	"github.com/anp2net/relay/tasks/taskstest"
)

// The attacks of SPEC §20.1 that need the module's timers shortened, run
// against a relay on loopback and a hostile peer server.

// fedHostile is a peer server answering routes ("METHOD /path") and 404
// for anything else.
func fedHostile(t *testing.T, routes map[string]http.HandlerFunc) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h := routes[r.Method+" "+r.URL.Path]; h != nil {
			h(w, r)
			return
		}
		http.Error(w, `{"detail":"Not Found","code":"not_found"}`, http.StatusNotFound)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// fedShorten sets *v to d for the test.
func fedShorten(t *testing.T, v *time.Duration, d time.Duration) {
	old := *v
	*v = d
	t.Cleanup(func() { *v = old })
}

// fedPosts returns n posts by a few agents, one a second from corpusBase.
func fedPosts(n int, tag string) []*protocol.Event {
	agents := []taskstest.Agent{taskstest.NewAgent("fed-a"), taskstest.NewAgent("fed-b"), taskstest.NewAgent("fed-c")}
	evs := make([]*protocol.Event, n)
	for i := range evs {
		evs[i] = agents[i%3].Sign(protocol.KindPost, corpusBase+int64(i), tag+" "+strconv.Itoa(i))
	}
	return evs
}

// TestAbuseFedHealthClaimDoesNotDropIndexes: a peer whose /health claims
// a billion events and whose export then sends nothing never puts this
// relay in bulk mode (indexes dropped); the silent export ends at the idle
// timeout and the round fails.
func TestAbuseFedHealthClaimDoesNotDropIndexes(t *testing.T) {
	fedShorten(t, &peerIdle, 300*time.Millisecond)
	r, m := peerRelay(t, "victim")
	publishAll(t, r, fedPosts(30, "own"), 2)
	var bulkDuringExport atomic.Int32
	release := make(chan struct{})
	defer close(release)
	peer := fedHostile(t, map[string]http.HandlerFunc{
		"GET /health": func(w http.ResponseWriter, _ *http.Request) {
			fmt.Fprint(w, `{"status":"ok","events":1000000000,"max_seq":1000000000}`)
		},
		"GET /export": func(w http.ResponseWriter, _ *http.Request) {
			if r.Store.Bulk() {
				bulkDuringExport.Add(1)
			}
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			select { // then nothing
			case <-release:
			case <-time.After(time.Minute):
			}
		},
	})
	_, err := m.MirrorOnce(context.Background(), peer.URL, nil)
	if bulkDuringExport.Load() != 0 {
		t.Fatal("a /health claim put the log in bulk mode")
	}
	if err == nil || !strings.Contains(err.Error(), "sent nothing") {
		t.Fatalf("a silent export: %v", err)
	}
	if r.Store.Bulk() {
		t.Fatal("still in bulk mode")
	}
}

// TestAbuseFedBulkLoadStallRestoresIndexes: a peer that delivers enough
// events for bulk mode and then stalls ends the bulk load at the stall
// timeout, and the indexes are rebuilt (the log leaves bulk mode).
func TestAbuseFedBulkLoadStallRestoresIndexes(t *testing.T) {
	defer func(n int) { bulkMin = n }(bulkMin)
	bulkMin = 400
	fedShorten(t, &bulkStall, 300*time.Millisecond)
	r, m := peerRelay(t, "victim")
	evs := fedPosts(1700, "flood")
	var sawBulk atomic.Bool
	release := make(chan struct{})
	defer close(release)
	peer := fedHostile(t, map[string]http.HandlerFunc{
		"GET /health": func(w http.ResponseWriter, _ *http.Request) {
			fmt.Fprint(w, `{"status":"ok","events":1000000000,"max_seq":1000000000}`)
		},
		"GET /export": func(w http.ResponseWriter, _ *http.Request) {
			for _, e := range evs {
				w.Write(append(protocol.AppendJSON(nil, e), '\n'))
			}
			w.(http.Flusher).Flush()
			for { // a byte now and then keeps the idle timeout away
				select {
				case <-release:
					return
				case <-time.After(50 * time.Millisecond):
					sawBulk.CompareAndSwap(false, r.Store.Bulk())
					if _, err := w.Write([]byte("\n")); err != nil {
						return
					}
					w.(http.Flusher).Flush()
				}
			}
		},
	})
	_, err := m.MirrorOnce(context.Background(), peer.URL, nil)
	if !errors.Is(err, errBulkStalled) {
		t.Fatalf("a stalled bulk load: %v", err)
	}
	if !sawBulk.Load() {
		t.Fatal("the catch-up never reached bulk mode (the test proves nothing)")
	}
	if r.Store.Bulk() {
		t.Fatal("the indexes were not restored after the stall")
	}
	if n := r.count(t); n < int64(bulkMin) {
		t.Fatalf("stored %d events before bulk mode, want at least %d", n, bulkMin)
	}
}

// TestAbuseFedCapsEveryAnswer: an oversized answer on each request path
// (a sync reply, a fetch page, one event of a page, /health) is a broken
// cap, not a buffer that grows.
func TestAbuseFedCapsEveryAnswer(t *testing.T) {
	_, m := peerRelay(t, "victim")
	huge := strings.Repeat("x", maxSmallAnswer+1)
	peer := fedHostile(t, map[string]http.HandlerFunc{
		"GET /health": func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, `{"pad":"`+huge+`"}`) },
		"GET /events": func(w http.ResponseWriter, _ *http.Request) {
			fmt.Fprint(w, `[{"pad":"`+strings.Repeat("y", MaxPeerLine)+`"}]`)
		},
	})
	if _, err := m.peerSeq(context.Background(), peer.URL); !isCapError(err) {
		t.Fatalf("an oversized /health: %v", err)
	}
	if _, err := m.fetchEvents(context.Background(), peer.URL, [][32]byte{{1}}); !isCapError(err) {
		t.Fatalf("an oversized event in a fetch: %v", err)
	}
	body, _ := m.peerGet(context.Background(), peer.URL+"/events", maxPageBytes)
	if _, err := decodePage(body); !isCapError(err) {
		t.Fatalf("an oversized event in a page: %v", err)
	}
}

// TestAbuseFedPagedPeerIgnoresBounds: a paged peer (no /sync) that
// answers every GET /events with the same page, whatever since and until
// say, ends the round after a page or two instead of walking on forever.
func TestAbuseFedPagedPeerIgnoresBounds(t *testing.T) {
	_, m := peerRelay(t, "victim")
	page := fedPosts(3, "same page")
	var pages atomic.Int32
	peer := fedHostile(t, map[string]http.HandlerFunc{
		"GET /events": func(w http.ResponseWriter, _ *http.Request) {
			pages.Add(1)
			w.Write(eventsJSON(page))
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := m.MirrorOnce(ctx, peer.URL, nil)
	if !errors.Is(err, errNoProgress) || pages.Load() > 4 {
		t.Fatalf("a peer ignoring since/until: %v after %d pages", err, pages.Load())
	}
}

// TestAbuseFedPagedPassIsCapped: a paged peer with no end to its history
// (each page one second older) cuts the round at maxPagesPerPass; the next
// round resumes where it stopped instead of starting over.
func TestAbuseFedPagedPassIsCapped(t *testing.T) {
	defer func(n int) { maxPagesPerPass = n }(maxPagesPerPass)
	maxPagesPerPass = 20
	_, m := peerRelay(t, "victim")
	k := taskstest.NewAgent("fed-endless")
	var mu sync.Mutex
	var untils []int64
	pagesAsked := func() []int64 { mu.Lock(); defer mu.Unlock(); return slices.Clone(untils) }
	peer := fedHostile(t, map[string]http.HandlerFunc{
		"GET /events": func(w http.ResponseWriter, r *http.Request) {
			until := int64(corpusBase)
			if u := r.URL.Query().Get("until"); u != "" {
				until, _ = strconv.ParseInt(u, 10, 64)
			}
			mu.Lock()
			untils = append(untils, until)
			mu.Unlock()
			w.Write(eventsJSON([]*protocol.Event{k.Sign(protocol.KindPost, until, "older "+strconv.FormatInt(until, 10))}))
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := m.MirrorOnce(ctx, peer.URL, nil)
	if got := pagesAsked(); !errors.Is(err, errPageCap) || len(got) != 20 {
		t.Fatalf("an endless paged peer: %v after %d pages", err, len(got))
	}
	stop := pagesAsked()[19]
	_, err = m.MirrorOnce(ctx, peer.URL, nil)
	if got := pagesAsked(); !errors.Is(err, errPageCap) || len(got) != 40 || got[20] >= stop {
		t.Fatalf("the next round: %v, %d pages, resumed at until %d (first round stopped at %d)", err, len(got), got[20], stop)
	}
}

// eventsJSON is a GET /events answer.
func eventsJSON(evs []*protocol.Event) []byte {
	b := []byte{'['}
	for i, e := range evs {
		if i > 0 {
			b = append(b, ',')
		}
		b = protocol.AppendJSON(b, e)
	}
	return append(b, ']')
}

// TestAbuseFedDirectoryEclipse: 1,500 announcements from fresh keys dated
// a few minutes ahead, and 1,100 dated now, displace neither the relay's
// own announcement, nor a peer's, nor a trusted relay's, from GET /relays
// or from the relays resolution may ask; the ones from the future are not
// listed, and the list is ranked self, peer, trusted, then the rest.
func TestAbuseFedDirectoryEclipse(t *testing.T) {
	peerKey := taskstest.NewAgent("fed-peer")
	r := startRelay(t, Options{PeerKeys: []string{peerKey.ID}}, func(c *relay.Config) {
		c.RelayKey = taskstest.NewAgent("fed-self").Key
		c.PublicBaseURL = "https://self.example"
	})
	m := r.fed
	if err := m.Announce(context.Background()); err != nil {
		t.Fatal(err)
	}
	now := r.Core.Now()
	announce := func(a taskstest.Agent, at int64, url string) *protocol.Event {
		return a.Sign(protocol.KindRelayAnnounce, at, map[string]any{"url": url, "preferred_branch": "main", "served_branches": []string{"main"}}, []string{"branch", "main"})
	}
	trusted, voter := taskstest.NewAgent("fed-trusted"), taskstest.NewAgent("fed-voter")
	honest := []*protocol.Event{
		announce(peerKey, now-3600, "https://peer.example"),
		announce(trusted, now-7200, "https://trusted.example"),
		voter.Sign(protocol.KindTrustVote, now-7000, map[string]any{"score": 1}, []string{"p", trusted.ID}),
	}
	if _, rej, err := r.Core.IngestMirrored(context.Background(), honest); err != nil || rej != 0 {
		t.Fatalf("honest events: %v, %d rejected", err, rej)
	}
	var fakes []*protocol.Event
	for i := range 2600 {
		at := now + 200 // from the future
		if i >= 1500 {
			at = now
		}
		k := taskstest.NewAgent("fed-fake-" + strconv.Itoa(i))
		fakes = append(fakes, announce(k, at, "https://fake"+strconv.Itoa(i)+".example"))
	}
	// A later announcement by the peer, from the future too.
	fakes = append(fakes, announce(peerKey, now+250, "https://moved.example"))
	for i := 0; i < len(fakes); i += 500 {
		if _, rej, err := r.Core.IngestMirrored(context.Background(), fakes[i:min(len(fakes), i+500)]); err != nil || rej != 0 {
			t.Fatalf("fakes: %v, %d rejected", err, rej)
		}
	}
	a := r.Do(t, "GET", "/relays", "", nil)
	var got struct {
		Relays []knownRelay `json:"relays"`
	}
	if a.Status != 200 || json.Unmarshal(a.Body, &got) != nil {
		t.Fatalf("GET /relays: %d %.300s", a.Status, a.Body)
	}
	if len(got.Relays) < 3 {
		t.Fatalf("GET /relays lists %d relays", len(got.Relays))
	}
	want := []struct{ standing, url string }{{standingSelf, "https://self.example"}, {standingPeer, "https://peer.example"}, {standingTrusted, "https://trusted.example"}}
	for i, w := range want {
		if g := got.Relays[i]; g.Standing != w.standing || g.URL != w.url {
			t.Fatalf("relay %d: %s %s, want %s %s", i, g.Standing, g.URL, w.standing, w.url)
		}
	}
	for _, g := range got.Relays {
		if g.AnnouncedAt > now {
			t.Fatalf("an announcement from the future is listed: %+v", g)
		}
	}
	for _, u := range []string{"https://peer.example", "https://trusted.example"} {
		if _, _, ok := m.AllowedRelay(u); !ok {
			t.Fatalf("resolution may no longer ask %s", u)
		}
	}
}

// TestAnnounceSupersedesWithinASecond: a relay that changes what it
// announces within the second of its last kind 10 (a quick restart with new
// topics) dates the new one a second later, so the overwrite order, which
// breaks ties by id, cannot keep the old one as the latest.
func TestAnnounceSupersedesWithinASecond(t *testing.T) {
	at := time.Unix(1_790_000_000, 0)
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "relay.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	key := taskstest.NewAgent("fed-quick").Key
	tweak := func(c *relay.Config) {
		c.RelayKey, c.PublicBaseURL, c.Now = key, "https://quick.example", func() time.Time { return at }
	}
	for i, topics := range [][]string{nil, {"weather"}, {"maps", "weather"}} {
		r := startOn(t, st, Options{Topics: topics}, tweak)
		if err := r.fed.Announce(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := r.fed.Announce(context.Background()); err != nil { // unchanged: no new kind 10
			t.Fatal(err)
		}
		a := r.Do(t, "GET", "/events?kinds=10", "", nil)
		var evs []protocol.Event
		if err := json.Unmarshal(a.Body, &evs); err != nil || len(evs) != i+1 {
			t.Fatalf("round %d: %v, %d kind 10, want %d", i, err, len(evs), i+1)
		}
		latest := r.Do(t, "GET", "/events?kinds=10&limit=1", "", nil)
		var top []protocol.Event
		var content announcement
		if json.Unmarshal(latest.Body, &top) != nil || len(top) != 1 || json.Unmarshal([]byte(top[0].Content), &content) != nil ||
			top[0].CreatedAt != at.Unix()+int64(i) || !slices.Equal(content.Topics, topics) {
			t.Fatalf("round %d: latest kind 10 %.300s", i, latest.Body)
		}
	}
}
