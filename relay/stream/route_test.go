package stream

import (
	"context"
	"math/rand/v2"
	"net/url"
	"strconv"
	"testing"
)

// TestRouteMatchesScan: the routing index hands each subscriber exactly
// the events its filter matches, each once, as offering every event to
// every subscriber does (one test drives both), over random filters on
// tags, authors, ids and kinds and random batches, with subscribers
// leaving and joining between batches.
func TestRouteMatchesScan(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 20))
	h := NewHub(Options{Backlog: func(context.Context, int64, func(int64) error, func(int64, []byte) error) error { return nil }, Buffer: 1 << 20})
	const agents = 4
	authors := make([]string, agents)
	for i := range authors {
		authors[i] = mk(key(i), 1, 1, "x").AgentID
	}
	var pool []string // ids of events made so far, for ids= filters
	randFilter := func() *Filter {
		v := url.Values{}
		switch rng.IntN(6) {
		case 0, 1:
			v.Set("t", "topic"+strconv.Itoa(rng.IntN(5))+",topic"+strconv.Itoa(rng.IntN(5)))
			if rng.IntN(2) == 0 {
				v.Set("x", "v"+strconv.Itoa(rng.IntN(2)))
			}
		case 2:
			v.Set("authors", authors[rng.IntN(agents)])
		case 3:
			if len(pool) > 0 {
				v.Set("ids", pool[rng.IntN(len(pool))])
			}
		case 4:
			v.Set("kinds", strconv.Itoa(1+rng.IntN(2)))
		}
		f, err := ParseFilter(v)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	type sub struct {
		s    *Subscription
		want []int64
	}
	var subs []*sub
	seq := int64(0)
	for round := 0; round < 40; round++ {
		for len(subs) < 30 {
			s, err := h.Subscribe(randFilter(), "")
			if err != nil {
				t.Fatal(err)
			}
			subs = append(subs, &sub{s: s})
		}
		var items []Item
		for range 1 + rng.IntN(6) {
			var tags [][]string
			for range rng.IntN(4) {
				name := []string{"t", "x"}[rng.IntN(2)]
				val := "topic" + strconv.Itoa(rng.IntN(5))
				if name == "x" {
					val = "v" + strconv.Itoa(rng.IntN(2))
				}
				tags = append(tags, []string{name, val})
			}
			seq++
			e := mk(key(rng.IntN(agents)), seq, int64(1+rng.IntN(2)), strconv.FormatInt(seq, 10), tags...)
			pool = append(pool, e.ID)
			items = append(items, Item{Seq: seq, Event: e})
			for _, x := range subs {
				if x.s.s.filter.Match(e) {
					x.want = append(x.want, seq)
				}
			}
		}
		h.Publish(items)
		for _, x := range subs {
			frames, seen := x.s.Take()
			var got []int64
			for _, f := range frames {
				got = append(got, f.Seq)
			}
			if len(got) != len(x.want) {
				t.Fatalf("round %d: filter %+v got %v, want %v", round, x.s.s.filter, got, x.want)
			}
			for i := range got {
				if got[i] != x.want[i] {
					t.Fatalf("round %d: filter %+v got %v, want %v", round, x.s.s.filter, got, x.want)
				}
			}
			if seen != seq {
				t.Fatalf("round %d: seen %d, want %d", round, seen, seq)
			}
			x.want = nil
		}
		// A third leave; the next round fills up with new ones.
		kept := subs[:0]
		for _, x := range subs {
			if rng.IntN(3) == 0 {
				x.s.Close()
			} else {
				kept = append(kept, x)
			}
		}
		subs = kept
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	n := len(h.scan)
	for _, set := range h.routes {
		n += len(set)
	}
	if len(h.subs) != len(subs) || n < len(subs) {
		t.Fatalf("hub holds %d subscribers (%d filed), want %d", len(h.subs), n, len(subs))
	}
}
