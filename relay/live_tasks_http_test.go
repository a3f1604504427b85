package relay

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/tasks"
	"github.com/anp2net/relay/tasks/taskstest"
)

// TestLiveNetworkTaskShapesOnPublish publishes a task as the live network's
// seed agents write it (kind 50 with "cap", a ["t","task.request"] tag and a
// numeric max_cost_usd; kind 52 without the accept e tag): every event is
// accepted and the task settles. A quote above the reward in the reward's
// currency is refused (§18.4).
func TestLiveNetworkTaskShapesOnPublish(t *testing.T) {
	r := viewsRelay(t, filepath.Join(t.TempDir(), "r.db"))
	req, prov, ver := taskstest.NewAgent("requester"), taskstest.NewAgent("provider"), taskstest.NewAgent("verifier")
	at := int64(vectorTime - 600)
	task := taskstest.LiveRequest(req, at, at+3600, 10)
	if ans := r.post(t, task); ans.status != 200 {
		t.Fatalf("live kind 50: %d %s", ans.status, ans.body)
	}
	if ans := r.post(t, taskstest.Quote(prov, at+5, task, "credit", "11")); ans.status != 400 || ans.code(t) != protocol.CodePriceAboveReward {
		t.Fatalf("quote above the reward: %d %s", ans.status, ans.body)
	}
	for _, e := range []*protocol.Event{taskstest.Accept(prov, at+10, task), taskstest.LiveResult(prov, at+20, task),
		taskstest.Verify(ver, at+30, task, protocol.VerdictPassed, 1)} {
		if ans := r.post(t, e); ans.status != 200 {
			t.Fatalf("kind %d: %d %s", e.Kind, ans.status, ans.body)
		}
	}
	var v tasks.TaskView
	if ans := r.do(t, "GET", "/task/"+task.ID, "", nil); ans.status != 200 || json.Unmarshal(ans.body, &v) != nil {
		t.Fatalf("GET /task: %d %s", ans.status, ans.body)
	}
	if v.Status != tasks.StatusVerified || v.Capability != taskstest.Capability || v.Result == nil || !v.Result.AcceptInferred {
		t.Fatalf("task view: status %s capability %q result %+v", v.Status, v.Capability, v.Result)
	}
}
