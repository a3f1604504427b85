package views_test

import (
	"encoding/json"
	"testing"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/relaytest"
	"github.com/anp2net/relay/tasks"
	"github.com/anp2net/relay/tasks/taskstest"
)

// TestCollusionChallengeDropsVerifierWeight: a high-stakes task passes
// with three of four verifiers; once collusion flags hide one passing
// verifier's kind 53 (seed §18.6.1, by the §7 machinery), that verifier
// weighs 0 in the consensus and the credit that follows it, and the task
// no longer passes; /state's tasks and credit digests change with it.
func TestCollusionChallengeDropsVerifierWeight(t *testing.T) {
	r := relaytest.Start(t, nil)
	ag := taskstest.Pool(10)
	req, prov, vs, flaggers := ag[0], ag[1], ag[2:6], ag[6:9]
	at := int64(relaytest.VectorTime - 3000)
	task := taskstest.Request(req, at, at+3600, taskstest.Reward{Amount: 5}, true)
	verdicts := []*protocol.Event{
		taskstest.Verify(vs[0], at+30, task, "passed", 1), taskstest.Verify(vs[1], at+31, task, "passed", 1),
		taskstest.Verify(vs[2], at+32, task, "passed", 1), taskstest.Verify(vs[3], at+33, task, "failed", 0),
	}
	evs := append([]*protocol.Event{task, taskstest.Accept(prov, at+10, task), taskstest.Result(prov, at+20, task)}, verdicts...)
	r.PostAll(t, evs, 1)
	view := func() tasks.TaskView {
		t.Helper()
		var v tasks.TaskView
		if ans := r.Do(t, "GET", "/task/"+task.ID, "", nil); ans.Status != 200 || json.Unmarshal(ans.Body, &v) != nil {
			t.Fatalf("task: %d %s", ans.Status, ans.Body)
		}
		return v
	}
	state := func() map[string]string {
		var d struct{ Views map[string]string }
		json.Unmarshal(r.Do(t, "GET", "/state", "", nil).Body, &d)
		return d.Views
	}
	credit := func() float64 {
		var a struct{ Balance float64 }
		json.Unmarshal(r.Do(t, "GET", "/agents/"+prov.ID+"/credit", "", nil).Body, &a)
		return a.Balance
	}
	if v := view(); v.Consensus.Verdict != "passed" || credit() <= 0 {
		t.Fatalf("before the challenge: %+v, provider credit %v", v.Consensus, credit())
	}
	before := state()
	var flags []*protocol.Event
	for _, f := range flaggers {
		flags = append(flags, f.Sign(protocol.KindFlag, at+40, map[string]any{"category": "collusion", "reason": "colludes with the provider"},
			[]string{"e", verdicts[0].ID}, []string{"p", vs[0].ID}))
	}
	r.PostAll(t, flags, 1)
	relaytest.Eventually(t, "the challenged verdict weighs 0", func() bool {
		for _, vd := range view().Verdicts {
			if vd.Verifier == vs[0].ID {
				return vd.Weight == 0 && !vd.Counts
			}
		}
		return false
	})
	if v := view(); v.Consensus.Verdict == "passed" || credit() > 0 {
		t.Fatalf("after the challenge: %+v, provider credit %v", v.Consensus, credit())
	}
	after := state()
	if after["tasks"] == before["tasks"] || after["credit"] == before["credit"] {
		t.Fatalf("digests did not follow the challenge: %v / %v", before, after)
	}
}
