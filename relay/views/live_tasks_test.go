package views_test

import (
	"encoding/json"
	"testing"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/relaytest"
	"github.com/anp2net/relay/tasks"
	"github.com/anp2net/relay/tasks/taskstest"
)

// TestLiveNetworkTaskShapesOnPublish publishes a task as the live network's
// seed agents write it (kind 50 with "cap", a ["t","task.request"] tag and a
// numeric max_cost_usd; kind 52 without the accept e tag): every event is
// accepted and the task settles. A quote above the reward in the reward's
// currency is refused (§18.4).
func TestLiveNetworkTaskShapesOnPublish(t *testing.T) {
	r := relaytest.Start(t, nil)
	req, prov, ver := taskstest.NewAgent("requester"), taskstest.NewAgent("provider"), taskstest.NewAgent("verifier")
	at := int64(relaytest.VectorTime - 600)
	task := taskstest.LiveRequest(req, at, at+3600, 10)
	if ans := r.Post(t, task); ans.Status != 200 {
		t.Fatalf("live kind 50: %d %s", ans.Status, ans.Body)
	}
	if ans := r.Post(t, taskstest.Quote(prov, at+5, task, "credit", "11")); ans.Status != 400 || ans.Code(t) != protocol.CodePriceAboveReward {
		t.Fatalf("quote above the reward: %d %s", ans.Status, ans.Body)
	}
	for _, e := range []*protocol.Event{taskstest.Accept(prov, at+10, task), taskstest.LiveResult(prov, at+20, task),
		taskstest.Verify(ver, at+30, task, protocol.VerdictPassed, 1)} {
		if ans := r.Post(t, e); ans.Status != 200 {
			t.Fatalf("kind %d: %d %s", e.Kind, ans.Status, ans.Body)
		}
	}
	var v tasks.TaskView
	if ans := r.Do(t, "GET", "/task/"+task.ID, "", nil); ans.Status != 200 || json.Unmarshal(ans.Body, &v) != nil {
		t.Fatalf("GET /task: %d %s", ans.Status, ans.Body)
	}
	if v.Status != tasks.StatusVerified || v.Capability != taskstest.Capability || v.Result == nil || !v.Result.AcceptInferred {
		t.Fatalf("task view: status %s capability %q result %+v", v.Status, v.Capability, v.Result)
	}
}
