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

// TestStandingRefusedWhileStale: while the preferred branch's state waits
// for a rebuild (its membership changed: here the preferred fork's root
// was revoked, taking the root's history — the provider's tasks — out of
// the fork), the views answer from the state last built, but the
// bypass's checks refuse it instead of judging standing on events it no
// longer tracks; once rebuilt, the exact standing (no tasks) refuses too.
func TestStandingRefusedWhileStale(t *testing.T) {
	o := tiers.DefaultStandingOptions()
	o.Bypass, o.Threshold, o.MinVerifiers = true, 2, 2
	tm := tiers.NewModule(tiers.Options{})
	if err := tm.ConfigureStanding(o); err != nil {
		t.Fatal(err)
	}
	base := int64(relaytest.VectorTime)
	rootAuthor := taskstest.NewAgent("stale-root")
	root := rootAuthor.Sign(1, base+100, "the fork's root")
	fork := "b-" + root.ID[:8]
	mod := newModule()
	w := &world{t: t, r: relaytest.Start(t, []relay.Module{mod, tm}, func(c *relay.Config) { c.PreferredBranch = fork })}
	core := vouchingCore(w, 4)
	provider, requester := taskstest.NewAgent("stale-provider"), taskstest.NewAgent("stale-requester")
	for i := range 2 {
		ts := base + 10 + int64(10*i)
		req := taskstest.Request(requester, ts, ts+3600, taskstest.Reward{Amount: 10 + i}, false)
		w.post(req, taskstest.Accept(provider, ts+1, req), taskstest.Result(provider, ts+2, req),
			taskstest.Verify(core[2], ts+3, req, protocol.VerdictPassed, 0.9),
			taskstest.Verify(core[3], ts+4, req, protocol.VerdictPassed, 0.9))
	}
	w.post(root, rootAuthor.Sign(1, w.now(), "on the fork", []string{"branch", fork}))
	w.r.Clock.Add(time.Minute)
	awaitLive(t, w.r)
	if !tm.Eligible(provider.ID, w.now()) || !tm.Confirm(provider.ID, w.now()) {
		t.Fatal("the root's history (the tasks) does not give the standing on the fork")
	}
	release := mod.HoldRebuild()
	w.post(rootAuthor.Sign(9, w.now(), "", []string{"e", root.ID}))
	if tm.Confirm(provider.ID, w.now()) {
		t.Fatal("the check under the writer judged the standing on a stale branch state")
	}
	if tm.Eligible(provider.ID, w.now()) {
		t.Fatal("the pre-check judged the standing on a stale branch state")
	}
	release()
	awaitLive(t, w.r)
	if tm.Eligible(provider.ID, w.now()) {
		t.Fatal("tasks no longer in the fork give the standing")
	}
}
