package views_test

import (
	"encoding/json"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay"
	"github.com/anp2net/relay/relay/relaytest"
	"github.com/anp2net/relay/relay/sqlite"
	"github.com/anp2net/relay/relay/state"
	"github.com/anp2net/relay/relay/state/statetest"
	"github.com/anp2net/relay/tasks/taskstest"
	"math/rand/v2"
)

const corpusBase = relaytest.VectorTime - 3600

// onFile runs a relay over the log at path (opened here, closed when the
// test ends), so a test can restart it over the same log.
func onFile(t *testing.T, path string) *relaytest.Relay {
	t.Helper()
	st, err := sqlite.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return relaytest.On(t, st, nil)
}

// stateAt reads GET /state?at=.
func stateAt(t *testing.T, r *relaytest.Relay, at int64) state.Digest {
	t.Helper()
	var d state.Digest
	a := r.Do(t, "GET", "/state?at="+strconv.FormatInt(at, 10), "", nil)
	if a.Status != 200 {
		t.Fatalf("GET /state: %d %s", a.Status, a.Body)
	}
	if err := json.Unmarshal(a.Body, &d); err != nil {
		t.Fatal(err)
	}
	return d
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

// TestStateAgreesAcrossOrdersAndReplay publishes one random stream to live
// relays in shuffled orders (8 concurrent publishers, so arrival order is
// also left to the scheduler), restarts one from its database, and requires
// every /state to equal a from-scratch replay of the same events.
func TestStateAgreesAcrossOrdersAndReplay(t *testing.T) {
	evs := statetest.Corpus(42, 20, 30, corpusBase, 1800)
	times := []int64{relaytest.VectorTime, relaytest.VectorTime + 7200, relaytest.VectorTime + 30*86400}
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
		r := onFile(t, path)
		r.PostAll(t, order, 8)
		for _, at := range times {
			got, exp := stateAt(t, r, at), want.Digest(at)
			if got.Digest != exp.Digest || got.Events != int64(len(evs)) {
				t.Fatalf("order %d at %d: view %q differs\nrelay  %+v\nreplay %+v", k, at, state.FirstDifference(got, exp), got, exp)
			}
		}
		if k == 0 {
			// A restart rebuilds the views from the log alone.
			r.Close()
			r.Store.Close()
			again := onFile(t, path)
			if got, exp := stateAt(t, again, times[1]), want.Digest(times[1]); got.Digest != exp.Digest {
				t.Fatalf("after restart: view %q differs", state.FirstDifference(got, exp))
			}
		}
	}
}

func TestTrustRoutes(t *testing.T) {
	r := relaytest.Start(t, nil)
	a := taskstest.Pool(4)
	vote := func(from, to taskstest.Agent, score float64, at int64) *protocol.Event {
		return from.Sign(protocol.KindTrustVote, at, map[string]any{"score": score, "reason": "good"}, []string{"p", to.ID})
	}
	for _, e := range []*protocol.Event{
		vote(a[0], a[1], 1, relaytest.VectorTime-100), vote(a[2], a[1], 0.5, relaytest.VectorTime-90),
		vote(a[0], a[2], 1, relaytest.VectorTime-80), vote(a[3], a[1], 0, relaytest.VectorTime-70),
	} {
		if ans := r.Post(t, e); ans.Status != 200 {
			t.Fatalf("publish: %d %s", ans.Status, ans.Body)
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
		json.Unmarshal(r.Do(t, "GET", "/trust/"+a[1].ID, "", nil).Body, &tr)
		return tr.VoterCount == 2
	})
	if tr.Rank != 1 || tr.Weighted <= 0 || len(tr.Votes) != 2 {
		t.Fatalf("trust of a1: %+v", tr)
	}
	json.Unmarshal(r.Do(t, "GET", "/trust/"+a[1].ID+"?include_withdrawn=true", "", nil).Body, &tr)
	if len(tr.Votes) != 3 {
		t.Fatalf("include_withdrawn: %d votes, want 3", len(tr.Votes))
	}
	var g struct {
		Total  int `json:"total"`
		Agents []struct {
			AgentID string `json:"agent_id"`
		} `json:"agents"`
	}
	json.Unmarshal(r.Do(t, "GET", "/trust_graph", "", nil).Body, &g)
	if g.Total != 2 || g.Agents[0].AgentID != a[1].ID {
		t.Fatalf("trust_graph: %+v", g)
	}
	var rec struct {
		Count    int     `json:"count"`
		ScoreSum float64 `json:"score_sum"`
		Filter   map[string]any
	}
	json.Unmarshal(r.Do(t, "GET", "/agents/"+a[1].ID+"/trust_received?min_score=0.75", "", nil).Body, &rec)
	if rec.Count != 1 || rec.ScoreSum != 1 || rec.Filter["min_score"] != 0.75 {
		t.Fatalf("trust_received: %+v", rec)
	}
	for path, code := range map[string]string{
		"/trust/xyz": relay.CodeBadParameter, "/trust/" + a[1].ID + "?bogus=1": relay.CodeUnknownParam,
		"/trust_graph?limit=0": relay.CodeBadParameter, "/agents/" + a[1].ID + "/trust_received?min_score=2": relay.CodeBadParameter,
	} {
		if ans := r.Do(t, "GET", path, "", nil); ans.Status != 400 || ans.Code(t) != code {
			t.Errorf("GET %s: %d %s, want 400 %s", path, ans.Status, ans.Body, code)
		}
	}
}

// TestFlagsRoute: the flags view of a stored event nobody flagged names
// its author, an unknown event is a 404, and three flags that hide a post
// are listed with the transition to hidden.
func TestFlagsRoute(t *testing.T) {
	r := relaytest.Start(t, nil)
	a := taskstest.Pool(4)
	author, flaggers := a[0], a[1:4]
	post := author.Sign(protocol.KindPost, relaytest.VectorTime-500, "hello", []string{"t", "weather"})
	r.PostAll(t, []*protocol.Event{post}, 1)
	var m struct {
		Author     string `json:"author"`
		Visibility string `json:"visibility"`
		FlagCount  int    `json:"flag_count"`
		Flags      []struct {
			Flagger string  `json:"flagger"`
			Weight  float64 `json:"weight"`
		} `json:"flags"`
		History []struct{ Visibility string } `json:"history"`
	}
	ans := r.Do(t, "GET", "/events/"+post.ID+"/flags", "", nil)
	if ans.Status != 200 || json.Unmarshal(ans.Body, &m) != nil || m.Author != author.ID {
		t.Fatalf("flags of an unflagged event: %d %s", ans.Status, ans.Body)
	}
	if ans := r.Do(t, "GET", "/events/"+strings.Repeat("ab", 32)+"/flags", "", nil); ans.Status != 404 {
		t.Fatalf("flags of an unknown event: %d", ans.Status)
	}
	var flags []*protocol.Event
	for i, f := range flaggers {
		flags = append(flags, f.Sign(protocol.KindFlag, relaytest.VectorTime-300+int64(i), map[string]any{"category": "spam"},
			[]string{"e", post.ID}, []string{"p", author.ID}))
	}
	r.PostAll(t, flags, 1)
	eventually(t, "post hidden", func() bool {
		json.Unmarshal(r.Do(t, "GET", "/events/"+post.ID+"/flags", "", nil).Body, &m)
		return m.Visibility == "hidden"
	})
	if m.FlagCount != 3 || len(m.Flags) != 3 || len(m.History) != 1 || m.History[0].Visibility != "hidden" {
		t.Errorf("flags: %+v", m)
	}
}
