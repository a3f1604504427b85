package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
)

// idIndex maps event ids to seqs in memory, in place of an index of the
// log: it keeps ids unique (the writer looks each new id up before it
// inserts the event) and serves every read by id. An index on the id, a
// hash, was written at a random place per event: at about 8 events a
// transaction it cost about one WAL frame (4 KiB) per event of the 8 or so
// an append wrote, and its insert a sixth of the writer's CPU.
//
// It is keyed by the id's first 8 bytes and holds 12 bytes per event: the
// key and the seq in 32 bits (see maxSeq), in sorted runs of two parallel
// arrays, as a log-structured merge tree does: ids recorded since the last
// run sit in a small map (the tail, at most idTailMax); once the tail is
// full the writer sorts it into a run, and a goroutine merges runs so that
// each is at least twice the size of the next (so there are at most about
// log2(n/idTailMax) of them). Runs are never changed once made, so a
// snapshot for the index file (see indexfile.go) needs no copy of them. A
// match is a candidate, which the caller confirms against the stored id
// (readers read the row by seq and id). Ids that share their first 8
// bytes (a pair in about 2^64/n² at n events) all stay.
//
// The writer records each id before its transaction commits, so a read by
// id of an event whose append has been answered finds it; a reader that
// finds the seq of an event not yet committed (or of a transaction that
// failed: forget removes its ids, and the seq goes to the next event)
// reads no row by that seq and id, as if the id were absent. Open fills it
// from the index file and the log after it, or from the whole log.
type idIndex struct {
	mu   sync.RWMutex
	runs []idRun // each sorted and never changed once made; the largest first
	// tail holds the ids recorded since the last run: one seq per key in
	// tail, further seqs of a key (rare) in more.
	tail  map[uint64]uint32
	more  map[uint64][]uint32
	tailN int
	// merging is set while a goroutine merges runs (see merge); merges
	// waits for it.
	merging atomic.Bool
	merges  sync.WaitGroup
}

// idRun is a sorted run of the id index: keys ascending, ties by seq.
// dir finds a key's part of the run without a search of the whole (ids are
// hashes, so their keys spread evenly): the keys whose top bits (64-shift
// of them) are b lie in keys[dir[b]:dir[b+1]], about 64 of them; it takes
// 4 bytes per 64 entries.
type idRun struct {
	keys  []uint64
	seqs  []uint32
	dir   []uint32
	shift uint
}

// makeRun returns the run of keys and seqs (sorted) with its directory.
func makeRun(keys []uint64, seqs []uint32) idRun {
	bits := uint(0)
	for len(keys)>>(bits+7) > 0 { // about 64 to 128 keys a part
		bits++
	}
	r := idRun{keys: keys, seqs: seqs, shift: 64 - bits, dir: make([]uint32, 1<<bits+1)}
	b := 0
	for i, k := range keys {
		for top := int(k >> r.shift); b <= top; b++ {
			r.dir[b] = uint32(i)
		}
	}
	for ; b < len(r.dir); b++ {
		r.dir[b] = uint32(len(keys))
	}
	return r
}

// idTailMax is how many ids the tail holds before the writer sorts them
// into a run.
const idTailMax = 1 << 16

// maxSeq is the highest seq the in-memory indexes can hold (32 bits): the
// writer refuses to store an event past it.
const maxSeq = math.MaxUint32

// errLogFull is the writer's answer past maxSeq.
var errLogFull = errors.New("the log holds as many events as its indexes can (2^32-1)")

// idKey is the index's key for a 32-byte id.
func idKey(id []byte) uint64 { return binary.LittleEndian.Uint64(id) }

func newIDIndex() *idIndex {
	return &idIndex{tail: map[uint64]uint32{}, more: map[uint64][]uint32{}}
}

// candidates appends to dst the seqs of the events whose ids begin as id
// does, oldest first (almost always none or one).
func (x *idIndex) candidates(dst []int64, id []byte) []int64 {
	k := idKey(id)
	n := len(dst)
	x.mu.RLock()
	for i := range x.runs {
		r := &x.runs[i]
		for j := r.search(k); j < len(r.keys) && r.keys[j] == k; j++ {
			dst = append(dst, int64(r.seqs[j]))
		}
	}
	if seq, ok := x.tail[k]; ok {
		dst = append(dst, int64(seq))
		for _, s := range x.more[k] {
			dst = append(dst, int64(s))
		}
	}
	x.mu.RUnlock()
	if len(dst)-n > 1 {
		slices.Sort(dst[n:])
	}
	return dst
}

