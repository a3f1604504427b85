package main

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/branches"
	"github.com/anp2net/relay/relay/federation"
	"github.com/anp2net/relay/relay/governance"
	"github.com/anp2net/relay/relay/relaytest"
	"github.com/anp2net/relay/tasks/taskstest"
	"github.com/anp2net/relay/trust"
)

// TestSovereignRollbackFeedsBranches: a valid sovereign rollback_to act
// (kind 30, governance) naming a valid checkpoint activates a rollback in
// the branches module exactly as a cosigned kind 13 would: main leaves the
// attack out, the pre-rollback branch keeps it. The same act signed by a
// key that is not sovereign changes nothing. Runs the relay's real module
// list (cmd/anp2/modules.go), which wires the two modules together.
func TestSovereignRollbackFeedsBranches(t *testing.T) {
	sov, stranger := taskstest.NewAgent("sovereign"), taskstest.NewAgent("not sovereign")
	mods, err := modules(federation.DefaultOptions(), governance.Options{SovereignKeys: []string{sov.ID}})
	if err != nil {
		t.Fatal(err)
	}
	r := relaytest.Start(t, mods.all)
	now := func() int64 { return r.Clock.Now().Unix() }
	post := func(evs ...*protocol.Event) {
		t.Helper()
		for _, e := range evs {
			if a := r.Post(t, e); a.Status != 200 {
				t.Fatalf("publish kind %d: %d %s", e.Kind, a.Status, a.Body)
			}
		}
	}
	get := func(path string, out any) {
		t.Helper()
		a := r.Do(t, "GET", path, "", nil)
		if a.Status != 200 || json.Unmarshal(a.Body, out) != nil {
			t.Fatalf("GET %s: %d %s", path, a.Status, a.Body)
		}
	}
	core := make([]taskstest.Agent, 4)
	for i := range core {
		core[i] = taskstest.NewAgent(fmt.Sprintf("core-%d", i))
	}
	for i, a := range core {
		var tags [][]string
		for j, b := range core {
			if i != j {
				tags = append(tags, []string{"p", b.ID})
			}
		}
		post(a.Sign(6, now(), `{"score":1}`, tags...))
	}
	r.Clock.Add(time.Hour)
	asOf := trust.EvalTime(now())
	r.Clock.Add(time.Minute)
	var draft branches.Checkpoint
	get(fmt.Sprintf("/checkpoints/draft?as_of=%d&checkpoint_id=cp-1", asOf), &draft)
	content, _ := json.Marshal(draft)
	var cosigns [][]string
	for _, c := range core[1:3] {
		tag, err := protocol.Cosign(c.Key, 12, string(content))
		if err != nil {
			t.Fatal(err)
		}
		cosigns = append(cosigns, tag)
	}
	cp := core[0].Sign(12, now(), string(content), cosigns...)
	post(cp)
	r.Clock.Add(time.Minute)
	spam := taskstest.NewAgent("spammer")
	post(spam.Sign(1, now(), "buy now"))
	r.Clock.Add(time.Minute)

	sovereignAct := func(by taskstest.Agent, reason string) *protocol.Event {
		b, _ := json.Marshal(map[string]any{"act": "rollback_to", "reason": reason})
		return by.Sign(governance.KindSovereignAct, now(), string(b), []string{"e", cp.ID})
	}
	spamPosts := func(query string) int {
		var evs []json.RawMessage
		get("/events?kinds=1&authors="+spam.ID+query, &evs)
		return len(evs)
	}
	post(sovereignAct(stranger, "not mine to order"))
	r.Clock.Add(time.Minute)
	var rbs []struct {
		ID           string
		State        string
		Branch       string
		SovereignAct bool `json:"sovereign_act"`
	}
	get("/rollbacks", &rbs)
	if len(rbs) != 0 || spamPosts("") != 1 {
		t.Fatalf("an act by a non-sovereign key rolled back: %+v", rbs)
	}
	act := sovereignAct(sov, "sybil attack")
	post(act)
	r.Clock.Add(time.Minute)
	get("/rollbacks", &rbs)
	if len(rbs) != 1 || rbs[0].ID != act.ID || rbs[0].State != "activated" || !rbs[0].SovereignAct || rbs[0].Branch != "pre-rollback-"+act.ID[:8] {
		t.Fatalf("rollbacks after the sovereign act: %+v", rbs)
	}
	if n, pre := spamPosts(""), spamPosts("&branch="+rbs[0].Branch); n != 0 || pre != 1 {
		t.Fatalf("spam on main %d (want 0), on the pre-rollback branch %d (want 1)", n, pre)
	}
}
