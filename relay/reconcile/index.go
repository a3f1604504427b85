package reconcile

import (
	"slices"
	"sort"
	"sync"
)

const (
	// maxBlock is the most items a block holds; a full block splits in two,
	// so inserting moves at most maxBlock items.
	maxBlock = 1024
	// buildFill is how full NewIndex packs its blocks, leaving room for Adds.
	buildFill = 768
)

// Index is an in-memory sorted set of items with per-block counts and id
// sums, answering count, fingerprint and id queries over bound ranges in
// O(log n + block size). It is safe for concurrent use: Add takes a write
// lock, queries and reconciliation take read locks.
//
// The items live in sorted blocks of at most 1024; a Fenwick tree over the
// blocks holds prefix counts and prefix id sums, so an insert costs a binary
// search, a move of under 1024 items and O(log blocks) tree updates.
type Index struct {
	mu     sync.RWMutex
	blocks []*block // in order, none empty
	// firsts[k] is blocks[k].items[0]: the searches for an item's block
	// read this one array rather than a block apiece, a cache miss each.
	firsts []Item
	tree   fenwick
	n      int
}

type block struct {
	items []Item
	sum   accumulator
}

// NewIndex returns an Index holding items, which may be in any order and
// hold duplicates. Items with a negative CreatedAt are left out. The slice is
// not retained. Building is O(n) for sorted input, O(n log n) otherwise.
func NewIndex(items []Item) *Index {
	s := make([]Item, 0, len(items))
	for _, it := range items {
		if it.CreatedAt >= 0 {
			s = append(s, it)
		}
	}
	if !slices.IsSortedFunc(s, Item.Compare) {
		slices.SortFunc(s, Item.Compare)
	}
	s = slices.Compact(s)
	x := &Index{n: len(s)}
	for len(s) > 0 {
		k := min(buildFill, len(s))
		b := &block{items: s[:k:k]}
		for i := range b.items {
			b.sum.addID(&b.items[i].ID)
		}
		x.blocks = append(x.blocks, b)
		s = s[k:]
	}
	x.rebuild()
	return x
}

// Len returns the number of items in the index.
func (x *Index) Len() int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.n
}

