package reconcile

import (
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
)

// model is the obvious implementation the Index must agree with.
type model []Item // sorted, distinct

func (m *model) add(it Item) bool {
	if it.CreatedAt < 0 {
		return false
	}
	i, found := slices.BinarySearchFunc(*m, it, Item.Compare)
	if found {
		return false
	}
	*m = slices.Insert(*m, i, it)
	return true
}

func (m model) ids(lower, upper Bound) [][32]byte {
	out := [][32]byte{}
	for _, it := range m {
		if lower.cmpItem(it) <= 0 && upper.cmpItem(it) > 0 {
			out = append(out, it.ID)
		}
	}
	return out
}

// randBound picks a bound near the model's items: equal to one, a prefix
// of one, between timestamps, or an end.
func randBound(r *rand.Rand, m model) Bound {
	if len(m) == 0 || r.IntN(10) == 0 {
		return []Bound{{}, Infinity}[r.IntN(2)]
	}
	b := BoundOf(m[r.IntN(len(m))])
	switch r.IntN(4) {
	case 0:
		clear(b.ID[r.IntN(33):])
	case 1:
		b.Timestamp += uint64(r.IntN(3)) - 1
		b.ID = [32]byte{}
	}
	return b
}

// checkIndex compares x with m over random ranges and checks x's internal
// invariants.
func checkIndex(t *testing.T, r *rand.Rand, x *Index, m model) {
	t.Helper()
	if x.Len() != len(m) {
		t.Fatalf("Len = %d, want %d", x.Len(), len(m))
	}
	for range 20 {
		lo, hi := randBound(r, m), randBound(r, m)
		want := m.ids(lo, hi)
		if got := x.IDs(lo, hi); !slices.Equal(got, want) {
			t.Fatalf("IDs(%v, %v): got %d ids, want %d", lo, hi, len(got), len(want))
		}
		n, f := x.Fingerprint(lo, hi)
		if n != len(want) || f != FingerprintOf(want) {
			t.Fatalf("Fingerprint(%v, %v) = %d, %x; want %d, %x", lo, hi, n, f, len(want), FingerprintOf(want))
		}
	}
	var all []Item
	if len(x.firsts) != len(x.blocks) {
		t.Fatalf("%d firsts for %d blocks", len(x.firsts), len(x.blocks))
	}
	for i, b := range x.blocks {
		if len(b.items) == 0 || len(b.items) > maxBlock {
			t.Fatalf("block %d holds %d items", i, len(b.items))
		}
		if x.firsts[i] != b.items[0] {
			t.Fatalf("block %d: firsts holds %v, the block begins with %v", i, x.firsts[i], b.items[0])
		}
		var s accumulator
		for k := range b.items {
			s.addID(&b.items[k].ID)
		}
		if s != b.sum {
			t.Fatalf("block %d: stale sum", i)
		}
		all = append(all, b.items...)
	}
	if !slices.Equal(all, []Item(m)) {
		t.Fatal("blocks do not hold the model's items in order")
	}
	for pos := 0; pos < len(m); pos += 1 + r.IntN(50) {
		if x.at(pos) != m[pos] {
			t.Fatalf("at(%d) = %v, want %v", pos, x.at(pos), m[pos])
		}
	}
}

// TestIndexMatchesModel adds items in random, in-order and clustered
// fashion and compares the Index with a sorted slice throughout.
func TestIndexMatchesModel(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	x := NewIndex(nil)
	var m model
	var ts int64 = epoch
	for i := range 20000 {
		var it Item
		switch r.IntN(5) {
		case 0: // in order, like live events
			ts += r.Int64N(3)
			it.CreatedAt = ts
		case 1: // one busy second
			it.CreatedAt = epoch + 100
		case 2: // a duplicate
			if len(m) > 0 {
				it = m[r.IntN(len(m))]
			}
		case 3:
			it.CreatedAt = -1 - r.Int64N(5)
		default:
			it.CreatedAt = epoch + r.Int64N(month)
		}
		if it.ID == ([32]byte{}) {
			fillID(r, &it.ID)
		}
		if got, want := x.Add(it), m.add(it); got != want {
			t.Fatalf("Add(%v) = %v, want %v", it, got, want)
		}
		if x.Has(it) != (it.CreatedAt >= 0) {
			t.Fatalf("Has(%v) after Add = %v", it, !(it.CreatedAt >= 0))
		}
		other := Item{CreatedAt: it.CreatedAt + 1, ID: it.ID} // same id, another time
		fresh := Item{CreatedAt: it.CreatedAt}
		fillID(r, &fresh.ID)
		if (x.Has(other) && !slices.Contains(m, other)) || x.Has(fresh) {
			t.Fatalf("Has reports an item never added: %v or %v", other, fresh)
		}
		if i%1000 == 0 {
			checkIndex(t, r, x, m)
		}
	}
	checkIndex(t, r, x, m)
	if len(x.blocks) < 10 {
		t.Fatalf("only %d blocks: splits not exercised", len(x.blocks))
	}

	built := NewIndex(slices.Concat(m, m[:100])) // the same set, unsorted, duplicated
	checkIndex(t, r, built, m)
	for range 1000 { // and it keeps agreeing as both grow
		it := Item{CreatedAt: epoch + r.Int64N(month)}
		fillID(r, &it.ID)
		built.Add(it)
		m.add(it)
	}
	checkIndex(t, r, built, m)
}

func TestNewIndexEdges(t *testing.T) {
	if x := NewIndex(nil); x.Len() != 0 || len(x.IDs(Bound{}, Infinity)) != 0 {
		t.Fatal("empty index not empty")
	}
	x := NewIndex([]Item{{CreatedAt: -5}, {CreatedAt: 3}, {CreatedAt: 3}})
	if x.Len() != 1 {
		t.Fatalf("Len = %d, want 1", x.Len())
	}
	if n, _ := x.Fingerprint(Infinity, Bound{}); n != 0 {
		t.Fatalf("inverted range counts %d", n)
	}
}

// TestIndexConcurrent runs one writer against reconciling readers; run it
// with -race.
func TestIndexConcurrent(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	items := randItems(r, 20000, epoch, month)
	server := NewIndex(items[:10000])
	client := NewIndex(items[:9000])
	var wg sync.WaitGroup
	wg.Go(func() {
		for _, it := range items[10000:] {
			server.Add(it)
		}
	})
	for range 2 {
		wg.Go(func() {
			for range 5 {
				st, err := runSync(client, server, Params{}, Params{})
				if err != nil {
					t.Error(err)
					return
				}
				if len(st.need) < 1000 {
					t.Errorf("need %d ids, want at least the 1000 present from the start", len(st.need))
				}
			}
		})
	}
	wg.Wait()
	st := reconcile(t, client, server, Params{}, Params{})
	checkDiff(t, st, items[:9000], items)
}

// TestIndexAddBelowFirst adds items in descending order, each below every
// item held (the only insert that changes a block's first item without a
// split), and checks the index after each.
func TestIndexAddBelowFirst(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	x := NewIndex(nil)
	var m model
	for i := range 300 {
		it := Item{CreatedAt: epoch + month - int64(i)}
		fillID(r, &it.ID)
		x.Add(it)
		m.add(it)
		checkIndex(t, r, x, m)
	}
}
