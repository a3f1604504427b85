package directory_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay"
	"github.com/anp2net/relay/relay/directory"
	"github.com/anp2net/relay/relay/relaytest"
	"github.com/anp2net/relay/tasks/taskstest"
)

// TestHomeFollowsBootstrapFor: /api/home's open_tasks mark as
// bootstrap_for_you exactly the kind 50s tagged ["bootstrap_for", agent]
// (seed §18.11), list them first (so a limit of one still shows it), and
// quick_links name the spec and /heartbeat.md.
func TestHomeFollowsBootstrapFor(t *testing.T) {
	r := relaytest.Start(t, []relay.Module{directory.NewModule()})
	a := taskstest.Pool(4)
	issuer, carol, dave := a[0], a[1], a[2]
	at := int64(relaytest.VectorTime - 900)
	tagged := func(at int64, tags ...[]string) *protocol.Event {
		base := taskstest.Request(issuer, at, at+3600, taskstest.Reward{Amount: 5}, false)
		var content map[string]any
		if err := json.Unmarshal([]byte(base.Content), &content); err != nil {
			t.Fatal(err)
		}
		tags = append(tags, []string{"t", taskstest.Capability}, []string{"cap_wanted", taskstest.Capability}, []string{"t", "onboarding"})
		return issuer.Sign(protocol.KindTaskRequest, at, content, tags...)
	}
	forCarol := tagged(at, []string{"bootstrap_for", carol.ID})
	forDave := tagged(at+1, []string{"bootstrap_for", dave.ID})
	ambient := tagged(at + 2)
	r.PostAll(t, []*protocol.Event{forCarol, forDave, ambient}, 1)

	type open struct {
		TaskID    string   `json:"task_id"`
		Bootstrap bool     `json:"bootstrap_for_you"`
		Topics    []string `json:"all_topics"`
	}
	home := func(limit string) (list []open, links map[string]string) {
		ans := r.Do(t, "GET", "/api/home?agent_id="+carol.ID+"&limit="+limit, "", nil)
		var h struct {
			Open  []open            `json:"open_tasks"`
			Links map[string]string `json:"quick_links"`
		}
		if ans.Status != 200 || json.Unmarshal(ans.Body, &h) != nil {
			t.Fatalf("home: %d %s", ans.Status, ans.Body)
		}
		return h.Open, h.Links
	}
	list, links := home("1")
	if len(list) != 1 || list[0].TaskID != forCarol.ID || !list[0].Bootstrap {
		t.Fatalf("limit 1: %+v; want carol's bootstrap task %s", list, forCarol.ID)
	}
	list, _ = home("10")
	if len(list) != 3 || list[0].TaskID != forCarol.ID {
		t.Fatalf("limit 10: %+v", list)
	}
	for _, o := range list {
		if o.Bootstrap != (o.TaskID == forCarol.ID) {
			t.Fatalf("task %s bootstrap_for_you=%v", o.TaskID, o.Bootstrap)
		}
		if len(o.Topics) != 2 || o.Topics[0] != taskstest.Capability || o.Topics[1] != "onboarding" {
			t.Fatalf("task %s all_topics %v", o.TaskID, o.Topics)
		}
	}
	for k, path := range map[string]string{"spec": "/openapi.json", "heartbeat": "/heartbeat.md"} {
		if u := links[k]; u != r.URL+path || !strings.HasPrefix(u, "http") {
			t.Fatalf("quick_links.%s = %q; want %s%s", k, u, r.URL, path)
		}
	}
}
