package branches_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay"
	"github.com/anp2net/relay/relay/relaytest"
	"github.com/anp2net/relay/relay/sqlite"
	"github.com/anp2net/relay/relay/state"
	"github.com/anp2net/relay/tasks/taskstest"
)

// postBatch publishes evs in one POST /events/batch, in that order: the
// relay commits them at once, so its commit hooks see them in one batch.
func (w *world) postBatch(evs ...*protocol.Event) {
	w.t.Helper()
	var body []byte
	body = append(body, '[')
	for i, e := range evs {
		if i > 0 {
			body = append(body, ',')
		}
		body = protocol.AppendJSON(body, e)
	}
	body = append(body, ']')
	a := w.r.Do(w.t, "POST", "/events/batch", "application/json", body)
	if a.Status != 200 || !strings.Contains(string(a.Body), fmt.Sprintf(`"accepted":%d`, len(evs))) {
		w.t.Fatalf("batch of %d: %d %s", len(evs), a.Status, a.Body)
	}
	w.evs = append(w.evs, evs...)
}

// revokeAnswers are the answers of r that main's live state gives, with
// ?branch=main and by default.
func revokeAnswers(t *testing.T, r *relaytest.Relay, at int64, agents []taskstest.Agent) map[string]string {
	t.Helper()
	paths := []string{fmt.Sprintf("/state?branch=main&at=%d", at), "/tasks?limit=500", "/tasks?limit=500&branch=main", "/trust_graph?branch=main"}
	for _, a := range agents {
		paths = append(paths, "/trust/"+a.ID, "/trust/"+a.ID+"?branch=main", "/agents/"+a.ID+"/credit?branch=main")
	}
	out := map[string]string{}
	for _, p := range paths {
		a := r.Do(t, "GET", p, "", nil)
		if a.Status != 200 {
			t.Fatalf("GET %s: %d %s", p, a.Status, a.Body)
		}
		body := string(a.Body)
		if strings.HasPrefix(p, "/state") { // the relay-local log position aside
			var d state.Digest
			if err := json.Unmarshal(a.Body, &d); err != nil {
				t.Fatal(err)
			}
			d.Seq = 0
			b, _ := json.Marshal(d)
			body = string(b)
		}
		out[p] = body
	}
	return out
}

// TestLiveRevokeBeforeTarget: main's live state after a rollback (folded
// incrementally as events commit) meets revocations before their targets —
// a batch holding a kind 9 before the event it revokes (a vote, a task, a
// flag), as a mirror or an import of a log holding them in that order
// commits them — and a revocation that makes a fork vanish, whose target
// falls back into main then. A revocation must find only the events
// already folded in, or a view is asked to remove an event it never saw:
// the trust graph then drops the voter's first-seen time of another of its
// events created in the same second (the new-agent penalty changes). The
// live state equals main's state rebuilt from the log, a relay restarted
// on the same log answers the same, and so does a relay mirroring it.
func TestLiveRevokeBeforeTarget(t *testing.T) {
	path := filepath.Join(t.TempDir(), "relay.db")
	st, err := sqlite.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	mod := newModule()
	w := &world{t: t, r: relaytest.On(t, st, []relay.Module{mod})}
	rb := rollBack(w, 5)
	awaitLive(t, w.r)
	mirror, fed := federated(t, "revoke-mirror")
	mirror.Clock.Add(time.Duration(w.now()-mirror.Clock.Now().Unix()) * time.Second)
	if res, err := fed.MirrorOnce(context.Background(), w.r.URL, nil); err != nil || res.Rejected != 0 {
		t.Fatalf("mirror: %+v %v", res, err)
	}
	awaitLive(t, mirror) // the mirror's main state is kept current from here

	v, v2 := taskstest.NewAgent("rev-voter"), taskstest.NewAgent("rev-voter-2")
	x, y := taskstest.NewAgent("rev-target-x"), taskstest.NewAgent("rev-target-y")
	w.r.Clock.Add(time.Minute)
	w.post(rb.core[0].Sign(6, w.now(), `{"score":1}`, []string{"p", v.ID}, []string{"p", v2.ID}))
	w.r.Clock.Add(time.Minute)
	at := w.now()
	vote := func(from, to taskstest.Agent, tags ...[]string) *protocol.Event {
		return from.Sign(6, at, `{"score":1}`, append([][]string{{"p", to.ID}}, tags...)...)
	}
	by := map[string]taskstest.Agent{v.ID: v, v2.ID: v2}
	for _, c := range rb.core {
		by[c.ID] = c
	}
	rev := func(e *protocol.Event) *protocol.Event {
		return by[e.AgentID].Sign(9, at, "", []string{"e", e.ID})
	}
	// v's kept vote, then a batch revoking its second vote of the same
	// second before that vote arrives.
	kept, gone := vote(v, x), vote(v, y)
	w.post(kept)
	task := taskstest.Request(rb.core[1], at, at+3600, taskstest.Reward{}, false)
	flag := rb.core[2].Sign(7, at, `{"category":"spam"}`, []string{"e", rb.attack[0].ID}, []string{"p", rb.attack[0].AgentID})
	w.postBatch(rev(gone), gone, rev(task), task, rev(flag), flag)
	// v2's vote tagging a fork only (outside main), and one in main of the
	// same second; revoking the tagged one makes the fork vanish.
	tagged := vote(v2, y, []string{"branch", "b-0badf00d"})
	w.post(vote(v2, x), tagged)
	w.r.Clock.Add(time.Minute)
	w.post(rev(tagged))
	w.r.Clock.Add(time.Minute)

	st1, err := w.r.Core.ViewState(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	if st1 == w.r.Core.State() {
		t.Fatal("after the rollback the views must answer from main's state")
	}
	if got, want := digestOf(st1, w.now()), w.rebuilt(mod, "main", w.now()); got.Digest != want.Digest || got.Events != want.Events {
		t.Fatalf("main's live state differs from the one rebuilt from the log: %s", state.FirstDifference(got, want))
	}

	// A relay mirroring the log commits the batch in the log's order,
	// each revocation before its target.
	mirror.Clock.Add(time.Duration(w.now()-mirror.Clock.Now().Unix()) * time.Second)
	if res, err := fed.MirrorOnce(context.Background(), w.r.URL, nil); err != nil || res.Rejected != 0 {
		t.Fatalf("mirror again: %+v %v", res, err)
	}
	awaitLive(t, mirror)
	// Trust and moderation answers read a published snapshot that a
	// commit makes stale until a background refresh: past their MaxLag
	// (300 s) after the last commit, the first read computes the exact
	// one, so every relay answers for the same events at the same time.
	w.r.Clock.Add(6 * time.Minute)
	mirror.Clock.Add(6 * time.Minute)
	agents := []taskstest.Agent{v, v2, x, y}
	live := revokeAnswers(t, w.r, w.now(), agents)
	for p, body := range revokeAnswers(t, mirror, w.now(), agents) {
		if body != live[p] {
			t.Fatalf("GET %s: the mirror answers\n%s\nthe relay\n%s", p, body, live[p])
		}
	}

	// A restart on the same log builds main's state from it.
	now := w.now()
	st.Close()
	st2, err := sqlite.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st2.Close() })
	again := relaytest.On(t, st2, []relay.Module{newModule()})
	again.Clock.Add(time.Duration(now-again.Clock.Now().Unix()) * time.Second)
	awaitLive(t, again)
	for p, body := range revokeAnswers(t, again, now, agents) {
		if body != live[p] {
			t.Fatalf("GET %s: rebuilt from the log\n%s\nlive\n%s", p, body, live[p])
		}
	}
}
