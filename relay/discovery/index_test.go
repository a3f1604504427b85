package discovery

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/anp2net/relay/protocol"
)

// TestU32MapAgainstMap: random sets and adds, updates and deletions (keys from a
// small range, so runs collide and wrap) leave the table equal to a Go map
// after every step.
func TestU32MapAgainstMap(t *testing.T) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 1))
		var m u32map
		want := map[uint32]uint32{}
		keys := uint32(4 + rng.IntN(300))
		for step := range 5000 {
			k := rng.Uint32N(keys)
			if rng.IntN(3) == 0 && seed%2 == 0 {
				k *= 1 << 20 // same low bits
			}
			v := uint32(0)
			if rng.IntN(5) < 3 {
				v = 1 + rng.Uint32N(9)
			}
			if rng.IntN(2) == 0 {
				m.set(k, v)
			} else if old, now := m.add(k, int64(v)-int64(want[k])); old != want[k] || now != v {
				t.Fatalf("seed %d step %d: add(%d) went %d → %d, want %d → %d", seed, step, k, old, now, want[k], v)
			}
			if v == 0 {
				delete(want, k)
			} else {
				want[k] = v
			}
			if m.len() != len(want) {
				t.Fatalf("seed %d step %d: len %d, want %d", seed, step, m.len(), len(want))
			}
			if step%97 == 0 || step > 4900 {
				n := 0
				for _, s := range m.slots {
					if s.v != 0 {
						n++
						if want[s.k] != s.v {
							t.Fatalf("seed %d step %d: slot %d=%d, want %d", seed, step, s.k, s.v, want[s.k])
						}
					}
				}
				for wk, wv := range want {
					if got := m.get(wk); got != wv {
						t.Fatalf("seed %d step %d: get %d = %d, want %d", seed, step, wk, got, wv)
					}
				}
				if n != len(want) || m.get(keys+1) != 0 {
					t.Fatalf("seed %d step %d: %d slots in use, want %d", seed, step, n, len(want))
				}
			}
		}
	}
}

// TestStubListOrder: the feed index's lists, built by place from events
// with many ties on created_at and on long id prefixes, added and removed
// in random order and pruned now and then, hold exactly the live events in
// (created_at, id) order, and search finds the first stub at or after any
// key.
func TestStubListOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 5))
	ids := []string{"", "0", "00000000", "00000000a", "00000000ab", "0000000a", "ff", "00000000deadbeef"}
	for i := range 300 { // more than chunkStubs live: chunks split, empty and go

		ids = append(ids, fmt.Sprintf("00000000%x%x", rng.IntN(3), i), fmt.Sprintf("%08x%x", rng.Uint32(), i))
	}
	for i, id := range ids { // ids are 64 hex characters: many share their first 8 bytes
		ids[i] = id + strings.Repeat("0", 64-len(id))
	}
	m := map[string]*stubList{}
	live := map[string]*protocol.Event{}
	byKey := map[[32]byte]*protocol.Event{}
	key := func(id string) *[32]byte { k := idKey(id); return &k }
	for step := range 12000 {
		e := &protocol.Event{ID: ids[rng.IntN(len(ids))], CreatedAt: int64(rng.IntN(4))}
		if old := live[e.ID]; old != nil {
			e = old
		}
		add := rng.IntN(3) > 0
		place(m, "k", &stub{id: idKey(e.ID)}, e.CreatedAt, add)
		if add {
			byKey[idKey(e.ID)] = e
		}
		if add {
			live[e.ID] = e
		} else {
			delete(live, e.ID)
		}
		if l := m["k"]; l != nil && rng.IntN(300) == 0 {
			// The prune: drop the stubs before a key.
			cut := &protocol.Event{ID: ids[rng.IntN(len(ids))], CreatedAt: int64(rng.IntN(4))}
			if l.dropBefore(l.search(cut.CreatedAt, key(cut.ID))); l.n == 0 {
				delete(m, "k")
			}
			for id, e := range live {
				if cmpEvents(e, cut) < 0 {
					delete(live, id)
				}
			}
		}
		var want []*protocol.Event
		for _, e := range live {
			want = append(want, e)
		}
		slices.SortFunc(want, cmpEvents)
		var got []*protocol.Event
		l := m["k"]
		if l != nil {
			l.each(func(r *stubRef) { got = append(got, byKey[r.s.id]) })
			if l.n != len(got) {
				t.Fatalf("step %d: n = %d, holds %d", step, l.n, len(got))
			}
			if len(l.firsts) != len(l.chunks) {
				t.Fatalf("step %d: %d chunks, %d first keys", step, len(l.chunks), len(l.firsts))
			}
			for c, ch := range l.chunks {
				if len(ch.list) == 0 || len(ch.list) > chunkStubs {
					t.Fatalf("step %d: a chunk of %d stubs", step, len(ch.list))
				}
				if l.firsts[c] != ch.list[0].key() {
					t.Fatalf("step %d: chunk %d's first key is stale", step, c)
				}
			}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("step %d: list out of order or wrong", step)
		}
		lo := &protocol.Event{ID: ids[rng.IntN(len(ids))], CreatedAt: int64(rng.IntN(5)) - 1}
		first, _ := slices.BinarySearchFunc(want, lo, cmpEvents)
		if l == nil {
			continue
		}
		if r, w := l.get(l.search(lo.CreatedAt, key(lo.ID))), at(want, first); r == nil != (w == nil) || r != nil && byKey[r.s.id] != w {
			t.Fatalf("step %d: search(%d, %q) is not the first stub at or after it", step, lo.CreatedAt, lo.ID)
		}
		// The newest n of a range, as Recent reads them.
		hi := &protocol.Event{ID: ids[rng.IntN(len(ids))], CreatedAt: int64(rng.IntN(5)) - 1}
		last, _ := slices.BinarySearchFunc(want, hi, cmpEvents)
		n := rng.IntN(300) + 1
		wantRange := want[max(first, min(last, len(want))-n):max(first, last)]
		var gotRange []*protocol.Event
		for _, r := range l.newest(l.search(lo.CreatedAt, key(lo.ID)), l.search(hi.CreatedAt, key(hi.ID)), n, nil) {
			gotRange = append(gotRange, byKey[r.s.id])
		}
		slices.SortFunc(gotRange, cmpEvents)
		if first <= last && !slices.Equal(gotRange, wantRange) {
			t.Fatalf("step %d: newest %d of [%d, %d) = %d stubs, want %d", step, n, first, last, len(gotRange), len(wantRange))
		}
	}
}

// at is list[i], or nil past its end.
func at(list []*protocol.Event, i int) *protocol.Event {
	if i < len(list) {
		return list[i]
	}
	return nil
}
