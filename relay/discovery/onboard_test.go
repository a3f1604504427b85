package discovery_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay"
	"github.com/anp2net/relay/relay/directory"
	"github.com/anp2net/relay/relay/discovery"
	"github.com/anp2net/relay/relay/relaytest"
	"github.com/anp2net/relay/tasks"
	"github.com/anp2net/relay/tasks/taskstest"
)

type onboardAnswer struct {
	AgentID   string               `json:"agent_id"`
	Neighbors []discovery.Neighbor `json:"neighbors"`
	Beacons   []discovery.Beacon   `json:"beacons"`
	Feed      []discovery.FeedItem `json:"feed"`
	OpenTasks []tasks.TaskView     `json:"open_tasks"`
	Steps     []any                `json:"steps"`
}

// TestOnboarding (§12.6) through a real relay: the answer to an agent's
// first kind 0 names its neighbours — found from the profile alone, before
// any post — and a revision's answer does not; GET /onboarding/{id} gives
// neighbours, the beacons wanting its capability, a first feed from its
// neighbours' posts and the open tasks for its capability, and keeps the
// directory's checklist.
func TestOnboarding(t *testing.T) {
	r := relaytest.Start(t, []relay.Module{directory.NewModule(), discovery.NewModule()})
	a := taskstest.Pool(6)
	newbie, bob, carol, dave, erin, fred := a[0], a[1], a[2], a[3], a[4], a[5]
	now := int64(relaytest.VectorTime)
	bobPost := bob.Sign(protocol.KindPost, now-600, "ocean temperature sensor data from the harbor buoys", []string{"t", "climate"})
	task := taskstest.Request(carol, now-500, now+3600, taskstest.Reward{}, false)
	var content map[string]any
	json.Unmarshal([]byte(task.Content), &content)
	content["capability"] = "paint.walls"
	otherTask := fred.Sign(protocol.KindTaskRequest, now-500, content, []string{"t", "paint.walls"}, []string{"cap_wanted", "paint.walls"})
	beacon := erin.Sign(protocol.KindBeacon, now-400, map[string]any{"intent": "seek", "about": "need text transformed"}, []string{"cap_wanted", taskstest.Capability})
	r.PostAll(t, []*protocol.Event{
		bobPost, task, otherTask, beacon,
		dave.Sign(protocol.KindPost, now-300, "stock market closing prices", []string{"t", "markets"}),
	}, 1)

	profile := newbie.Sign(protocol.KindProfile, now-100, map[string]any{
		"name": "newbie", "about": "I analyse ocean temperature sensor data",
		"capabilities": []map[string]any{{"name": taskstest.Capability}},
	})
	ans := r.Post(t, profile)
	var first struct {
		ID         string               `json:"id"`
		Accepted   bool                 `json:"accepted"`
		Neighbors  []discovery.Neighbor `json:"neighbors"`
		Onboarding string               `json:"onboarding"`
	}
	if err := json.Unmarshal(ans.Body, &first); err != nil || ans.Status != 200 || !first.Accepted || first.ID != profile.ID {
		t.Fatalf("first profile: %d %s", ans.Status, ans.Body)
	}
	if len(first.Neighbors) != 1 || first.Neighbors[0].AgentID != bob.ID || first.Onboarding != "/onboarding/"+newbie.ID {
		t.Fatalf("first profile's neighbours: %s", ans.Body)
	}
	if ans := r.Post(t, profile); strings.Contains(string(ans.Body), "neighbors") {
		t.Fatalf("a duplicate's answer: %s", ans.Body)
	}
	revision := newbie.Sign(protocol.KindProfile, now-90, map[string]any{"name": "newbie", "about": "I analyse ocean temperature sensor data"})
	if ans := r.Post(t, revision); ans.Status != 200 || strings.Contains(string(ans.Body), "neighbors") {
		t.Fatalf("a revision's answer: %d %s", ans.Status, ans.Body)
	}
	r.PostAll(t, []*protocol.Event{newbie.Sign(protocol.KindCapability, now-80, map[string]any{}, []string{"cap", taskstest.Capability})}, 1)

	var got onboardAnswer
	get(t, r, "/onboarding/"+newbie.ID, &got)
	if got.AgentID != newbie.ID || len(got.Steps) == 0 {
		t.Fatalf("the directory's checklist is gone: %+v", got)
	}
	if len(got.Neighbors) != 1 || got.Neighbors[0].AgentID != bob.ID {
		t.Fatalf("neighbours: %+v", got.Neighbors)
	}
	if len(got.Beacons) != 1 || got.Beacons[0].ID != beacon.ID {
		t.Fatalf("beacons: %+v", got.Beacons)
	}
	if len(got.OpenTasks) != 1 || got.OpenTasks[0].TaskID != task.ID {
		t.Fatalf("open tasks: %+v", got.OpenTasks)
	}
	var feed []string
	for _, it := range got.Feed {
		feed = append(feed, it.Event.ID)
	}
	if !strings.Contains(strings.Join(feed, ","), bobPost.ID) || strings.Contains(strings.Join(feed, ","), otherTask.ID) {
		t.Fatalf("first feed %v: want bob's post", feed)
	}
	refuse(t, r, "/onboarding/nothex", 400, "invalid_parameter")
}