// search returns the first position whose key is not below k.
func (r *idRun) search(k uint64) int {
	b := k >> r.shift
	lo, hi := int(r.dir[b]), int(r.dir[b+1])
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if r.keys[m] < k {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// put records id at seq (writer only, and Open); seq is at most maxSeq.
func (x *idIndex) put(id []byte, seq int64) {
	k := idKey(id)
	x.mu.Lock()
	x.putLocked(k, uint32(seq))
	x.mu.Unlock()
}

func (x *idIndex) putLocked(k uint64, seq uint32) {
	x.tailN++
	if _, ok := x.tail[k]; ok {
		x.more[k] = append(x.more[k], seq)
		return
	}
	x.tail[k] = seq
}

// forget removes the ids a transaction recorded and did not commit (ids
// holds them in seq order from seq first). They are all in the tail: the
// writer makes runs only between transactions (settle).
func (x *idIndex) forget(ids [][32]byte, first int64) {
	if len(ids) == 0 {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	for i := len(ids) - 1; i >= 0; i-- {
		x.remove(idKey(ids[i][:]), uint32(first+int64(i)))
	}
}

// remove drops the pair (k, seq) from the tail.
func (x *idIndex) remove(k uint64, seq uint32) {
	more := x.more[k]
	if s, ok := x.tail[k]; ok && s == seq {
		x.tailN--
		if len(more) == 0 {
			delete(x.tail, k)
			return
		}
		x.tail[k], more = more[0], more[1:]
	} else if i := slices.Index(more, seq); i >= 0 {
		x.tailN--
		more = slices.Delete(slices.Clone(more), i, i+1)
	}
	if len(more) == 0 {
		delete(x.more, k)
	} else {
		x.more[k] = more
	}
}

// settle sorts a full tail into a run (writer only, between
// transactions), made outside the lock (the writer alone changes the
// tail), then swapped in; a goroutine of its own merges runs that need it
// (see merge), so the writer never waits for a merge of large runs (about
// 80 ms for two of four million ids each).
func (x *idIndex) settle(force bool) {
	if x.tailN == 0 || x.tailN < idTailMax && !force {
		return
	}
	r := x.tailRun()
	x.mu.Lock()
	x.runs = append(slices.Clip(x.runs), r)
	x.tail, x.more, x.tailN = map[uint64]uint32{}, map[uint64][]uint32{}, 0
	x.mu.Unlock()
	if x.merging.CompareAndSwap(false, true) {
		x.merges.Add(1)
		go x.merge()
	}
}

// mergeDue returns the last i such that runs i and i+1 should merge (run
// i is less than twice as large as run i+1), or -1. Merging those keeps
// each run at least twice the next, so there are at most about
// log2(n/idTailMax) runs.
func mergeDue(runs []idRun) int {
	for i := len(runs) - 2; i >= 0; i-- {
		if len(runs[i].keys) < 2*len(runs[i+1].keys) {
			return i
		}
	}
	return -1
}

// merge merges runs while any pair is due, one pair at a time: it reads
// the runs under the read lock, merges outside it, and replaces the pair
// under the write lock (settle only appends runs meanwhile, so the pair
// is where it was).
func (x *idIndex) merge() {
	defer x.merges.Done()
	for {
		x.mu.RLock()
		runs := slices.Clip(x.runs)
		x.mu.RUnlock()
		i := mergeDue(runs)
		if i < 0 {
			x.merging.Store(false)
			// settle may have added a run after the look above and
			// found merging still set.
			x.mu.RLock()
			i = mergeDue(x.runs)
			x.mu.RUnlock()
			if i < 0 || !x.merging.CompareAndSwap(false, true) {
				return
			}
			continue
		}
		m := mergeRuns(runs[i], runs[i+1])
		x.mu.Lock()
		x.runs = slices.Concat(x.runs[:i], []idRun{m}, x.runs[i+2:])
		x.mu.Unlock()
	}
}

// wait waits for the merges under way.
func (x *idIndex) wait() { x.merges.Wait() }

// idPair is one entry of the id index.
type idPair struct {
	k uint64
	s uint32
}

// tailRun returns the tail as a sorted run.
func (x *idIndex) tailRun() idRun {
	ps := make([]idPair, 0, x.tailN)
	for k, s := range x.tail {
		ps = append(ps, idPair{k, s})
		for _, s := range x.more[k] {
			ps = append(ps, idPair{k, s})
		}
	}
	return runOf(ps)
}

// runOf sorts ps into a run.
func runOf(ps []idPair) idRun {
	slices.SortFunc(ps, func(a, b idPair) int { return cmp.Or(cmp.Compare(a.k, b.k), cmp.Compare(a.s, b.s)) })
	keys, seqs := make([]uint64, len(ps)), make([]uint32, len(ps))
	for i, p := range ps {
		keys[i], seqs[i] = p.k, p.s
	}
	return makeRun(keys, seqs)
}

// addRun adds ps as a run, merged as settle merges (Open only: the tail
// must be empty).
func (x *idIndex) addRun(ps []idPair) {
	if len(ps) == 0 {
		return
	}
	runs := append(x.runs, runOf(ps))
	slices.SortStableFunc(runs, func(a, b idRun) int { return cmp.Compare(len(b.keys), len(a.keys)) })
	for i := mergeDue(runs); i >= 0; i = mergeDue(runs) {
		runs = slices.Concat(runs[:i], []idRun{mergeRuns(runs[i], runs[i+1])}, runs[i+2:])
	}
	x.runs = runs
}

// mergeRuns returns the sorted union of a and b.
func mergeRuns(a, b idRun) idRun {
	n := len(a.keys) + len(b.keys)
	keys, seqs := make([]uint64, 0, n), make([]uint32, 0, n)
	i, j := 0, 0
	for i < len(a.keys) && j < len(b.keys) {
		if a.keys[i] < b.keys[j] || a.keys[i] == b.keys[j] && a.seqs[i] < b.seqs[j] {
			keys, seqs = append(keys, a.keys[i]), append(seqs, a.seqs[i])
			i++
		} else {
			keys, seqs = append(keys, b.keys[j]), append(seqs, b.seqs[j])
			j++
		}
	}
	keys, seqs = append(keys, a.keys[i:]...), append(seqs, a.seqs[i:]...)
	keys, seqs = append(keys, b.keys[j:]...), append(seqs, b.seqs[j:]...)
	return makeRun(keys, seqs)
}

// len is how many ids the index holds.
func (x *idIndex) len() int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	n := x.tailN
	for _, r := range x.runs {
		n += len(r.keys)
	}
	return n
}

// bytes is the memory the index's entries take (runs and tail), for
// /metrics: 12 bytes a run entry, about 40 a tail entry (a map's).
func (x *idIndex) bytes() int64 {
	x.mu.RLock()
	defer x.mu.RUnlock()
	var n int64
	for _, r := range x.runs {
		n += int64(cap(r.keys))*8 + int64(cap(r.seqs))*4 + int64(cap(r.dir))*4
	}
	return n + int64(x.tailN)*40
}

// loadIndexes reads the id, author, created_at and kind of every stored
// event after seq after into x and authors (at Open, on the writer,
// before any other use of them), and returns how many rows it read.
func loadIndexes(w *sql.DB, x *idIndex, authors *authorIndex, after int64) (int64, error) {
	rows, err := w.Query(`SELECT seq, id, agent_id, created_at, kind FROM events WHERE seq > ?`, after)
	if err != nil {
		return 0, fmt.Errorf("load ids: %w", err)
	}
	defer rows.Close()
	var n int64
	var ps []idPair
	for rows.Next() {
		var id, agent sql.RawBytes
		var seq, at, kind int64
		if err := rows.Scan(&seq, &id, &agent, &at, &kind); err != nil {
			return n, fmt.Errorf("load ids: %w", err)
		}
		n++
		if seq > maxSeq || seq < 0 {
			return n, fmt.Errorf("load ids: seq %d: %w", seq, errLogFull)
		}
		if len(id) == 32 {
			ps = append(ps, idPair{idKey(id), uint32(seq)})
			if len(agent) == 32 {
				authors.addLocked([32]byte(agent), at, kind, seq, idPrefix(id))
			}
		}
	}
	if err := rows.Err(); err != nil {
		return n, fmt.Errorf("load ids: %w", err)
	}
	x.addRun(ps)
	return n, nil
}

// resolve gives f the seqs of the events its ids may name, so the query
// reads them by seq (the id condition still holds them to the ids asked
// for); without ids or tags, it gives an author filter the seqs of the
// newest want events that the author index finds for it (see
// authorIndex.candidates). none reports that no event can match.
func (s *Store) resolve(filter Filter, want int) (f query, none bool) {
	f.Filter = filter
	if authorDriven(filter) {
		f.BySeq = true
		f.Seqs, f.authorMore = s.authors.candidates(decodeAuthors(f.Authors), scopeOf(filter), want)
		return f, len(f.Seqs) == 0
	}
	if len(f.IDs) == 0 {
		return f, false
	}
	var seqs []int64
	for _, h := range f.IDs {
		if id, ok := decodeID(h); ok {
			seqs = s.ids.candidates(seqs, id)
		}
	}
	f.BySeq, f.Seqs = len(seqs) > 0, seqs
	return f, len(seqs) == 0
}

// readByID reads the row of id with bySeq (arguments seq, id), trying each
// seq the index gives. It returns sql.ErrNoRows when id is not stored.
func (s *Store) readByID(ctx context.Context, id []byte, bySeq *sql.Stmt, dst ...any) error {
	var buf [2]int64
	for _, seq := range s.ids.candidates(buf[:0], id) {
		err := bySeq.QueryRowContext(ctx, seq, id).Scan(dst...)
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
	}
	return sql.ErrNoRows
}
