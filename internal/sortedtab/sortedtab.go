// Package sortedtab is a compact map for per-event state: fixed-size keys
// kept in a sorted array beside their values, with a small map of recent
// additions merged in as it grows. An entry costs its key and value bytes
// plus, amortized, a few bytes of the recent map; a Go map of the same
// entries costs about three times as much. Lookups are a map probe and a
// binary search.
package sortedtab

import (
	"iter"
	"slices"
)

// minTail is the least size of the recent map before it is merged.
const minTail = 4096

// Table maps keys to values. Its zero value is not usable; New makes one.
// It is not safe for concurrent use: callers lock around it. Readers that
// only call Get, Len and All may share it under a read lock.
type Table[K comparable, V any] struct {
	cmp  func(a, b K) int
	keys []K // sorted, distinct
	vals []V
	dead []uint64 // bit i: keys[i] was deleted
	ndel int
	tail map[K]V // recent additions, none of them in keys unless dead
	// shared is set while keys and vals are lent out by Freeze: they are
	// then never written in place (keys never are; vals are copied first).
	shared bool
}

// New returns an empty table whose keys compare with cmp.
func New[K comparable, V any](cmp func(a, b K) int) *Table[K, V] {
	return &Table[K, V]{cmp: cmp, tail: map[K]V{}}
}

// FromSorted returns a table holding keys and vals, which it keeps; keys
// must be strictly increasing by cmp (false otherwise, and no table).
func FromSorted[K comparable, V any](cmp func(a, b K) int, keys []K, vals []V) (*Table[K, V], bool) {
	if len(keys) != len(vals) {
		return nil, false
	}
	for i := 1; i < len(keys); i++ {
		if cmp(keys[i-1], keys[i]) >= 0 {
			return nil, false
		}
	}
	return &Table[K, V]{cmp: cmp, keys: keys, vals: vals, dead: make([]uint64, (len(keys)+63)/64), tail: map[K]V{}}, true
}

// Len returns the number of entries.
func (t *Table[K, V]) Len() int { return len(t.keys) - t.ndel + len(t.tail) }

func (t *Table[K, V]) find(k K) (int, bool) {
	i, ok := slices.BinarySearchFunc(t.keys, k, t.cmp)
	return i, ok
}

func (t *Table[K, V]) isDead(i int) bool { return t.dead[i/64]&(1<<(i%64)) != 0 }

func (t *Table[K, V]) setDead(i int, d bool) {
	if d {
		t.dead[i/64] |= 1 << (i % 64)
	} else {
		t.dead[i/64] &^= 1 << (i % 64)
	}
}

// Get returns k's value.
func (t *Table[K, V]) Get(k K) (V, bool) {
	if v, ok := t.tail[k]; ok {
		return v, true
	}
	if i, ok := t.find(k); ok && !t.isDead(i) {
		return t.vals[i], true
	}
	var zero V
	return zero, false
}

// Put sets k's value.
func (t *Table[K, V]) Put(k K, v V) {
	if i, ok := t.find(k); ok {
		if t.isDead(i) {
			t.setDead(i, false)
			t.ndel--
		}
		if t.shared {
			t.vals, t.shared = slices.Clone(t.vals), false
		}
		t.vals[i] = v
		return
	}
	t.tail[k] = v
	if len(t.tail) >= max(minTail, len(t.keys)/16) {
		t.merge()
	}
}

// Delete removes k; false when it was absent.
func (t *Table[K, V]) Delete(k K) bool {
	if _, ok := t.tail[k]; ok {
		delete(t.tail, k)
		return true
	}
	i, ok := t.find(k)
	if !ok || t.isDead(i) {
		return false
	}
	t.setDead(i, true) // vals[i] stays: a frozen copy may read it
	t.ndel++
	if t.ndel > minTail && t.ndel > len(t.keys)/4 {
		t.merge()
	}
	return true
}

// merge rebuilds the sorted arrays from the live entries and the tail.
func (t *Table[K, V]) merge() {
	tk := make([]K, 0, len(t.tail))
	for k := range t.tail {
		tk = append(tk, k)
	}
	slices.SortFunc(tk, t.cmp)
	n := len(t.keys) - t.ndel + len(tk)
	keys, vals := make([]K, 0, n), make([]V, 0, n)
	i, j := 0, 0
	for i < len(t.keys) || j < len(tk) {
		if i < len(t.keys) && t.isDead(i) {
			i++
			continue
		}
		if j == len(tk) || i < len(t.keys) && t.cmp(t.keys[i], tk[j]) < 0 {
			keys, vals = append(keys, t.keys[i]), append(vals, t.vals[i])
			i++
		} else {
			keys, vals = append(keys, tk[j]), append(vals, t.tail[tk[j]])
			j++
		}
	}
	t.keys, t.vals, t.dead, t.ndel, t.shared = keys, vals, make([]uint64, (n+63)/64), 0, false
	clear(t.tail)
	t.tail = map[K]V{} // let the old buckets go
}

// Freeze returns every entry in key order, merging the recent map in
// first (a write). The slices stay valid and unchanged after later writes,
// so a saved form may be encoded from them without the caller's lock; the
// caller must not modify them.
func (t *Table[K, V]) Freeze() ([]K, []V) {
	if len(t.tail) > 0 || t.ndel > 0 {
		t.merge()
	}
	t.shared = true
	return t.keys[:len(t.keys):len(t.keys)], t.vals[:len(t.vals):len(t.vals)]
}

// All yields every entry: the sorted part in key order, then the recent
// additions in no order.
func (t *Table[K, V]) All() iter.Seq2[K, V] {
	return func(yield func(K, V) bool) {
		for i, k := range t.keys {
			if !t.isDead(i) && !yield(k, t.vals[i]) {
				return
			}
		}
		for k, v := range t.tail {
			if !yield(k, v) {
				return
			}
		}
	}
}

// Ascend yields the entries of the sorted part from the first key ≥ k, in
// key order; Recent yields the others.
func (t *Table[K, V]) Ascend(k K) iter.Seq2[K, V] {
	return func(yield func(K, V) bool) {
		i, _ := t.find(k)
		for ; i < len(t.keys); i++ {
			if !t.isDead(i) && !yield(t.keys[i], t.vals[i]) {
				return
			}
		}
	}
}

// Recent yields the entries not yet merged into the sorted part, in no
// order.
func (t *Table[K, V]) Recent() iter.Seq2[K, V] {
	return func(yield func(K, V) bool) {
		for k, v := range t.tail {
			if !yield(k, v) {
				return
			}
		}
	}
}

// Bytes estimates the table's heap bytes given the size of one key and
// one value (for /metrics).
func (t *Table[K, V]) Bytes(keySize, valSize int) int64 {
	n := int64(cap(t.keys))*int64(keySize) + int64(cap(t.vals))*int64(valSize) + int64(cap(t.dead))*8
	return n + int64(len(t.tail))*int64(keySize+valSize+16)
}
