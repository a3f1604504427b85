package sortedtab

import (
	"cmp"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestTableMatchesMap drives a Table and a Go map with the same random
// puts, overwrites and deletes over few enough keys that entries die and
// come back, across many merges, and requires the same contents after
// every step; a frozen copy must keep the contents it was taken with.
func TestTableMatchesMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	tab := New[uint32, int32](cmp.Compare[uint32], func(k uint32) uint64 { return uint64(k >> 8) })
	want := map[uint32]int32{}
	var frozenK []uint32
	var frozenV []int32
	var frozenWant map[uint32]int32
	for step := range 60000 {
		k := rng.Uint32N(20000)
		switch r := rng.IntN(10); {
		case r < 6:
			v := rng.Int32()
			tab.Put(k, v)
			want[k] = v
		case r < 9:
			_, had := want[k]
			if tab.Delete(k) != had {
				t.Fatalf("step %d: delete %d reported %v", step, k, !had)
			}
			delete(want, k)
		default:
			frozenK, frozenV = tab.Freeze()
			frozenWant = maps.Clone(want)
			if tab.Len() != len(want) {
				t.Fatalf("step %d: len %d after a merge, want %d", step, tab.Len(), len(want))
			}
		}
		got, ok := tab.Get(k)
		if wv, wok := want[k]; ok != wok || got != wv || tab.Len() < len(want) {
			t.Fatalf("step %d: key %d got %d,%v; len %d want %d", step, k, got, ok, tab.Len(), len(want))
		}
	}
	got := map[uint32]int32{}
	for k, v := range tab.All() {
		got[k] = v
	}
	if !maps.Equal(got, want) {
		t.Fatal("All differs from the map")
	}
	if !slices.IsSorted(frozenK) || len(frozenK) != len(frozenWant) {
		t.Fatalf("frozen copy: %d keys, want %d", len(frozenK), len(frozenWant))
	}
	for i, k := range frozenK {
		if frozenWant[k] != frozenV[i] {
			t.Fatalf("frozen copy changed at key %d", k)
		}
	}
	n := 0
	for k := range tab.Ascend(10000) {
		if k < 10000 {
			t.Fatalf("Ascend(10000) yielded %d", k)
		}
		n++
	}
	for k := range tab.Recent() {
		if k >= 10000 {
			n++
		}
	}
	m := 0
	for k := range want {
		if k >= 10000 {
			m++
		}
	}
	if n != m {
		t.Fatalf("Ascend and Recent yielded %d keys ≥ 10000, want %d", n, m)
	}
}

// TestFromSortedRejects checks that keys out of order or twice are refused.
func TestFromSortedRejects(t *testing.T) {
	for _, keys := range [][]int{{2, 1}, {1, 1}} {
		if _, ok := FromSorted(cmp.Compare[int], func(k int) uint64 { return uint64(k) }, keys, make([]int, len(keys))); ok {
			t.Errorf("%v accepted", keys)
		}
	}
	if _, ok := FromSorted[int, int](cmp.Compare[int], func(k int) uint64 { return uint64(k) }, []int{1}, nil); ok {
		t.Error("lengths differ, accepted")
	}
}
