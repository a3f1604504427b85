package sqlite

import (
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
)

// idIndex maps event ids to seqs in memory, in place of an index of the
// log: it keeps ids unique (the writer looks each new id up before it
// inserts the event) and serves every read by id. An index on the id, a
// hash, was written at a random place per event: at about 8 events a
// transaction it cost about one WAL frame (4 KiB) per event of the 8 or so
// an append wrote, and its insert a sixth of the writer's CPU.
//
// It is keyed by the id's first 8 bytes, so it holds 8 bytes of key and 8
// of seq per event (about 20–40 bytes with the map's slack; see
// TestIDIndexMemory): a match is a candidate, which the caller confirms
// against the stored id (readers read the row by seq and id). Ids that
// share their first 8 bytes (a pair in about 2^64/n² at n events) all
// stay: the first in m, the rest in more.
//
// The writer records each id before its transaction commits, so a read by
// id of an event whose append has been answered finds it; a reader that
// finds the seq of an event not yet committed (or of a transaction that
// failed: forget removes its ids, and the seq goes to the next event)
// reads no row by that seq and id, as if the id were absent. Open fills it
// from the log.
type idIndex struct {
	mu   sync.RWMutex
	m    map[uint64]int64
	more map[uint64][]int64
}

// idKey is the index's key for a 32-byte id.
func idKey(id []byte) uint64 { return binary.LittleEndian.Uint64(id) }

func newIDIndex(n int) *idIndex {
	return &idIndex{m: make(map[uint64]int64, n), more: map[uint64][]int64{}}
}

// candidates appends to dst the seqs of the events whose ids begin as id
// does, oldest first (almost always none or one).
func (x *idIndex) candidates(dst []int64, id []byte) []int64 {
	k := idKey(id)
	x.mu.RLock()
	defer x.mu.RUnlock()
	if seq, ok := x.m[k]; ok {
		dst = append(dst, seq)
		dst = append(dst, x.more[k]...)
	}
	return dst
}

// put records id at seq (writer only, and Open).
func (x *idIndex) put(id []byte, seq int64) {
	k := idKey(id)
	x.mu.Lock()
	x.putLocked(k, seq)
	x.mu.Unlock()
}

func (x *idIndex) putLocked(k uint64, seq int64) {
	if _, ok := x.m[k]; ok {
		x.more[k] = append(x.more[k], seq)
		return
	}
	x.m[k] = seq
}

// forget removes the ids a transaction recorded and did not commit (ids
// holds them in seq order from seq first).
func (x *idIndex) forget(ids [][32]byte, first int64) {
	if len(ids) == 0 {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	for i := len(ids) - 1; i >= 0; i-- {
		x.remove(idKey(ids[i][:]), first+int64(i))
	}
}

// remove drops the pair (k, seq).
func (x *idIndex) remove(k uint64, seq int64) {
	more := x.more[k]
	if s, ok := x.m[k]; ok && s == seq {
		if len(more) == 0 {
			delete(x.m, k)
			return
		}
		x.m[k], more = more[0], more[1:]
	} else {
		for i, s := range more {
			if s == seq {
				more = append(more[:i:i], more[i+1:]...)
				break
			}
		}
	}
	if len(more) == 0 {
		delete(x.more, k)
	} else {
		x.more[k] = more
	}
}

// len is how many ids the index holds.
func (x *idIndex) len() int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	n := len(x.m)
	for _, more := range x.more {
		n += len(more)
	}
	return n
}

// loadIndexes reads every stored event's id, author, created_at and kind
// into a new id index and author index (at Open, on the writer).
func loadIndexes(w *sql.DB) (*idIndex, *authorIndex, error) {
	var n int64
	if err := w.QueryRow(`SELECT COALESCE(MAX(seq), 0) FROM events`).Scan(&n); err != nil {
		return nil, nil, fmt.Errorf("load ids: %w", err)
	}
	x, authors := newIDIndex(int(n)), newAuthorIndex()
	rows, err := w.Query(`SELECT seq, id, agent_id, created_at, kind FROM events`)
	if err != nil {
		return nil, nil, fmt.Errorf("load ids: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, agent sql.RawBytes
		var seq, at, kind int64
		if err := rows.Scan(&seq, &id, &agent, &at, &kind); err != nil {
			return nil, nil, fmt.Errorf("load ids: %w", err)
		}
		if len(id) == 32 {
			x.putLocked(idKey(id), seq)
			if len(agent) == 32 {
				authors.addLocked([32]byte(agent), entryOf(id, at, kind, seq))
			}
		}
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("load ids: %w", err)
	}
	return x, authors, nil
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
