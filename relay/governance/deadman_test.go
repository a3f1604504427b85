package governance_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/governance"
	"github.com/anp2net/relay/tasks/taskstest"
)

func deadMan(t *testing.T, author taskstest.Agent, at int64, content map[string]any, co ...taskstest.Agent) *protocol.Event {
	t.Helper()
	b, _ := json.Marshal(content)
	var tags [][]string
	for _, c := range co {
		tag, err := protocol.Cosign(c.Key, governance.KindDeadMan, string(b))
		if err != nil {
			t.Fatal(err)
		}
		tags = append(tags, tag)
	}
	return author.Sign(governance.KindDeadMan, at, string(b), tags...)
}

// TestDeadManSwitch walks §15.4 with a controlled clock: stewards
// appointed 2-of-3 cannot take authority while the sovereign keys are
// active (any event by them counts, whatever a kind 31 claims), nor with
// one signature; after a year of dormancy two stewards transfer authority
// to a new set, whose acts then count while the old keys' do not.
func TestDeadManSwitch(t *testing.T) {
	k := newKeys()
	r := start(t, k)
	now := func() int64 { return r.Clock.Now().Unix() }
	s1, s2, s3 := taskstest.NewAgent("st1"), taskstest.NewAgent("st2"), taskstest.NewAgent("st3")
	n1, n2 := taskstest.NewAgent("new1"), taskstest.NewAgent("new2")
	mallory := taskstest.NewAgent("mallory")
	t0 := now()
	post(t, r, act(t, k.sov[0], t0, map[string]any{"act": "appoint_steward", "multisig_threshold": 2}, k.sov[1:],
		[]string{"p", s1.ID}, []string{"p", s2.ID}, []string{"p", s3.ID}), 200, "")

	r.Clock.Add(100 * 24 * time.Hour)
	activity := now()
	post(t, r, k.sov[1].Sign(protocol.KindPost, activity, "still here"), 200, "")
	r.Clock.Add(300 * 24 * time.Hour)
	early := deadMan(t, s1, now(), map[string]any{"trigger": "dead_man_switch", "last_sovereign_activity": t0,
		"new_stewards": []string{n1.ID, n2.ID}, "multisig_threshold": 2}, s2)
	post(t, r, early, 200, "")
	r.Clock.Add(70 * 24 * time.Hour)
	lone := deadMan(t, s1, now(), map[string]any{"trigger": "dead_man_switch", "new_stewards": []string{n1.ID}})
	post(t, r, lone, 200, "")
	valid := deadMan(t, s3, now(), map[string]any{"trigger": "dead_man_switch", "last_sovereign_activity": t0,
		"new_stewards": []string{n1.ID, n2.ID}, "multisig_threshold": 2}, s2)
	post(t, r, valid, 200, "")
	r.Clock.Add(time.Second) // acts of the transfer's own second are ordered by id

	oldBan := act(t, k.sov[0], now(), map[string]any{"act": "ban_agent", "reason": "old keys"}, k.sov[1:], []string{"p", mallory.ID})
	post(t, r, oldBan, 200, "")
	post(t, r, mallory.Sign(protocol.KindPost, now(), "not banned"), 200, "")
	newBan := act(t, n1, now(), map[string]any{"act": "ban_agent", "reason": "new keys"}, []taskstest.Agent{n2}, []string{"p", mallory.ID})
	post(t, r, newBan, 200, "")
	post(t, r, mallory.Sign(protocol.KindPost, now(), "banned"), 403, governance.CodeBanned)

	var rows []struct {
		ID      string              `json:"id"`
		Valid   bool                `json:"valid"`
		Ignored string              `json:"ignored"`
		DeadMan *governance.DeadMan `json:"dead_man"`
	}
	getJSON(t, r, "/sovereign_log", &rows)
	got := map[string]string{}
	for _, row := range rows {
		got[row.ID] = row.Ignored
		if row.ID == early.ID && (row.DeadMan == nil || row.DeadMan.Derived != activity || row.DeadMan.Claimed != t0) {
			t.Fatalf("early kind 31: %+v", row.DeadMan)
		}
	}
	want := map[string]string{early.ID: governance.WhySovereignActive, lone.ID: governance.WhyBelowStewards,
		valid.ID: "", oldBan.ID: governance.WhyBelowThreshold, newBan.ID: ""}
	for id, w := range want {
		if got[id] != w {
			t.Fatalf("act %s: ignored %q, want %q", id, got[id], w)
		}
	}
	var ph struct {
		Keys []string `json:"sovereign_keys"`
		By   string   `json:"authority_transferred_by"`
	}
	getJSON(t, r, "/phase", &ph)
	if len(ph.Keys) != 2 || ph.By != valid.ID {
		t.Fatalf("phase: %+v", ph)
	}
}
