package governance_test

import (
	"testing"
	"time"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/governance"
	"github.com/anp2net/relay/tasks/taskstest"
)

// TestDeadManFiresOnItsOwn: with stewards appointed and no kind 31 at
// all, the switch fires when the sovereign keys have been silent for the
// dormancy period (seed §15.4, "an event automatically fires"): before
// it the stewards' act is ignored, after it their act is valid and
// /sovereign/state and /phase name the automatic transfer; activity by a
// sovereign key restarts the count.
func TestDeadManFiresOnItsOwn(t *testing.T) {
	k := newKeys()
	r := start(t, k)
	now := func() int64 { return r.Clock.Now().Unix() }
	s1, s2 := taskstest.NewAgent("auto-st1"), taskstest.NewAgent("auto-st2")
	mallory, eve := taskstest.NewAgent("auto-mallory"), taskstest.NewAgent("auto-eve")
	t0 := now()
	post(t, r, act(t, k.sov[0], t0, map[string]any{"act": "appoint_steward", "multisig_threshold": 2}, k.sov[1:],
		[]string{"p", s1.ID}, []string{"p", s2.ID}), 200, "")
	r.Clock.Add(200 * 24 * time.Hour)
	activity := now()
	post(t, r, k.sov[1].Sign(protocol.KindPost, activity, "still here"), 200, "")
	r.Clock.Add(300 * 24 * time.Hour) // 500 days after the appointment, 300 after the activity
	early := act(t, s1, now(), map[string]any{"act": "ban_agent", "reason": "too early"}, []taskstest.Agent{s2}, []string{"p", mallory.ID})
	post(t, r, early, 200, "")
	post(t, r, mallory.Sign(protocol.KindPost, now(), "not banned"), 200, "")

	r.Clock.Add(66 * 24 * time.Hour) // 366 days of silence: fired at activity + 365 d
	var st struct {
		Regime struct {
			Keys  []string `json:"sovereign_keys"`
			Since int64    `json:"since"`
			By    string   `json:"by"`
		} `json:"regime"`
	}
	getJSON(t, r, "/sovereign/state", &st)
	if st.Regime.By != governance.ByAutomatic || st.Regime.Since != activity+governance.DefaultDeadManAfter || len(st.Regime.Keys) != 2 {
		t.Fatalf("regime after the dormancy: %+v", st.Regime)
	}
	var ph struct {
		Keys []string `json:"sovereign_keys"`
		By   string   `json:"authority_transferred_by"`
	}
	getJSON(t, r, "/phase", &ph)
	if ph.By != governance.ByAutomatic || len(ph.Keys) != 2 {
		t.Fatalf("phase: %+v", ph)
	}
	late := act(t, s1, now(), map[string]any{"act": "ban_agent", "reason": "stewards hold authority"}, []taskstest.Agent{s2}, []string{"p", eve.ID})
	post(t, r, late, 200, "")
	post(t, r, eve.Sign(protocol.KindPost, now(), "banned"), 403, governance.CodeBanned)
	oldKeys := act(t, k.sov[0], now(), map[string]any{"act": "ban_agent", "reason": "old keys"}, k.sov[1:], []string{"p", mallory.ID})
	post(t, r, oldKeys, 200, "")

	var rows []struct {
		ID      string `json:"id"`
		Ignored string `json:"ignored"`
	}
	getJSON(t, r, "/sovereign_log", &rows)
	got := map[string]string{}
	for _, row := range rows {
		got[row.ID] = row.Ignored
	}
	for id, want := range map[string]string{early.ID: governance.WhyBelowThreshold, late.ID: "", oldKeys.ID: governance.WhyBelowThreshold} {
		if got[id] != want {
			t.Errorf("act %s: ignored %q, want %q", id, got[id], want)
		}
	}
}
