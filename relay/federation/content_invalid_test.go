package federation

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/offline"
	"github.com/anp2net/relay/relay/relaytest"
	"github.com/anp2net/relay/relay/sqlite"
	"github.com/anp2net/relay/relay/state"
	"github.com/anp2net/relay/tasks"
	"github.com/anp2net/relay/tasks/taskstest"
)

// contentInvalid returns validly signed events whose content breaks their
// kind's rule, beside the valid events they refer to, and a live-network
// task (kind 50 with "cap", kind 52 without the accept tag).
func contentInvalid() (evs []*protocol.Event, task *protocol.Event) {
	a, b, c := taskstest.NewAgent("ci-a"), taskstest.NewAgent("ci-b"), taskstest.NewAgent("ci-c")
	at := int64(vectorTime - 7200)
	task = taskstest.LiveRequest(a, at, at+3600, 10)
	post := b.Sign(protocol.KindPost, at+1, "hello")
	evs = []*protocol.Event{
		task, post,
		b.Sign(protocol.KindTrustVote, at+2, map[string]any{"score": 5, "reason": "too much"}, []string{"p", a.ID}),
		c.Sign(protocol.KindFlag, at+3, map[string]any{"category": "nonsense"}, []string{"e", post.ID}, []string{"p", b.ID}),
		c.Sign(protocol.KindRevoke, at+4, "no target"),
		taskstest.GarbageRequest(a, at+5),
		taskstest.Quote(c, at+6, task, "credit", "11"), // earliest accept, but above the reward: never wins
		taskstest.Accept(b, at+7, task),
		taskstest.LiveResult(b, at+8, task),
		c.Sign(protocol.KindTaskVerify, at+9, map[string]any{"task_id": task.ID, "verdict": "passed", "score": 5},
			[]string{"e", task.ID, "root"}, []string{"e", task.ID, "verify"}, []string{"e", task.ID, "result"}, []string{"p", a.ID}),
		taskstest.Verify(taskstest.NewAgent("ci-d"), at+10, task, protocol.VerdictPassed, 1),
	}
	// Every other kind with a content rule, in garbage: no fold may
	// panic or count it.
	for i, kind := range []int64{protocol.KindProfile, protocol.KindDM, protocol.KindCapability, protocol.KindKnowledge,
		protocol.KindSubscribe, protocol.KindCheckpoint, protocol.KindRollback, protocol.KindBan, protocol.KindFunding,
		protocol.KindPayment, protocol.KindTaskCancel} {
		evs = append(evs, c.Sign(kind, at+20+int64(i), "{not json", []string{"e", task.ID, "root"}))
	}
	return evs, task
}

// TestContentInvalidEventsAreStoredEverywhere: a peer holding validly signed
// events whose content breaks a kind rule (received by gossip from a chosen
// peer) passes them to a mirror, which stores them; both serve the same
// /state, equal to offline.Replayer's over the peer's export, and an import
// of that export stores them too. The folds count none of them and say why.
func TestContentInvalidEventsAreStoredEverywhere(t *testing.T) {
	evs, task := contentInvalid()
	feeder := taskstest.NewAgent("feeder relay")
	p := startRelay(t, Options{PeerKeys: []string{feeder.ID}})
	body, _ := json.Marshal(evs)
	var g gossipAnswer
	if ans := p.gossipAs(t, feeder.Key, "/gossip", "application/json", body); ans.status != 200 || json.Unmarshal(ans.body, &g) != nil {
		t.Fatalf("gossip: %d %s", ans.status, ans.body)
	}
	if g.Accepted != len(evs) || len(g.Rejected) != 0 {
		t.Fatalf("gossip dropped authentic events: %+v", g)
	}
	m, ms := peerRelay(t, "mirror")
	if res, err := ms.MirrorOnce(context.Background(), p.URL, nil); err != nil || res.Rejected != 0 {
		t.Fatalf("mirror: %+v %v", res, err)
	}
	if p.count(t) != int64(len(evs)) || m.count(t) != int64(len(evs)) {
		t.Fatalf("peer holds %d, mirror %d, want %d", p.count(t), m.count(t), len(evs))
	}
	at := int64(vectorTime)
	dp, dm := p.state(t, at), m.state(t, at)
	if dp.Digest != dm.Digest {
		t.Fatalf("mirror's state differs in %q", state.FirstDifference(dp, dm))
	}

	export := filepath.Join(t.TempDir(), "export.jsonl")
	ans := p.do(t, "GET", "/export?seq=true", "", nil)
	if ans.status != 200 || os.WriteFile(export, ans.body, 0o644) != nil {
		t.Fatalf("export: %d", ans.status)
	}
	checker := relaytest.Config(relaytest.NewClock(at)).Checker
	rp := &offline.Replayer{Checker: checker, Now: at}
	s, stats, err := rp.Replay(context.Background(), export)
	if err != nil || stats.Valid != len(evs) {
		t.Fatalf("replay: %+v %v", stats, err)
	}
	if dr := s.Digest(at); dr.Digest != dp.Digest {
		t.Fatalf("replay differs from the peer in %q", state.FirstDifference(dr, dp))
	}

	st, err := sqlite.Open(filepath.Join(t.TempDir(), "imported.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	f, _ := os.Open(export)
	defer f.Close()
	im := &offline.Importer{Store: st, Checker: checker, Now: at}
	if ist, err := im.Import(context.Background(), f); err != nil || ist.Accepted != len(evs) {
		t.Fatalf("import: %+v %v", ist, err)
	}
	imported := startOn(t, st, Options{})
	if di := imported.state(t, at); di.Digest != dp.Digest {
		t.Fatalf("imported relay's state differs in %q", state.FirstDifference(di, dp))
	}

	// The folds: the task settles through the live shapes and the
	// malformed events are shown as not counting, with the rule broken.
	var v tasks.TaskView
	if ans := m.do(t, "GET", "/task/"+task.ID, "", nil); ans.status != 200 || json.Unmarshal(ans.body, &v) != nil {
		t.Fatalf("GET /task: %d %s", ans.status, ans.body)
	}
	if v.Status != tasks.StatusVerified || v.Provider != evs[7].AgentID || v.Result == nil || !v.Result.AcceptInferred {
		t.Fatalf("task: status %s provider %.8s result %+v", v.Status, v.Provider, v.Result)
	}
	reasons := map[string]string{}
	for _, e := range v.Events {
		reasons[e.EventID] = e.Reason
	}
	if reasons[evs[6].ID] != protocol.CodePriceAboveReward || reasons[evs[9].ID] != "content_invalid: "+protocol.CodeInvalidTaskContent {
		t.Fatalf("reasons: %v", reasons)
	}
	if ans := m.do(t, "GET", "/task/"+evs[5].ID, "", nil); ans.status != 404 {
		t.Fatalf("a garbage kind 50 is a task: %d", ans.status)
	}
	// A vote with score 5 is not a vote: the target has no voter.
	var tr struct {
		VoterCount int `json:"voter_count"`
	}
	if ans := m.do(t, "GET", "/trust/"+evs[0].AgentID, "", nil); ans.status != 200 || json.Unmarshal(ans.body, &tr) != nil || tr.VoterCount != 0 {
		t.Fatalf("trust: %d %s", ans.status, ans.body)
	}
}