// Add inserts it and reports whether it was new. It returns false, leaving
// the index unchanged, for an item already present or one with a negative
// CreatedAt.
func (x *Index) Add(it Item) bool {
	if it.CreatedAt < 0 {
		return false
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if len(x.blocks) == 0 {
		b := &block{items: append(make([]Item, 0, 64), it)}
		b.sum.addID(&it.ID)
		x.blocks = []*block{b}
		x.rebuild()
		x.n = 1
		return true
	}
	// Items mostly arrive in order: one after the last needs no search.
	bi := len(x.blocks) - 1
	b := x.blocks[bi]
	i := len(b.items)
	if len(b.items) == 0 || b.items[len(b.items)-1].Compare(it) >= 0 {
		bi = x.blockFor(it)
		b = x.blocks[bi]
		var found bool
		if i, found = slices.BinarySearchFunc(b.items, it, Item.Compare); found {
			return false
		}
	}
	if len(b.items) >= maxBlock {
		bi, i = x.makeRoom(bi, i)
		b = x.blocks[bi]
	}
	if len(b.items) == cap(b.items) {
		b.items = grow(b.items)
	}
	b.items = slices.Insert(b.items, i, it)
	if i == 0 {
		x.firsts[bi] = it
	}
	b.sum.addID(&it.ID)
	x.tree.add(bi, &it.ID)
	x.n++
	return true
}

// Has reports whether it is in the index.
func (x *Index) Has(it Item) bool {
	x.mu.RLock()
	defer x.mu.RUnlock()
	if len(x.blocks) == 0 {
		return false
	}
	// A live event is usually newer than any held: no search.
	if last := x.blocks[len(x.blocks)-1].items; last[len(last)-1].Compare(it) < 0 {
		return false
	}
	_, found := slices.BinarySearchFunc(x.blocks[x.blockFor(it)].items, it, Item.Compare)
	return found
}

// blockFor returns the block an item belongs in: the last whose first item
// is not after it, or the first block.
func (x *Index) blockFor(it Item) int {
	j := sort.Search(len(x.firsts), func(k int) bool { return x.firsts[k].Compare(it) > 0 })
	return max(j-1, 0)
}

// rebuild remakes what is derived from the list of blocks (the Fenwick
// tree and firsts) after blocks were added.
func (x *Index) rebuild() {
	x.tree.build(x.blocks)
	x.firsts = slices.Grow(x.firsts[:0], len(x.blocks))
	for _, b := range x.blocks {
		x.firsts = append(x.firsts, b.items[0])
	}
}

// makeRoom makes space for an insert at position i of the full block bi and
// returns the block and position the insert goes to. An append past the last
// item starts a new block, so that in-order arrival packs blocks full;
// otherwise the block splits in half.
func (x *Index) makeRoom(bi, i int) (int, int) {
	b := x.blocks[bi]
	if i == len(b.items) && bi == len(x.blocks)-1 {
		x.blocks = append(x.blocks, &block{items: make([]Item, 0, maxBlock)})
		x.tree.build(x.blocks)
		x.firsts = append(x.firsts, Item{}) // set by the insert at 0
		return bi + 1, 0
	}
	half := len(b.items) / 2
	right := &block{items: grow(b.items[half:])}
	b.items = grow(b.items[:half])
	for k := range right.items {
		right.sum.addID(&right.items[k].ID)
	}
	b.sum.sub(&right.sum)
	x.blocks = slices.Insert(x.blocks, bi+1, right)
	x.rebuild()
	if i > half {
		return bi + 1, i - half
	}
	return bi, i
}

// grow returns a copy of items with room for an eighth more (at least 16,
// at most maxBlock in all): a block's spare capacity stays a small part of
// it, where doubling it (append's growth) or splitting a full block into
// two halves of maxBlock capacity each left blocks half empty (80 bytes an
// item in an index grown by out-of-order Adds, against 40 for the items).
func grow(items []Item) []Item {
	n := len(items)
	out := make([]Item, n, min(maxBlock, max(n+n/8, n+16)))
	copy(out, items)
	return out
}

// Fingerprint returns the number of items in [lower, upper) and their
// fingerprint. An empty or inverted range has count 0.
func (x *Index) Fingerprint(lower, upper Bound) (int, Fingerprint) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	lo, hi := x.span(lower, upper)
	return hi - lo, x.fingerprint(lo, hi)
}

// IDs returns the ids of the items in [lower, upper), in item order.
func (x *Index) IDs(lower, upper Bound) [][32]byte {
	x.mu.RLock()
	defer x.mu.RUnlock()
	lo, hi := x.span(lower, upper)
	out := make([][32]byte, 0, hi-lo)
	x.each(lo, hi, func(it *Item) { out = append(out, it.ID) })
	return out
}

// The methods below need x.mu held. Positions count items from 0 in order.

// span returns the positions [lo, hi) of the items in [lower, upper).
func (x *Index) span(lower, upper Bound) (int, int) {
	lo, hi := x.rank(lower), x.rank(upper)
	return lo, max(lo, hi)
}

// rank returns how many items sort below b.
func (x *Index) rank(b Bound) int {
	j := sort.Search(len(x.firsts), func(k int) bool { return b.cmpItem(x.firsts[k]) <= 0 })
	if j == 0 {
		return 0
	}
	items := x.blocks[j-1].items
	off := sort.Search(len(items), func(k int) bool { return b.cmpItem(items[k]) <= 0 })
	return x.tree.prefixCount(j-1) + off
}

// prefixSum returns the id sum of the items at positions [0, pos).
func (x *Index) prefixSum(pos int) accumulator {
	if pos >= x.n {
		return x.tree.prefixSum(len(x.blocks))
	}
	bi, off := x.tree.find(pos)
	s := x.tree.prefixSum(bi)
	items := x.blocks[bi].items
	if off <= len(items)/2 {
		for i := range off {
			s.addID(&items[i].ID)
		}
		return s
	}
	s.add(&x.blocks[bi].sum)
	for i := off; i < len(items); i++ {
		s.subID(&items[i].ID)
	}
	return s
}

