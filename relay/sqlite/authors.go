package sqlite

import (
	"cmp"
	"container/heap"
	"encoding/binary"
	"math"
	"slices"
	"sort"
	"sync"
)

// authorIndex lists each author's events in memory, in place of two
// indexes of the log on (agent_id, created_at) and (agent_id, kind,
// created_at): it gives the seqs of an author filter's candidates, newest
// first, and the log is then read by seq. Those indexes were written at a
// place set by the author, so with many publishing agents every append
// wrote a leaf page of each at a scattered place: together about two of the
// five or so WAL frames (4 KiB each) an event cost, and a third of the
// writer's CPU (BenchmarkAppendGroup).
//
// An entry is 20 bytes: created_at (as two 32-bit halves, so the entry
// needs no 8-byte alignment), seq (32 bits, see maxSeq), kind (32 bits; a
// kind from 2^32-1 up is kept in wide, by seq) and the id's first 4 bytes.
// Entries order as the log orders events, (created_at, id), but for ids
// that share those 4 bytes in one second, which tie as far as the index
// can tell (the reads that take its candidates sort ties by id): a second
// that holds many of one author's events (their created_at is theirs to
// choose) still yields about want candidates, not all of them. Each
// author's entries are kept sorted in chunks of at most authorChunk, so an
// event that arrives out of order (a mirror's backfill) costs a copy of
// one chunk, not of the author's whole list. A chunk is never changed but
// past its end (an append): an insert into it or a removal makes a new
// chunk, so a snapshot for the index file holds the chunks as they were.
//
// The writer adds a transaction's events after it commits and before their
// appends are answered, so a read that follows an answered append sees the
// event; one that runs between the commit and that moment may miss it, as
// it would had it started before the commit. Open fills it from the index
// file and the log after it, or from the whole log.
type authorIndex struct {
	mu   sync.RWMutex
	m    map[[32]byte]*authorList
	n    int
	wide map[uint32]int64 // seq → kind of the entries whose kind is wideKind
}

// authorEntry is one event of an author (see authorIndex).
type authorEntry struct {
	atHi, atLo uint32 // created_at's bits
	seq, kind  uint32
	id         uint32 // the id's first 4 bytes, big-endian
}

// at is e's created_at.
func (e authorEntry) at() int64 { return int64(uint64(e.atHi)<<32 | uint64(e.atLo)) }

// wideKind marks an entry whose kind does not fit 32 bits (see
// authorIndex.wide).
const wideKind = math.MaxUint32

// authorChunk bounds a chunk of an author's list.
const authorChunk = 256

// authorList is an author's entries, ascending, in chunks none of which is
// empty.
type authorList struct {
	chunks [][]authorEntry
}

// newEntry is an event the writer adds to the author index once its
// transaction commits.
type newEntry struct {
	agent         [32]byte
	at, kind, seq int64
	id            uint32 // the id's first 4 bytes (see idPrefix)
}

// idPrefix is the author index's part of an id: its first 4 bytes,
// big-endian, so prefixes order as ids do.
func idPrefix(id []byte) uint32 { return binary.BigEndian.Uint32(id) }

func newAuthorIndex() *authorIndex {
	return &authorIndex{m: map[[32]byte]*authorList{}, wide: map[uint32]int64{}}
}

// entryOf is the entry of an event (its kind saturated at wideKind; id
// its idPrefix).
func entryOf(createdAt, kind, seq int64, id uint32) authorEntry {
	k := uint32(wideKind)
	if kind >= 0 && kind < wideKind {
		k = uint32(kind)
	}
	return authorEntry{atHi: uint32(uint64(createdAt) >> 32), atLo: uint32(createdAt), seq: uint32(seq), kind: k, id: id}
}

// compareEntries orders entries as the log orders events, oldest first;
// seq breaks ties of the id's first 4 bytes.
func compareEntries(a, b authorEntry) int {
	return cmp.Or(cmp.Compare(a.at(), b.at()), cmp.Compare(a.id, b.id), cmp.Compare(a.seq, b.seq))
}

// sameKey reports whether a and b tie in the log's order as far as the
// index can tell.
func sameKey(a, b authorEntry) bool { return a.at() == b.at() && a.id == b.id }

