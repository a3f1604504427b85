package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// Rates keeps rate-limit state (GCRA theoretical arrival times) in the
// database, so a limit holds across every relay process over it: the
// relay's per-agent limit uses it (relay.SharedRates). Each charge is one
// statement that reads and advances the key's time atomically. Keys idle
// past their window are swept now and then.
type Rates struct {
	s      *Store
	prefix string
	swept  atomic.Int64
}

// Rates returns the shared rate state of the limit named name (keys of
// different limits never mix).
func (s *Store) Rates(name string) *Rates { return &Rates{s: s, prefix: name + ":"} }

// rateTimeout bounds one charge: the publish waits on it.
const rateTimeout = 2 * time.Second

// Take charges interval to key at now when take is set and the key's new
// theoretical arrival time stays within window of now; it reports whether
// the charge fits and, if not, how long until it would.
func (r *Rates) Take(key string, now time.Time, interval, window time.Duration, take bool) (bool, time.Duration, error) {
	ctx, cancel := context.WithTimeout(r.s.ctx, rateTimeout)
	defer cancel()
	k, n := r.prefix+key, now.UnixNano()
	r.sweep(n, window)
	if take {
		var tat int64
		err := r.s.pool.QueryRow(ctx, `INSERT INTO rate_tat AS r (key, tat) VALUES ($1, $2::bigint + $3::bigint)
			ON CONFLICT (key) DO UPDATE SET tat = GREATEST(r.tat, $2::bigint) + $3::bigint
			WHERE GREATEST(r.tat, $2::bigint) + $3::bigint - $2::bigint <= $4::bigint
			RETURNING tat`, k, n, int64(interval), int64(window)).Scan(&tat)
		if err == nil {
			return true, 0, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return false, 0, fmt.Errorf("rate charge: %w", err)
		}
		if interval > window {
			return false, interval - window, nil // a new key over the limit at once
		}
	}
	var tat int64
	err := r.s.pool.QueryRow(ctx, `SELECT tat FROM rate_tat WHERE key = $1`, k).Scan(&tat)
	if errors.Is(err, pgx.ErrNoRows) {
		tat = n
	} else if err != nil {
		return false, 0, fmt.Errorf("rate state: %w", err)
	}
	next := time.Duration(max(tat, n) + int64(interval) - n)
	if next > window {
		return false, next - window, nil
	}
	return true, 0, nil
}

// sweep deletes keys whose time has passed, at most once a window, in the
// background.
func (r *Rates) sweep(now int64, window time.Duration) {
	last := r.swept.Load()
	if now-last < int64(window) || !r.swept.CompareAndSwap(last, now) {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(r.s.ctx, 10*time.Second)
		defer cancel()
		r.s.pool.Exec(ctx, `DELETE FROM rate_tat WHERE tat < $1`, now)
	}()
}