// fingerprint returns the fingerprint of the items at positions [lo, hi).
func (x *Index) fingerprint(lo, hi int) Fingerprint {
	s := x.prefixSum(hi)
	l := x.prefixSum(lo)
	s.sub(&l)
	return s.fingerprint(hi - lo)
}

// at returns the item at position pos < x.n.
func (x *Index) at(pos int) Item {
	bi, off := x.tree.find(pos)
	return x.blocks[bi].items[off]
}

// each calls f with the items at positions [lo, hi) in order.
func (x *Index) each(lo, hi int, f func(*Item)) {
	if lo >= hi {
		return
	}
	bi, off := x.tree.find(lo)
	for n := hi - lo; n > 0; bi, off = bi+1, 0 {
		items := x.blocks[bi].items[off:]
		items = items[:min(len(items), n)]
		for i := range items {
			f(&items[i])
		}
		n -= len(items)
	}
}

// fenwick is a Fenwick (binary indexed) tree over the blocks holding item
// counts and id sums, 1-based inside.
type fenwick struct {
	count []int
	sum   []accumulator
	top   int // highest power of two <= number of blocks
}

func (f *fenwick) build(blocks []*block) {
	n := len(blocks)
	f.count = slices.Grow(f.count[:0], n+1)[:n+1]
	f.sum = slices.Grow(f.sum[:0], n+1)[:n+1]
	f.count[0], f.sum[0] = 0, accumulator{}
	for i, b := range blocks {
		f.count[i+1], f.sum[i+1] = len(b.items), b.sum
	}
	for i := 1; i <= n; i++ {
		if j := i + i&-i; j <= n {
			f.count[j] += f.count[i]
			f.sum[j].add(&f.sum[i])
		}
	}
	f.top = 1
	for f.top*2 <= n {
		f.top *= 2
	}
}

// add records one more item with the given id in block bi.
func (f *fenwick) add(bi int, id *[32]byte) {
	for i := bi + 1; i < len(f.count); i += i & -i {
		f.count[i]++
		f.sum[i].addID(id)
	}
}

// prefixCount returns the item count of blocks [0, bi).
func (f *fenwick) prefixCount(bi int) int {
	c := 0
	for i := bi; i > 0; i -= i & -i {
		c += f.count[i]
	}
	return c
}

// prefixSum returns the id sum of blocks [0, bi).
func (f *fenwick) prefixSum(bi int) accumulator {
	var s accumulator
	for i := bi; i > 0; i -= i & -i {
		s.add(&f.sum[i])
	}
	return s
}

// find returns the block holding position pos and pos's offset in it; pos
// must be below the total count.
func (f *fenwick) find(pos int) (int, int) {
	i := 0
	for step := f.top; step > 0; step >>= 1 {
		if j := i + step; j < len(f.count) && f.count[j] <= pos {
			i = j
			pos -= f.count[j]
		}
	}
	return i, pos
}

// Remove deletes it and reports whether it was there. It rebuilds the
// block sums' tree, O(blocks): removals are rare (a withheld event, SPEC
// §21.8).
func (x *Index) Remove(it Item) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	if len(x.blocks) == 0 {
		return false
	}
	bi := x.blockFor(it)
	b := x.blocks[bi]
	i, found := slices.BinarySearchFunc(b.items, it, Item.Compare)
	if !found {
		return false
	}
	b.items = slices.Delete(b.items, i, i+1)
	b.sum = accumulator{}
	for k := range b.items {
		b.sum.addID(&b.items[k].ID)
	}
	if len(b.items) == 0 {
		x.blocks = slices.Delete(x.blocks, bi, bi+1)
	}
	x.rebuild()
	x.n--
	return true
}

// Bytes is an estimate of the index's heap: its blocks' capacity (40
// bytes an item), their headers and the Fenwick tree.
func (x *Index) Bytes() int64 {
	x.mu.RLock()
	defer x.mu.RUnlock()
	var n int64
	for _, b := range x.blocks {
		n += int64(cap(b.items))*40 + 64
	}
	return n + int64(cap(x.firsts))*40 + int64(cap(x.tree.count))*(8+32)
}
