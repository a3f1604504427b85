package discovery_test

import (
	"sync"
	"testing"

	"github.com/anp2net/relay/relay/relaytest"
	"github.com/anp2net/relay/tasks/taskstest"
)

// TestQueriesWhilePublishing: readers of every view run while 8
// publishers fold a random discovery stream (run with -race), and the
// relay's digest then equals a fold of the same events.
func TestQueriesWhilePublishing(t *testing.T) {
	r, m := start(t)
	evs := corpus(7, 10, relaytest.VectorTime-6*86400)
	pool := taskstest.Pool(10)
	var wg sync.WaitGroup
	done := make(chan struct{})
	for i := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; ; n++ {
				select {
				case <-done:
					return
				default:
				}
				id := pool[(n+i)%len(pool)].ID
				for _, p := range []string{"/feed/" + id, "/neighbors/" + id, "/copresence/" + id, "/beacons", "/agents/" + id + "/followers"} {
					if ans := r.Do(t, "GET", p, "", nil); ans.Status != 200 {
						t.Errorf("GET %s: %d %s", p, ans.Status, ans.Body)
						return
					}
				}
			}
		}()
	}
	r.PostAll(t, evs, 8)
	close(done)
	wg.Wait()
	now := r.Core.Now()
	if got, want := views(m.Discovery(), pool, now), views(replayed(evs), pool, now); got != want {
		t.Fatalf("live relay and a fold of the same events differ:\n%s\nvs\n%s", got, want)
	}
}
