package credit

import (
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/anp2net/relay/tasks"
	tt "github.com/anp2net/relay/tasks/taskstest"
)

// TestConcurrentAccounts queries accounts while a writer folds events in;
// run with -race.
func TestConcurrentAccounts(t *testing.T) {
	pool := append(tt.Pool(6), reqr, prov)
	evs := tt.Lifecycles(rand.New(rand.NewPCG(9, 9)), pool, 60, t0)
	f := tasks.New(nil)
	l := New(f, "")
	var wg sync.WaitGroup
	done := make(chan struct{})
	for r := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				default:
				}
				l.Account(pool[(i+r)%len(pool)].ID, probeTimes[i%len(probeTimes)], tt.Weight)
				if i%10 == 0 {
					l.Digest(t0+100, tt.Weight)
				}
			}
		}()
	}
	for _, e := range evs {
		f.Add(e)
	}
	close(done)
	wg.Wait()
	zeroSum(t, l, t0+100, tt.Weight, len(evs))
}
