package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
)

// idMap stands in for the events_id index while a bulk load has dropped
// it. Inserting into that index is the costliest part of a large load: ids
// are hashes, so every transaction dirties most of its pages, and each is
// written to the WAL and copied back again. Instead the writer checks each
// id against the map and records it there before its transaction commits;
// readers resolve ids through it. It is filled from the log when the load
// begins (every id the log holds, 50-100 bytes each) and retired once
// events_id is rebuilt.
type idMap struct {
	mu sync.RWMutex
	m  map[[32]byte]int64
}

func (m *idMap) get(id [32]byte) (int64, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	seq, ok := m.m[id]
	return seq, ok
}

func (m *idMap) put(id [32]byte, seq int64) {
	m.mu.Lock()
	m.m[id] = seq
	m.mu.Unlock()
}

// forget removes ids recorded by a transaction that did not commit.
func (m *idMap) forget(ids [][32]byte) {
	if len(ids) == 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, id := range ids {
		delete(m.m, id)
	}
}

// loadIDs reads every stored id into a new map; run on the writer.
func loadIDs(w *sql.DB) (*idMap, error) {
	var n int64
	if err := w.QueryRow(`SELECT COALESCE(MAX(seq), 0) FROM events`).Scan(&n); err != nil {
		return nil, fmt.Errorf("load ids: %w", err)
	}
	m := &idMap{m: make(map[[32]byte]int64, n)}
	rows, err := w.Query(`SELECT id, seq FROM events`)
	if err != nil {
		return nil, fmt.Errorf("load ids: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id sql.RawBytes
		var seq int64
		if err := rows.Scan(&id, &seq); err != nil {
			return nil, fmt.Errorf("load ids: %w", err)
		}
		if len(id) == 32 {
			m.m[[32]byte(id)] = seq
		}
	}
	return m, rows.Err()
}

// resolve answers for id from the bulk load's map: ok reports whether the
// map could answer, and found whether id is stored (at seq, which the
// caller must read together with the id: a seq recorded by a transaction
// that rolled back is given to the next event). With ok false the caller
// reads by id through events_id.
func (s *Store) resolve(id []byte) (seq int64, found, ok bool) {
	m := s.ids.Load()
	if m == nil || len(id) != 32 {
		return 0, false, false
	}
	if seq, found = m.get([32]byte(id)); found {
		return seq, true, true
	}
	// A miss is final only while the map is current: the writer stops
	// recording ids in it once events_id is back.
	if s.ids.Load() != m {
		return 0, false, false
	}
	return 0, false, true
}

// resolveIDs gives f the seqs of its ids while a bulk load has events_id
// dropped, so the query reads them by seq; none reports that no id is
// stored.
func (s *Store) resolveIDs(filter Filter) (f query, none bool) {
	f.Filter = filter
	if len(f.IDs) == 0 || s.ids.Load() == nil {
		return f, false
	}
	seqs := make([]int64, 0, len(f.IDs))
	for _, h := range f.IDs {
		id, ok := decodeID(h)
		if !ok {
			continue
		}
		seq, found, ok := s.resolve(id)
		if !ok {
			return f, false // events_id is back
		}
		if found {
			seqs = append(seqs, seq)
		}
	}
	f.idSeqs = seqs
	return f, len(seqs) == 0
}

// readByID runs one of a pair of statements that read a row by id: bySeq
// (arguments seq, id) while the bulk load's map answers, byID (argument
// id) otherwise. It returns sql.ErrNoRows when id is not stored.
func (s *Store) readByID(ctx context.Context, id []byte, bySeq, byID *sql.Stmt, dst ...any) error {
	if seq, found, ok := s.resolve(id); ok {
		if !found {
			return sql.ErrNoRows
		}
		return bySeq.QueryRowContext(ctx, seq, id).Scan(dst...)
	}
	return byID.QueryRowContext(ctx, id).Scan(dst...)
}