// add records events (writer only).
func (x *authorIndex) add(entries []newEntry) {
	if len(entries) == 0 {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, e := range entries {
		x.addLocked(e.agent, e.at, e.kind, e.seq, e.id)
	}
}

func (x *authorIndex) addLocked(agent [32]byte, at, kind, seq int64, id uint32) {
	l := x.m[agent]
	if l == nil {
		l = &authorList{}
		x.m[agent] = l
	}
	e := entryOf(at, kind, seq, id)
	if e.kind == wideKind {
		x.wide[e.seq] = kind
	}
	l.insert(e)
	x.n++
}

// kindOf is e's kind.
func (x *authorIndex) kindOf(e authorEntry) int64 {
	if e.kind == wideKind {
		return x.wide[e.seq]
	}
	return int64(e.kind)
}

// len is how many events the index holds.
func (x *authorIndex) len() int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.n
}

// bytes is the memory the index's entries take, for /metrics: the chunks'
// capacity and about 100 bytes an author (its map entry and list).
func (x *authorIndex) bytes() int64 {
	x.mu.RLock()
	defer x.mu.RUnlock()
	var n int64
	for _, l := range x.m {
		n += 100 + int64(cap(l.chunks))*24
		for _, c := range l.chunks {
			n += int64(cap(c)) * 20
		}
	}
	return n + int64(len(x.wide))*16
}

// insert adds e in order.
func (l *authorList) insert(e authorEntry) {
	n := len(l.chunks)
	if n == 0 {
		l.chunks = [][]authorEntry{append(make([]authorEntry, 0, 2), e)}
		return
	}
	if last := l.chunks[n-1]; compareEntries(e, last[len(last)-1]) >= 0 {
		// The usual case: the author's newest event, written past the
		// chunk's end (a snapshot holds the chunk only up to its length).
		if len(last) < authorChunk {
			l.chunks[n-1] = append(last, e)
		} else {
			l.chunks = append(l.chunks, append(make([]authorEntry, 0, 16), e))
		}
		return
	}
	// The first chunk that ends after e takes it, as a new chunk.
	i := sort.Search(n, func(i int) bool {
		c := l.chunks[i]
		return compareEntries(e, c[len(c)-1]) < 0
	})
	c := l.chunks[i]
	j := sort.Search(len(c), func(j int) bool { return compareEntries(e, c[j]) < 0 })
	c = slices.Insert(slices.Clip(slices.Clone(c)), j, e)
	if len(c) > authorChunk {
		half := len(c) / 2
		upper := append(make([]authorEntry, 0, authorChunk), c[half:]...)
		c = slices.Clone(c[:half])
		l.chunks = slices.Insert(l.chunks, i+1, upper)
	}
	l.chunks[i] = c
}

// authorCursor walks an author's list newest first from a bound: ci, pi
// name the next entry (ci < 0: none left).
type authorCursor struct {
	l      *authorList
	ci, pi int
}

// cursorAt starts a walk at the newest entry created at or before until.
func (l *authorList) cursorAt(until int64) authorCursor {
	i := sort.Search(len(l.chunks), func(i int) bool {
		c := l.chunks[i]
		return c[len(c)-1].at() > until
	})
	if i == len(l.chunks) {
		c := i - 1
		if c < 0 {
			return authorCursor{l: l, ci: -1}
		}
		return authorCursor{l: l, ci: c, pi: len(l.chunks[c]) - 1}
	}
	c := l.chunks[i]
	j := sort.Search(len(c), func(j int) bool { return c[j].at() > until })
	cur := authorCursor{l: l, ci: i, pi: j - 1}
	if cur.pi < 0 {
		cur.ci--
		if cur.ci >= 0 {
			cur.pi = len(l.chunks[cur.ci]) - 1
		}
	}
	return cur
}

func (c *authorCursor) valid() bool        { return c.ci >= 0 }
func (c *authorCursor) entry() authorEntry { return c.l.chunks[c.ci][c.pi] }

func (c *authorCursor) next() {
	if c.pi--; c.pi < 0 {
		if c.ci--; c.ci >= 0 {
			c.pi = len(c.l.chunks[c.ci]) - 1
		}
	}
}

