package relay

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/anp2net/relay/client"
	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/sqlite"
	"github.com/anp2net/relay/relay/state"
	"github.com/anp2net/relay/relay/state/statetest"
	"github.com/anp2net/relay/tasks/taskstest"
)

const corpusBase = vectorTime - 3600

// viewsRelay is a relay whose clock sits just after the corpus, with no
// rate limits and no mandatory PoW (the generated kind 50s are not mined).
func viewsRelay(t *testing.T, path string) *testRelay {
	t.Helper()
	st, err := sqlite.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	return relayOn(t, st)
}

func relayOn(t *testing.T, st *sqlite.Store) *testRelay {
	t.Helper()
	clk := &clock{t: time.Unix(vectorTime, 0)}
	cfg := DefaultConfig()
	cfg.Now, cfg.RatePerAgent, cfg.RatePerIP = clk.now, 0, 0
	cfg.Checker.PoW.Kinds = nil
	srv, err := New(cfg, st)
	if err != nil {
		t.Fatal(err)
	}
	r := &testRelay{store: st, clock: clk}
	r.Server = newServer(t, srv)
	return r
}

func (r *testRelay) state(t *testing.T, at int64) state.Digest {
	t.Helper()
	var d state.Digest
	a := r.do(t, "GET", "/state?at="+strconv.FormatInt(at, 10), "", nil)
	if a.status != 200 {
		t.Fatalf("GET /state: %d %s", a.status, a.body)
	}
	if err := json.Unmarshal(a.body, &d); err != nil {
		t.Fatal(err)
	}
	return d
}

// TestStateAgreesAcrossOrdersAndReplay publishes one random stream to live
// relays in shuffled orders (8 concurrent publishers, so arrival order is
// also left to the scheduler), restarts one from its database, and requires
// every /state to equal a from-scratch replay of the same events.
func TestStateAgreesAcrossOrdersAndReplay(t *testing.T) {
	evs := statetest.Corpus(42, 20, 30, corpusBase, 1800)
	times := []int64{vectorTime, vectorTime + 7200, vectorTime + 30*86400}
	want := state.New(state.Options{})
	for _, e := range evs {
		want.Preload(e)
	}
	for i, e := range evs {
		want.Add(int64(i+1), e, nil)
	}
	dir := t.TempDir()
	for k := range 2 {
		order := append([]*protocol.Event(nil), evs...)
		rand.New(rand.NewPCG(uint64(k), 9)).Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		path := filepath.Join(dir, strconv.Itoa(k)+".db")
		r := viewsRelay(t, path)
		publishAll(t, r.URL, order, 8)
		for _, at := range times {
			got, exp := r.state(t, at), want.Digest(at)
			if got.Digest != exp.Digest || got.Events != int64(len(evs)) {
				t.Fatalf("order %d at %d: view %q differs\nrelay  %+v\nreplay %+v", k, at, state.FirstDifference(got, exp), got, exp)
			}
		}
		if k == 0 {
			// A restart rebuilds the views from the log alone.
			r.Close()
			r.store.Close()
			again := viewsRelay(t, path)
			if got, exp := again.state(t, times[1]), want.Digest(times[1]); got.Digest != exp.Digest {
				t.Fatalf("after restart: view %q differs", state.FirstDifference(got, exp))
			}
		}
	}
}

// publishAll posts evs with n concurrent publishers and fails on any
// rejection.
func publishAll(t *testing.T, base string, evs []*protocol.Event, n int) {
	t.Helper()
	c := client.New(base)
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

// eventually polls cond until it holds or 10 s pass (snapshots refresh in
// the background; this waits for a state, it does not time anything).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("%s: condition not reached", what)
}

func TestTrustRoutes(t *testing.T) {
	r := viewsRelay(t, filepath.Join(t.TempDir(), "r.db"))
	a := taskstest.Pool(4)
	vote := func(from, to taskstest.Agent, score float64, at int64) *protocol.Event {
		return from.Sign(protocol.KindTrustVote, at, map[string]any{"score": score, "reason": "good"}, []string{"p", to.ID})
	}
	for _, e := range []*protocol.Event{
		vote(a[0], a[1], 1, vectorTime-100), vote(a[2], a[1], 0.5, vectorTime-90),
		vote(a[0], a[2], 1, vectorTime-80), vote(a[3], a[1], 0, vectorTime-70),
	} {
		if ans := r.post(t, e); ans.status != 200 {
			t.Fatalf("publish: %d %s", ans.status, ans.body)
		}
	}
	var tr struct {
		AgentID    string  `json:"agent_id"`
		Weighted   float64 `json:"weighted_score"`
		Rank       int     `json:"rank"`
		VoterCount int     `json:"voter_count"`
		Votes      []any   `json:"votes"`
	}
	eventually(t, "trust of a1", func() bool {
		json.Unmarshal(r.do(t, "GET", "/trust/"+a[1].ID, "", nil).body, &tr)
		return tr.VoterCount == 2
	})
	if tr.Rank != 1 || tr.Weighted <= 0 || len(tr.Votes) != 2 {
		t.Fatalf("trust of a1: %+v", tr)
	}
	json.Unmarshal(r.do(t, "GET", "/trust/"+a[1].ID+"?include_withdrawn=true", "", nil).body, &tr)
	if len(tr.Votes) != 3 {
		t.Fatalf("include_withdrawn: %d votes, want 3", len(tr.Votes))
	}
	var g struct {
		Total  int `json:"total"`
		Agents []struct {
			AgentID string `json:"agent_id"`
		} `json:"agents"`
	}
	json.Unmarshal(r.do(t, "GET", "/trust_graph", "", nil).body, &g)
	if g.Total != 2 || g.Agents[0].AgentID != a[1].ID {
		t.Fatalf("trust_graph: %+v", g)
	}
	var rec struct {
		Count    int     `json:"count"`
		ScoreSum float64 `json:"score_sum"`
		Filter   map[string]any
	}
	json.Unmarshal(r.do(t, "GET", "/agents/"+a[1].ID+"/trust_received?min_score=0.75", "", nil).body, &rec)
	if rec.Count != 1 || rec.ScoreSum != 1 || rec.Filter["min_score"] != 0.75 {
		t.Fatalf("trust_received: %+v", rec)
	}
	for path, code := range map[string]string{
		"/trust/xyz": CodeBadParameter, "/trust/" + a[1].ID + "?bogus=1": CodeUnknownParam,
		"/trust_graph?limit=0": CodeBadParameter, "/agents/" + a[1].ID + "/trust_received?min_score=2": CodeBadParameter,
	} {
		if ans := r.do(t, "GET", path, "", nil); ans.status != 400 || ans.code(t) != code {
			t.Errorf("GET %s: %d %s, want 400 %s", path, ans.status, ans.body, code)
		}
	}
}
