package branches_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay"
	"github.com/anp2net/relay/relay/branches"
	"github.com/anp2net/relay/relay/relaytest"
	"github.com/anp2net/relay/tasks/taskstest"
)

// BenchmarkNoRollbackCost measures, in one run, what the module costs a
// relay that has no rollback, ban or fork: publishes and GET /events with
// and without it, over the same log of votes and posts.
func BenchmarkNoRollbackCost(b *testing.B) {
	for _, with := range []bool{false, true} {
		var mods []relay.Module
		name := "without"
		if with {
			mods, name = []relay.Module{newModule()}, "with"
		}
		r := relaytest.Start(b, mods)
		agents := make([]taskstest.Agent, 50)
		for i := range agents {
			agents[i] = taskstest.NewAgent(fmt.Sprintf("bench-%d", i))
		}
		var evs []*protocol.Event
		at := r.Clock.Now().Unix()
		for i := 0; i < 2000; i++ {
			a := agents[i%50]
			if i%4 == 0 {
				evs = append(evs, a.Sign(6, at, `{"score":1}`, []string{"p", agents[(i+1)%50].ID}, []string{"p", agents[(i+7)%50].ID}))
			} else {
				evs = append(evs, a.Sign(1, at, fmt.Sprintf("post %d", i)))
			}
		}
		r.PostAll(b, evs, 4)
		b.Run(name+"/publish", func(b *testing.B) {
			a := agents[0]
			for i := 0; i < b.N; i++ {
				if ans := r.Post(b, a.Sign(1, at, fmt.Sprintf("bench %s %d", name, i))); ans.Status != 200 {
					b.Fatal(ans.Status)
				}
			}
		})
		b.Run(name+"/query", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				if ans := r.Do(b, "GET", "/events?kinds=1&limit=100", "", nil); ans.Status != 200 {
					b.Fatal(ans.Status)
				}
			}
		})
		b.Run(name+"/view", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				if ans := r.Do(b, "GET", "/trust/"+agents[i%50].ID, "", nil); ans.Status != 200 {
					b.Fatal(ans.Status)
				}
			}
		})
	}
}

// BenchmarkPerRequestCost measures the module's own work per publish (the
// ban check) and per GET /events (the branch selection) on a relay with
// votes but no rollback, ban or fork: beside a publish or a query through
// HTTP and SQLite (about a millisecond above), it should be noise.
func BenchmarkPerRequestCost(b *testing.B) {
	m := newModule()
	f := m.Fold().(*branches.Fold)
	agents := make([]taskstest.Agent, 50)
	for i := range agents {
		agents[i] = taskstest.NewAgent(fmt.Sprintf("bench-%d", i))
	}
	for i := 0; i < 2000; i++ {
		f.Add(agents[i%50].Sign(6, 1_800_000_000, `{"score":1}`, []string{"p", agents[(i+1)%50].ID}))
	}
	b.Run("ban-check", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if f.BannedBy(agents[i%50].ID, 1_800_000_000) != "" {
				b.Fatal("banned")
			}
		}
	})
	b.Run("default-view", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if st, err := m.Default(context.Background(), 1_800_000_000); st != nil || err != nil {
				b.Fatal("the relay's own state answers without forks")
			}
		}
	})
	b.Run("select-main", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if keep, _, err := m.Select(nil, 1_800_000_000); keep != nil || err != nil {
				b.Fatal("main is filtered without forks")
			}
		}
	})
}

// BenchmarkAfterRollback measures, in one run, a relay after an activated
// rollback beside the same relay whose proposal fell short: a publish
// (after the rollback main's live state folds it in as it commits), a
// default view read (from main's live state after the rollback) and the
// same read with ?branch=all (the relay's own state).
func BenchmarkAfterRollback(b *testing.B) {
	for _, activate := range []bool{false, true} {
		name := "no-rollback"
		if activate {
			name = "rollback"
		}
		w := &world{t: b, r: relaytest.Start(b, []relay.Module{newModule()})}
		rb := proposeRollback(w, 200, activate)
		w.r.Clock.Add(time.Minute)
		a := rb.core[4]
		at := w.now()
		b.Run(name+"/publish", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				if ans := w.r.Post(b, a.Sign(1, at, fmt.Sprintf("after %d", i))); ans.Status != 200 {
					b.Fatal(ans.Status)
				}
			}
		})
		for _, q := range []string{"", "?branch=all"} {
			b.Run(name+"/view"+q, func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					if ans := w.r.Do(b, "GET", "/trust/"+rb.sybils[i%200].ID+q, "", nil); ans.Status != 200 {
						b.Fatal(ans.Status)
					}
				}
			})
		}
	}
}
