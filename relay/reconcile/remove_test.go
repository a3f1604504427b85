package reconcile

import (
	"math/rand"
	"testing"
)

// TestIndexRemove removes items from a large index and checks every
// fingerprint against an index built from what remains.
func TestIndexRemove(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	var items []Item
	for range 5000 {
		var it Item
		it.CreatedAt = rng.Int63n(1000)
		rng.Read(it.ID[:])
		items = append(items, it)
	}
	x := NewIndex(items)
	for i := 0; i < len(items); i += 3 {
		if !x.Remove(items[i]) {
			t.Fatalf("Remove(%d) = false", i)
		}
		if x.Remove(items[i]) {
			t.Fatalf("second Remove(%d) = true", i)
		}
	}
	var rest []Item
	for i, it := range items {
		if i%3 != 0 {
			rest = append(rest, it)
		}
	}
	want := NewIndex(rest)
	if x.Len() != want.Len() {
		t.Fatalf("Len = %d, want %d", x.Len(), want.Len())
	}
	lo, hi := Bound{}, Infinity
	n1, f1 := x.Fingerprint(lo, hi)
	n2, f2 := want.Fingerprint(lo, hi)
	if n1 != n2 || f1 != f2 {
		t.Fatalf("fingerprint %d %x, want %d %x", n1, f1, n2, f2)
	}
	if x.Has(items[0]) || !x.Has(items[1]) {
		t.Fatal("Has disagrees with the removals")
	}
	for _, it := range rest {
		x.Remove(it)
	}
	if x.Len() != 0 || !x.Add(items[0]) || x.Len() != 1 {
		t.Fatal("emptied index does not take an item again")
	}
}
