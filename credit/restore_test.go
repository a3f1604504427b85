package credit

import (
	"bytes"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/tasks"
	tt "github.com/anp2net/relay/tasks/taskstest"
)

// TestBalancesAfterRestore derives credit from a task fold restored from
// its saved form and requires the accounts of a ledger over a fold of the
// same events from empty, at every probe time and under both weight
// functions, then again after more events and revocations reach both.
func TestBalancesAfterRestore(t *testing.T) {
	pool := append(tt.Pool(6), reqr, prov)
	weightFns := []tasks.WeightFunc{nil, tt.Weight}
	for seed := uint64(1); seed <= 3; seed++ {
		rng := rand.New(rand.NewPCG(seed, 17))
		evs := shuffled(rng, tt.Lifecycles(rng, pool, 50, t0))
		cut := len(evs) * 2 / 3
		full, saved := tasks.New(nil), tasks.New(nil)
		for _, e := range evs[:cut] {
			full.Add(e)
			saved.Add(e)
		}
		var buf bytes.Buffer
		if err := saved.Snapshot(&buf); err != nil {
			t.Fatal(err)
		}
		restored := tasks.New(nil)
		if err := restored.Restore(&buf, func(string) *protocol.Event { return nil }); err != nil {
			t.Fatal(err)
		}
		lf, lr := New(full, ""), New(restored, "")
		check := func(stage string) {
			for _, now := range probeTimes {
				for _, w := range weightFns {
					a, b := lf.Accounts(now, w), lr.Accounts(now, w)
					if !reflect.DeepEqual(a, b) {
						t.Fatalf("seed %d %s now %d: folded %+v, restored %+v", seed, stage, now, a, b)
					}
					if len(a) == 0 {
						t.Fatalf("seed %d %s: no account moved: the test proves nothing", seed, stage)
					}
				}
			}
		}
		check("at the cut")
		for i, e := range evs[cut:] {
			full.Add(e)
			restored.Add(e)
			if i%5 == 0 {
				full.Remove(evs[i])
				restored.Remove(evs[i])
			}
		}
		check("after the tail")
	}
}