// authorScope is what an author filter asks of the index besides its
// authors: kinds (empty: any) and created_at bounds (inclusive).
type authorScope struct {
	kinds        []int64
	since, until int64
}

// authorDriven reports whether the author index gives f's candidates: it
// names authors and neither ids nor tags, which drive a read themselves.
func authorDriven(f Filter) bool { return len(f.Authors) > 0 && len(f.IDs) == 0 && len(f.Tags) == 0 }

// decodeAuthors returns the authors that are 32 bytes of hex, decoded.
func decodeAuthors(hexes []string) [][32]byte {
	out := make([][32]byte, 0, len(hexes))
	for _, h := range hexes {
		if a, ok := decodeID(h); ok {
			out = append(out, [32]byte(a))
		}
	}
	return out
}

func scopeOf(f Filter) authorScope {
	sc := authorScope{kinds: f.Kinds, since: math.MinInt64, until: math.MaxInt64}
	if f.Since != nil {
		sc.since = *f.Since
	}
	for _, u := range []*int64{f.Until, f.AsOf} {
		if u != nil && *u < sc.until {
			sc.until = *u
		}
	}
	return sc
}

// skip moves c to the newest entry at or below it that sc admits, or
// ends it.
func (c *authorCursor) skip(x *authorIndex, sc authorScope) {
	for ; c.valid(); c.next() {
		e := c.entry()
		if e.at() < sc.since {
			c.ci = -1
			return
		}
		if len(sc.kinds) == 0 || slices.Contains(sc.kinds, x.kindOf(e)) {
			return
		}
	}
}

// candidates returns the seqs of the newest want events of authors (hex
// or not, as decoded by the caller) that sc admits, newest first, with
// every further event that ties the last of them (see sameKey), and
// whether events past those remain. The log's order of the candidates is
// theirs but among ties, which the caller's read sorts.
func (x *authorIndex) candidates(authors [][32]byte, sc authorScope, want int) (seqs []int64, more bool) {
	entries, more := x.candidateEntries(authors, sc, want)
	seqs = make([]int64, len(entries))
	for i, e := range entries {
		seqs[i] = int64(e.seq)
	}
	return seqs, more
}

// candidateEntries is candidates with the entries themselves.
func (x *authorIndex) candidateEntries(authors [][32]byte, sc authorScope, want int) (out []authorEntry, more bool) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	h := cursorHeap{}
	seen := map[[32]byte]bool{}
	for _, a := range authors {
		l := x.m[a]
		if l == nil || seen[a] {
			continue
		}
		seen[a] = true
		c := l.cursorAt(sc.until)
		c.skip(x, sc)
		if c.valid() {
			h = append(h, c)
		}
	}
	heap.Init(&h)
	for len(h) > 0 {
		e := h[0].entry()
		if len(out) >= max(want, 1) && !sameKey(e, out[len(out)-1]) {
			return out, true
		}
		out = append(out, e)
		h[0].next()
		h[0].skip(x, sc)
		if h[0].valid() {
			heap.Fix(&h, 0)
		} else {
			heap.Pop(&h)
		}
	}
	return out, false
}

// seqsOf returns the seqs of author's events that sc admits, oldest first.
func (x *authorIndex) seqsOf(author [32]byte, sc authorScope) []int64 {
	x.mu.RLock()
	defer x.mu.RUnlock()
	l := x.m[author]
	if l == nil {
		return nil
	}
	var seqs []int64
	for c := l.cursorAt(sc.until); ; c.next() {
		c.skip(x, sc)
		if !c.valid() {
			break
		}
		seqs = append(seqs, int64(c.entry().seq))
	}
	slices.Reverse(seqs)
	return seqs
}

// cursorHeap orders cursors by their entries, newest on top.
type cursorHeap []authorCursor

func (h cursorHeap) Len() int           { return len(h) }
func (h cursorHeap) Less(i, j int) bool { return compareEntries(h[i].entry(), h[j].entry()) > 0 }
func (h cursorHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *cursorHeap) Push(v any)        { *h = append(*h, v.(authorCursor)) }
func (h *cursorHeap) Pop() any {
	old := *h
	v := old[len(old)-1]
	*h = old[:len(old)-1]
	return v
}
