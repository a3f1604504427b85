package postgres

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/jackc/pgx/v5"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/eventlog"
)

// ErrWithheld is returned by Redact for an event whose body the log
// already withholds.
var ErrWithheld = eventlog.ErrWithheld

// Redact replaces the stored body of event id with tombstone (an
// eventlog.Tombstone naming it), SPEC §21.8, in one transaction under the
// log's lock: the row keeps its seq, id and created_at and loses its body,
// raw bytes, author and kind; its tag rows go; a revokes row keeps the
// queries that check revocations in SQL from returning the tombstone. It
// returns ErrNotFound for an id the log does not hold, ErrWithheld for a
// tombstone. PostgreSQL frees the old row version at its next vacuum.
func (s *Store) Redact(ctx context.Context, id string, tombstone []byte) error {
	idb, revokeID, err := eventlog.RedactionKeys(id, tombstone)
	if err != nil {
		return err
	}
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(logLock)); err != nil {
			return err
		}
		var seq int64
		var body []byte
		err := tx.QueryRow(ctx, `SELECT seq, body FROM events WHERE id = $1`, idb).Scan(&seq, &body)
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil {
			return fmt.Errorf("redact: %w", err)
		}
		if _, _, ok := eventlog.WithheldOf(body); ok {
			return ErrWithheld
		}
		e, err := protocol.DecodeJSON(body)
		if err != nil {
			return fmt.Errorf("redact: stored event at seq %d: %w", seq, err)
		}
		for _, t := range e.Tags {
			if len(t) < 2 {
				continue
			}
			if _, err := tx.Exec(ctx, `DELETE FROM tags WHERE name = $1 AND value = $2 AND created_at = $3 AND id = $4`, t[0], t[1], e.CreatedAt, idb); err != nil {
				return fmt.Errorf("redact: tags: %w", err)
			}
		}
		if _, err := tx.Exec(ctx, `UPDATE events SET body = $1, raw = NULL, raw_type = NULL, agent_id = '\x'::bytea, kind = -1 WHERE seq = $2`, tombstone, seq); err != nil {
			return fmt.Errorf("redact: %w", err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO revokes(target, author, revoke_id, created_at) VALUES($1, '\x'::bytea, $2, $3) ON CONFLICT DO NOTHING`, idb, revokeID, int64(math.MinInt64)); err != nil {
			return fmt.Errorf("redact: %w", err)
		}
		return nil
	})
}

// Serving counts the other sessions of the log's database that follow
// its commits (a relay process's listener: LISTEN anp2_log), over a
// connection of its own to url.
func Serving(ctx context.Context, url string) (int, error) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return 0, err
	}
	defer conn.Close(context.Background())
	var n int
	err = conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
		AND pid <> pg_backend_pid() AND query = 'LISTEN `+channel+`'`).Scan(&n)
	return n, err
}

// AppendTombstone appends, as the log's next event, the tombstone of a
// withheld event (anp2 migrate copying a log that holds one, SPEC
// §21.8): a row with the event's id and created_at and nothing else of
// it, as Redact leaves one. It returns the seq it took; an id the log
// already holds is ErrWithheld or a duplicate error.
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
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(logLock)); err != nil {
			return err
		}
		var held bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS(SELECT 1 FROM events WHERE id = $1)`, idb).Scan(&held); err != nil {
			return err
		}
		if held {
			return fmt.Errorf("append tombstone: the log holds %s already", id)
		}
		if err := tx.QueryRow(ctx, `SELECT COALESCE(MAX(seq), 0) + 1 FROM events`).Scan(&seq); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO events(seq, id, agent_id, created_at, kind, body, raw, raw_type, received_at)
			VALUES($1, $2, '\x'::bytea, $3, -1, $4, NULL, NULL, $5)`, seq, idb, w.CreatedAt, tombstone, receivedAt); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO revokes(target, author, revoke_id, created_at) VALUES($1, '\x'::bytea, $2, $3) ON CONFLICT DO NOTHING`,
			idb, revokeID, int64(math.MinInt64))
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("append tombstone: %w", err)
	}
	return seq, nil
}
