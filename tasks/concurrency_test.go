package tasks

import (
	"math/rand/v2"
	"sync"
	"testing"

	tt "github.com/anp2net/relay/tasks/taskstest"
)

// TestConcurrentReadersAndWriter runs one writer against readers of every
// query; run with -race.
func TestConcurrentReadersAndWriter(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	evs := tt.Lifecycles(rng, tt.Pool(8), 60, t0)
	f := New(tt.Weight)
	var wg sync.WaitGroup
	done := make(chan struct{})
	for r := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				default:
				}
				now := probeTimes[(i+r)%len(probeTimes)]
				for _, v := range f.List(Filter{Limit: 5}, now, tt.Weight) {
					f.Task(v.TaskID, now, nil)
				}
				f.CreditChanges(0, tt.Weight)
				if i%20 == 0 {
					f.Digest(now)
				}
			}
		}()
	}
	for i, e := range evs {
		f.Add(e)
		if i%5 == 0 {
			f.Remove(evs[i/2])
		}
	}
	close(done)
	wg.Wait()
}
