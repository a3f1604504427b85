package branches_test

import (
	"testing"
	"time"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay"
	"github.com/anp2net/relay/relay/relaytest"
	"github.com/anp2net/relay/relay/tiers"
	"github.com/anp2net/relay/tasks/taskstest"
)

// TestStandingAfterRollback: the PoW bypass's standing (SPEC §12.1) is
// read from the preferred branch's state (§17.5), so tasks an activated
// rollback left out of main do not count toward it, in the pre-check, the
// check under the writer and GET /agents/{id}/standing alike; tasks in
// main do.
func TestStandingAfterRollback(t *testing.T) {
	o := tiers.DefaultStandingOptions()
	o.Bypass, o.Threshold, o.MinVerifiers = true, 2, 2
	tm := tiers.NewModule(tiers.Options{})
	if err := tm.ConfigureStanding(o); err != nil {
		t.Fatal(err)
	}
	w := &world{t: t, r: relaytest.Start(t, []relay.Module{newModule(), tm})}
	rb := rollBack(w, 5)
	awaitLive(t, w.r)
	provider, requester := taskstest.NewAgent("standing-provider"), taskstest.NewAgent("standing-requester")
	tasksAt := func(at int64) {
		for i := range 2 {
			ts := at + int64(10*i)
			req := taskstest.Request(requester, ts, ts+3600, taskstest.Reward{Amount: 10 + i}, false)
			w.post(req, taskstest.Accept(provider, ts+1, req), taskstest.Result(provider, ts+2, req),
				taskstest.Verify(rb.core[4], ts+3, req, protocol.VerdictPassed, 0.9),
				taskstest.Verify(rb.core[5], ts+4, req, protocol.VerdictPassed, 0.9))
		}
	}
	standing := func() map[string]any {
		t.Helper()
		return w.r.Do(t, "GET", "/agents/"+provider.ID+"/standing", "", nil).JSON(t)
	}
	// Two tasks dated inside the rolled-back span: every event's state
	// counts them, main does not.
	tasksAt(rb.attack[0].CreatedAt + 1)
	w.r.Clock.Add(time.Minute)
	if s := standing(); s["verified_provider_tasks"] != float64(0) || s["confirmed_provider_tasks"] != float64(0) || s["pow_bypass"] != false {
		t.Fatalf("standing from tasks the rollback removed: %v", s)
	}
	if tm.Eligible(provider.ID, w.now()) {
		t.Fatal("the pre-check counts tasks the rollback removed")
	}
	// Two tasks in main: the standing is met.
	tasksAt(w.now())
	w.r.Clock.Add(time.Minute)
	if s := standing(); s["confirmed_provider_tasks"] != float64(2) || s["pow_bypass"] != true {
		t.Fatalf("standing from tasks in main: %v", s)
	}
	if !tm.Eligible(provider.ID, w.now()) || !tm.Confirm(provider.ID, w.now()) {
		t.Fatal("tasks in main do not give the standing")
	}
}
