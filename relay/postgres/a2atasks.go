package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Bounds of the a2a_tasks table: at most a2aTaskRows tasks (about; a
// prune runs every a2aPruneEvery writes, so it may pass the bound by as
// many) of at most a2aTaskBytes each. The a2a package sends nothing
// larger; a larger body is refused here too.
const (
	a2aTaskRows   = 2048
	a2aTaskBytes  = 256 << 10
	a2aPruneEvery = 32
)

// PutA2ATask stores the A2A-originated task id (its JSON, body), so every
// relay process over this database answers for it (a2a.SharedTasks). The
// oldest tasks past the table's bound are deleted now and then.
func (s *Store) PutA2ATask(ctx context.Context, id string, body []byte) error {
	if len(body) > a2aTaskBytes {
		return fmt.Errorf("a2a task %s: %d bytes, over %d", id, len(body), a2aTaskBytes)
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO a2a_tasks (id, body, created_at) VALUES ($1, $2, $3)
		ON CONFLICT (id) DO UPDATE SET body = EXCLUDED.body`, id, body, time.Now().UnixNano())
	if err != nil {
		return fmt.Errorf("put a2a task: %w", err)
	}
	if s.a2aWrites.Add(1)%a2aPruneEvery == 0 {
		_, err = s.pool.Exec(ctx, `DELETE FROM a2a_tasks WHERE created_at < (
			SELECT created_at FROM a2a_tasks ORDER BY created_at DESC OFFSET $1 LIMIT 1)`, a2aTaskRows-1)
		if err != nil {
			return fmt.Errorf("prune a2a tasks: %w", err)
		}
	}
	return nil
}

// GetA2ATask returns the JSON of the A2A-originated task id, false when
// no process stored it (or it was pruned).
func (s *Store) GetA2ATask(ctx context.Context, id string) ([]byte, bool, error) {
	var body []byte
	err := s.pool.QueryRow(ctx, `SELECT body FROM a2a_tasks WHERE id = $1`, id).Scan(&body)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("get a2a task: %w", err)
	}
	return body, true, nil
}
