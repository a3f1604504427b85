package sqlite

import (
	"context"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/eventlog"
)

// ErrWithheld is returned by Redact for an event whose body the log
// already withholds.
var ErrWithheld = eventlog.ErrWithheld

// Redact replaces the stored body of event id with tombstone (an
// eventlog.Tombstone naming it), SPEC §21.8: the row keeps its seq, id
// and created_at (the tree's entry, the reconciliation item) and loses
// everything else: its body and raw bytes, its author and kind (so no
// author, kind or history read finds it), its tag rows; a revokes row
// keeps every query that checks revocations in SQL from returning the
// tombstone. The space the body held is zeroed (secure_delete) and
// checkpointed into the log file. It
// returns ErrNotFound for an id the log does not hold, ErrWithheld for a
// tombstone. The store's own indexes and cache forget the body; a relay
// serving the log would not (its derived state), so anp2 redact runs only
// on a log no relay serves.
func (s *Store) Redact(ctx context.Context, id string, tombstone []byte) error {
	idb, revokeID, err := eventlog.RedactionKeys(id, tombstone)
	if err != nil {
		return err
	}
	return s.control(ctx, func() error { return s.redact(idb, revokeID, tombstone) })
}

// redact is Redact on the writer's connection, between transactions.
func (s *Store) redact(id, revokeID, tombstone []byte) error {
	var seq int64
	var body []byte
	found := false
	for _, c := range s.ids.candidates(nil, id) {
		err := s.write.QueryRow(`SELECT seq, body FROM events WHERE seq = ? AND id = ?`, c, id).Scan(&seq, &body)
		if err == nil {
			found = true
			break
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("redact: %w", err)
		}
	}
	if !found {
		return ErrNotFound
	}
	if _, _, ok := eventlog.WithheldOf(body); ok {
		return ErrWithheld
	}
	e, err := protocol.DecodeJSON(body)
	if err != nil {
		return fmt.Errorf("redact: stored event at seq %d: %w", seq, err)
	}
	// The index file would keep the event's author entry: it goes first
	// (after a save under way, which could write it again), and Close
	// saves the indexes as the redaction leaves them. Saves start only on
	// the writer, which this runs on.
	s.saveWG.Wait()
	if err := s.removeIndex(); err != nil {
		return fmt.Errorf("redact: %w", err)
	}
	if _, err := s.write.Exec(`PRAGMA secure_delete = ON`); err != nil {
		return fmt.Errorf("redact: %w", err)
	}
	defer s.write.Exec(`PRAGMA secure_delete = OFF`)
	tx, err := s.write.Begin()
	if err != nil {
		return fmt.Errorf("redact: %w", err)
	}
	defer tx.Rollback()
	for _, t := range e.Tags {
		if len(t) < 2 {
			continue
		}
		if _, err := tx.Exec(`DELETE FROM tags WHERE name = ? AND value = ? AND created_at = ? AND seq = ?`, t[0], t[1], e.CreatedAt, seq); err != nil {
			return fmt.Errorf("redact: tags: %w", err)
		}
	}
	stmts := []struct {
		q    string
		args []any
	}{
		{`DELETE FROM tags_pending WHERE seq = ?`, []any{seq}},
		{`UPDATE events SET body = ?, raw = NULL, raw_type = NULL, agent_id = x'', kind = -1 WHERE seq = ?`, []any{string(tombstone), seq}},
		{`INSERT OR IGNORE INTO revokes(target, author, revoke_id, created_at) VALUES(?, x'', ?, ?)`, []any{id, revokeID, int64(math.MinInt64)}},
	}
	for _, st := range stmts {
		if _, err := tx.Exec(st.q, st.args...); err != nil {
			return fmt.Errorf("redact: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("redact: commit: %w", err)
	}
	s.cache.drop(seq)
	if agent, err := hex.DecodeString(e.AgentID); err == nil && len(agent) == 32 {
		s.authors.remove([32]byte(agent), seq)
	}
	// Copy the zeroed pages into the log file now (PASSIVE: a serving
	// relay's readers are not waited for); the frames that held the body
	// are overwritten as the WAL is reused, and the WAL is removed when
	// the last connection closes (anp2 redact's store, at its end).
	s.walCheckpoint(s.write, "PASSIVE")
	return nil
}

// drop forgets the body cached for seq.
func (c *bodyCache) drop(seq int64) {
	sh := c.shard(seq)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if b, ok := sh.m[seq]; ok {
		sh.bytes -= len(b)
		delete(sh.m, seq)
	}
}

// remove drops the entry of seq from agent's list (a withheld event).
func (x *authorIndex) remove(agent [32]byte, seq int64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	l := x.m[agent]
	if l == nil {
		return
	}
	for i, c := range l.chunks {
		for j, e := range c {
			if int64(e.seq) != seq {
				continue
			}
			delete(x.wide, e.seq)
			// A new chunk: a snapshot may hold this one (see authorIndex).
			if c = slices.Delete(slices.Clone(c), j, j+1); len(c) == 0 {
				l.chunks = slices.Delete(l.chunks, i, i+1)
			} else {
				l.chunks[i] = c
			}
			x.n--
			return
		}
	}
}

// AppendTombstone appends, as the log's next event, the tombstone of a
// withheld event (anp2 migrate copying a log that holds one, SPEC
// §21.8): a row with the event's id and created_at and nothing else of
// it, as Redact leaves one. It returns the seq it took; an id the log
// already holds is an error.
func (s *Store) AppendTombstone(ctx context.Context, tombstone []byte, receivedAt int64) (int64, error) {
	id, w, ok := eventlog.WithheldOf(tombstone)
	if !ok {
		return 0, fmt.Errorf("append tombstone: not a tombstone")
	}
	idb, revokeID, err := eventlog.RedactionKeys(id, tombstone)
	if err != nil {
		return 0, err
	}
	var seq int64
	err = s.control(ctx, func() error {
		tx, err := s.write.Begin()
		if err != nil {
			return err
		}
		defer tx.Rollback()
		if s.unsure {
			if err := s.catchUp(tx); err != nil {
				return err
			}
		}
		for _, c := range s.ids.candidates(nil, idb) {
			var one int
			if tx.QueryRow(`SELECT 1 FROM events WHERE seq = ? AND id = ?`, c, idb).Scan(&one) == nil {
				return fmt.Errorf("the log holds %s already", id)
			}
		}
		seq = s.nextSeq
		if seq > maxSeq {
			return errLogFull
		}
		if _, err := tx.Exec(`INSERT INTO events(seq, id, agent_id, created_at, kind, body, raw, raw_type, received_at)
			VALUES(?, ?, x'', ?, -1, ?, NULL, NULL, ?)`, seq, idb, w.CreatedAt, string(tombstone), receivedAt); err != nil {
			return err
		}
		if _, err := tx.Exec(`INSERT OR IGNORE INTO revokes(target, author, revoke_id, created_at) VALUES(?, x'', ?, ?)`,
			idb, revokeID, int64(math.MinInt64)); err != nil {
			return err
		}
		if err := tx.Commit(); err != nil {
			return err
		}
		s.nextSeq++
		s.ids.put(idb, seq)
		s.items.write([]newItem{{seq: seq, at: w.CreatedAt, id: [32]byte(idb)}})
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("append tombstone: %w", err)
	}
	return seq, nil
}
