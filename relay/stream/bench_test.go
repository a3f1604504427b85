package stream

import (
	"context"
	"sync"
	"testing"
)

// BenchmarkPublish measures the commit-hook side of the hub: one Publish
// of a 10-event batch fanned out to 1,000 subscribers with the load test's
// mixed filters, whose queues are drained concurrently. ns/op is per
// event; it is the time the store's single writer spends in the hook.
func BenchmarkPublish(b *testing.B) {
	const subs, batch = 1000, 10
	h := NewHub(Options{Backlog: func(context.Context, int64, func(int64) error, func(int64, []byte) error) error { return nil }})
	var wg sync.WaitGroup
	for i := range subs {
		f, err := ParseFilter(mustQuery(b, loadFilter(i, subs)))
		if err != nil {
			b.Fatal(err)
		}
		s, err := h.register(f, "", nil)
		if err != nil {
			b.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-s.gone:
					return
				case <-s.wake:
					q, _ := s.take()
					s.giveBack(q)
				}
			}
		}()
	}
	events := genEvents(10_000, 7)
	items := make([]Item, batch)
	b.ResetTimer()
	seq := int64(0)
	for i := 0; i < b.N; i += batch {
		for j := range items {
			seq++
			items[j] = Item{Seq: seq, Event: events[int(seq)%len(events)]}
		}
		h.Publish(items)
	}
	b.StopTimer()
	if d := h.Stats().Dropped; d != 0 {
		b.Fatalf("%d subscribers dropped", d)
	}
	h.Close()
	wg.Wait()
}

// BenchmarkMatch is one Filter.Match of a typical two-clause filter.
func BenchmarkMatch(b *testing.B) {
	f, _ := ParseFilter(mustQuery(b, "filter=kind:1,t:topic-3"))
	events := genEvents(256, 9)
	b.ResetTimer()
	n := 0
	for i := 0; i < b.N; i++ {
		if f.Match(events[i&255]) {
			n++
		}
	}
	_ = n
}
