// Package sortedtab is a compact map for per-event state: fixed-size keys
// kept in a sorted array beside their values, with a small map of recent
// additions merged in as it grows. An entry costs its key and value bytes
// plus, amortized, a few bytes of the recent map; a Go map of the same
// entries costs about three times as much. Lookups are a map probe, a
// binary search among one key in fenceStep (their 64-bit prefixes, a
// quarter byte an entry), and one within a block.
package sortedtab

import (
	"iter"
	"slices"
)

// minTail is the least size of the recent map before it is merged.
const minTail = 4096

// fenceStep is how many sorted keys one fence entry stands for.
const fenceStep = 32

// Table maps keys to values. Its zero value is not usable; New makes one.
// It is not safe for concurrent use: callers lock around it. Readers that
// only call Get, Len and All may share it under a read lock.
type Table[K comparable, V any] struct {
	cmp func(a, b K) int
	// prefix maps a key to 64 bits in the same order (a ≤ b ⇒ prefix(a) ≤
	// prefix(b)); fence[j] is the prefix of keys[j*fenceStep].
	prefix func(K) uint64
	fence  []uint64
	keys   []K // sorted, distinct
	vals   []V
	dead   []uint64 // bit i: keys[i] was deleted
	ndel   int
	// tail holds recent additions; one of its keys may also be in keys,
	// shadowed, until the next merge. Neither keys nor vals is ever
	// written in place (a merge makes new ones), so Freeze may lend them.
	tail map[K]V
}

// New returns an empty table whose keys compare with cmp; prefix maps a
// key to 64 bits that order alike (its first 8 bytes, big-endian).
func New[K comparable, V any](cmp func(a, b K) int, prefix func(K) uint64) *Table[K, V] {
	return &Table[K, V]{cmp: cmp, prefix: prefix, tail: map[K]V{}}
}

// FromSorted returns a table holding keys and vals, which it keeps; keys
// must be strictly increasing by cmp (false otherwise, and no table).
func FromSorted[K comparable, V any](cmp func(a, b K) int, prefix func(K) uint64, keys []K, vals []V) (*Table[K, V], bool) {
	if len(keys) != len(vals) {
		return nil, false
	}
	for i := 1; i < len(keys); i++ {
		if cmp(keys[i-1], keys[i]) >= 0 || prefix(keys[i-1]) > prefix(keys[i]) {
			return nil, false
		}
	}
	t := &Table[K, V]{cmp: cmp, prefix: prefix, keys: keys, vals: vals, dead: make([]uint64, (len(keys)+63)/64), tail: map[K]V{}}
	t.buildFence()
	return t, true
}

func (t *Table[K, V]) buildFence() {
	t.fence = make([]uint64, (len(t.keys)+fenceStep-1)/fenceStep)
	for j := range t.fence {
		t.fence[j] = t.prefix(t.keys[j*fenceStep])
	}
}

// Len returns the number of entries, exact after a merge (Freeze); until
// then a key Put again while in the sorted part counts twice.
func (t *Table[K, V]) Len() int { return len(t.keys) - t.ndel + len(t.tail) }

// find returns the position of the first key ≥ k and whether it is k.
// The fence narrows the search to the blocks whose first prefixes
// bracket k's: keys[(j1-1)·step] < k, and every key from j2·step on has
// a greater prefix.
func (t *Table[K, V]) find(k K) (int, bool) {
	p := t.prefix(k)
	j1, _ := slices.BinarySearch(t.fence, p)
	j2 := j1
	for j2 < len(t.fence) && t.fence[j2] == p {
		j2++
	}
	lo, hi := max(0, (j1-1)*fenceStep), min(len(t.keys), j2*fenceStep)
	i, ok := slices.BinarySearchFunc(t.keys[lo:hi], k, t.cmp)
	return lo + i, ok
}

func (t *Table[K, V]) isDead(i int) bool { return t.dead[i/64]&(1<<(i%64)) != 0 }

func (t *Table[K, V]) setDead(i int, d bool) {
	if d {
		t.dead[i/64] |= 1 << (i % 64)
	} else {
		t.dead[i/64] &^= 1 << (i % 64)
	}
}

// Get returns k's value: the recent map's, else the sorted part's.
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

// Put sets k's value. It does not search the sorted part: a key there is
// shadowed by the recent map until the next merge, which keeps the recent
// value (Len may count such a key twice meanwhile).
func (t *Table[K, V]) Put(k K, v V) {
	t.tail[k] = v
	if len(t.tail) >= max(minTail, len(t.keys)/8) {
		t.merge()
	}
}

// Delete removes k; false when it was absent.
func (t *Table[K, V]) Delete(k K) bool {
	_, inTail := t.tail[k]
	delete(t.tail, k)
	i, ok := t.find(k)
	if !ok || t.isDead(i) {
		return inTail
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
	type kv struct {
		p uint64
		k K
		v V
	}
	tl := make([]kv, 0, len(t.tail))
	for k, v := range t.tail {
		tl = append(tl, kv{t.prefix(k), k, v})
	}
	slices.SortFunc(tl, func(a, b kv) int {
		if a.p != b.p {
			if a.p < b.p {
				return -1
			}
			return 1
		}
		return t.cmp(a.k, b.k)
	})
	n := len(t.keys) - t.ndel + len(tl) // at most: shadowed keys make it less
	keys, vals := make([]K, 0, n), make([]V, 0, n)
	i, j := 0, 0
	for i < len(t.keys) || j < len(tl) {
		if i < len(t.keys) && t.isDead(i) {
			i++
			continue
		}
		c := 1
		if i < len(t.keys) && j < len(tl) {
			c = t.cmp(t.keys[i], tl[j].k)
		} else if i < len(t.keys) {
			c = -1
		}
		switch {
		case c < 0:
			keys, vals = append(keys, t.keys[i]), append(vals, t.vals[i])
			i++
		case c == 0:
			i++ // shadowed by the recent value
		default:
			keys, vals = append(keys, tl[j].k), append(vals, tl[j].v)
			j++
		}
	}
	t.keys, t.vals, t.dead, t.ndel = keys, vals, make([]uint64, (len(keys)+63)/64), 0
	t.buildFence()
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
	return t.keys[:len(t.keys):len(t.keys)], t.vals[:len(t.vals):len(t.vals)]
}

// All yields every entry: the sorted part in key order, then the recent
// additions in no order.
func (t *Table[K, V]) All() iter.Seq2[K, V] {
	return func(yield func(K, V) bool) {
		for i, k := range t.keys {
			if _, shadowed := t.tail[k]; !t.isDead(i) && !shadowed && !yield(k, t.vals[i]) {
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
			if _, shadowed := t.tail[t.keys[i]]; !t.isDead(i) && !shadowed && !yield(t.keys[i], t.vals[i]) {
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
	n := int64(cap(t.keys))*int64(keySize) + int64(cap(t.vals))*int64(valSize) + int64(cap(t.dead)+cap(t.fence))*8
	return n + int64(len(t.tail))*int64(keySize+valSize+16)
}
