package tasks

import (
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/anp2net/relay/protocol"
	tt "github.com/anp2net/relay/tasks/taskstest"
)

var probeTimes = []int64{t0 - 1, t0 + 50, t0 + 120, t0 + 300, t0 + 1000, t0 + 100000}

func shuffled(rng *rand.Rand, evs []*protocol.Event) []*protocol.Event {
	out := append([]*protocol.Event(nil), evs...)
	rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// TestOrderIndependence folds random lifecycles in shuffled orders, with and
// without a removed subset, and requires identical digests and views.
func TestOrderIndependence(t *testing.T) {
	pool := tt.Pool(8)
	for seed := uint64(1); seed <= 4; seed++ {
		rng := rand.New(rand.NewPCG(seed, 99))
		evs := tt.Lifecycles(rng, pool, 40, t0)
		var kept, removed []*protocol.Event
		for _, e := range evs {
			if rng.IntN(6) == 0 {
				removed = append(removed, e)
			} else {
				kept = append(kept, e)
			}
		}
		ref := New(tt.Weight)
		for _, e := range kept {
			ref.Add(e)
		}
		for trial := range 3 {
			f := New(tt.Weight)
			for i, e := range shuffled(rng, evs) {
				f.Add(e)
				if i%7 == 0 { // read between writes: exercises cache invalidation
					f.List(Filter{Limit: 3}, t0+100, tt.Weight)
				}
			}
			for _, e := range shuffled(rng, removed) {
				f.Remove(e)
			}
			compareFolds(t, seed, trial, ref, f)
		}
	}
}

func compareFolds(t *testing.T, seed uint64, trial int, a, b *Fold) {
	t.Helper()
	for _, now := range probeTimes {
		if a.Digest(now) != b.Digest(now) {
			t.Fatalf("seed %d trial %d: digests differ at %d", seed, trial, now)
		}
		for _, w := range []WeightFunc{nil, tt.Weight} {
			la, lb := a.List(Filter{}, now, w), b.List(Filter{}, now, w)
			if !reflect.DeepEqual(la, lb) {
				for i := range la {
					if !reflect.DeepEqual(la[i], lb[i]) {
						t.Fatalf("seed %d trial %d now %d: views differ\n%+v\n%+v", seed, trial, now, la[i], lb[i])
					}
				}
				t.Fatalf("seed %d trial %d now %d: lists differ in length %d %d", seed, trial, now, len(la), len(lb))
			}
		}
	}
}

// TestRandomLifecyclesReachEveryStatus guards the generator: the property
// test is only as good as the states it visits.
func TestRandomLifecyclesReachEveryStatus(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	f := New(tt.Weight)
	for _, e := range tt.Lifecycles(rng, tt.Pool(8), 300, t0) {
		f.Add(e)
	}
	seen := map[Status]int{}
	reasons := map[string]int{}
	mofn := 0
	for _, now := range probeTimes {
		for _, v := range f.List(Filter{}, now, tt.Weight) {
			seen[v.Status]++
			if v.HighStakes && v.Consensus.Verdict != "" {
				mofn++
			}
			for _, e := range v.Events {
				reason, _, _ := strings.Cut(e.Reason, ":") // content_invalid: <code>
				reasons[reason]++
			}
		}
	}
	for _, s := range Statuses {
		if seen[s] == 0 {
			t.Errorf("status %s never reached: %v", s, seen)
		}
	}
	for _, r := range []string{ReasonLosingBid, ReasonNotProvider, ReasonByRequester, ReasonByProvider, ReasonNotRequester,
		ReasonAfterAccept, ReasonAfterDeadline, ReasonSuperseded, ReasonInvalid, ReasonAfterCancel, ReasonNoResult} {
		if reasons[r] == 0 {
			t.Errorf("reason %s never produced: %v", r, reasons)
		}
	}
	if mofn == 0 {
		t.Error("no high-stakes consensus reached")
	}
}

// TestFinalOutcomeMatchesReplay holds the fast paths (status filter,
// settlements) to the replay the views use.
func TestFinalOutcomeMatchesReplay(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 11))
	f := New(tt.Weight)
	for _, e := range tt.Lifecycles(rng, tt.Pool(8), 200, t0) {
		f.Add(e)
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	for _, w := range []WeightFunc{nil, tt.Weight, func(string) float64 { return 0 }} {
		for _, tk := range f.order {
			d := tk.derive()
			ru := f.consensusRun(d, w)
			if fast := f.finalOutcome(d, w); fast != ru.final {
				t.Fatalf("task %x: fast outcome %+v, replay %+v", tk.id[:4], fast, ru.final)
			}
			for _, now := range probeTimes {
				slow := f.buildTimeline(tk, d, ru.final, ru.steps, now, true)
				fast := f.buildTimeline(tk, d, ru.final, nil, now, false)
				if slow.status != fast.status || slow.expiry != fast.expiry {
					t.Fatalf("task %x at %d: %s/%d vs %s/%d", tk.id[:4], now, slow.status, slow.expiry, fast.status, fast.expiry)
				}
			}
		}
	}
}
