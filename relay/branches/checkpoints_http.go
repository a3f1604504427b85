package branches

import (
	"context"
	"net/http"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/httpx"
	"github.com/anp2net/relay/relay/state"
	"github.com/labstack/echo/v4"
)

// Snapshot returns this relay's checkpoint content at asOf (cached).
func (m *Module) Snapshot(ctx context.Context, asOf int64) (Snapshot, error) {
	m.mu.Lock()
	s, ok := m.prefix[asOf]
	m.mu.Unlock()
	if ok {
		return s, nil
	}
	// One rebuild at a time: each reads the log, and anyone may ask for
	// a draft at any time.
	m.rebuildMu.Lock()
	defer m.rebuildMu.Unlock()
	m.mu.Lock()
	s, ok = m.prefix[asOf]
	m.mu.Unlock()
	if ok {
		return s, nil
	}
	opts := state.Options{Treasury: m.core.Config().Treasury}
	if m.opts.Folds != nil {
		opts.Folds = m.opts.Folds()
	}
	s, err := Prefix(asOf, opts, LogEvents(ctx, m.core.Log()))
	if err != nil {
		return s, err
	}
	m.mu.Lock()
	if len(m.prefix) >= maxPrefixes {
		for k := range m.prefix { // drop one at random: the cache stays bounded
			delete(m.prefix, k)
			break
		}
	}
	m.prefix[asOf] = s
	m.mu.Unlock()
	return s, nil
}

// maxPrefixes bounds the cached states at past times.
const maxPrefixes = 64

// Verification statuses of a checkpoint against this relay's log.
const (
	Matches = "matches"
	Differs = "differs"
	NotYet  = "not_yet"
	// NotChecked marks an invalid checkpoint, which is not verified.
	NotChecked = "not_checked"
)

// verify says whether this relay's log reproduces c at now: not_yet while
// as_of is in the future or the log holds fewer events up to as_of than
// event_count, else matches or differs.
func (m *Module) verify(ctx context.Context, c Checkpoint, now int64) (string, Snapshot, error) {
	if c.AsOf > now {
		return NotYet, Snapshot{}, nil
	}
	s, err := m.Snapshot(ctx, c.AsOf)
	switch {
	case err != nil:
		return "", s, err
	case s.StateHash == c.StateHash:
		return Matches, s, nil
	case s.EventCount < c.EventCount:
		return NotYet, s, nil
	}
	return Differs, s, nil
}

// checkpointRow is one row of GET /checkpoints.
type checkpointRow struct {
	CheckpointView
	Verification string `json:"verification"`
	// Local is this relay's own state hash and event count at as_of.
	Local *Snapshot `json:"local,omitempty"`
}

// getCheckpoints is GET /checkpoints (SPEC §17.1): valid ones first, then
// the others, each group newest first by (created_at, id), each with its
// verification against this relay's log.
func (m *Module) getCheckpoints(c echo.Context) error {
	v, err := httpx.Params(c, "valid")
	if err != nil {
		return err
	}
	onlyValid, err := httpx.BoolParam(v, "valid")
	if err != nil {
		return err
	}
	now := m.core.Now()
	view := *m.fold.Current(now)
	rows := []checkpointRow{}
	for _, pass := range []bool{true, false} {
		for i := len(view.Checkpoints) - 1; i >= 0; i-- {
			cv := view.Checkpoints[i]
			if cv.Valid != pass || (onlyValid && !cv.Valid) {
				continue
			}
			// Only valid checkpoints are checked: a rebuild reads the log,
			// and anyone can publish invalid ones.
			row := checkpointRow{CheckpointView: cv, Verification: NotChecked}
			if cv.Valid {
				st, local, err := m.verify(c.Request().Context(), cv.Checkpoint, now)
				if err != nil {
					return err
				}
				row.Verification = st
				if local.StateHash != "" {
					row.Local = &local
				}
			}
			rows = append(rows, row)
		}
	}
	return c.JSON(http.StatusOK, rows)
}

// getDraft is GET /checkpoints/draft?as_of=T[&checkpoint_id=X]: the
// content to cosign for a checkpoint of this relay's log at T.
func (m *Module) getDraft(c echo.Context) error {
	v, err := httpx.Params(c, "as_of", "checkpoint_id")
	if err != nil {
		return err
	}
	now := m.core.Now()
	asOf, err := httpx.IntParam(v, "as_of", now, 0, now)
	if err != nil {
		return err
	}
	id := v.Get("checkpoint_id")
	if id == "" {
		id = DefaultCheckpointID(asOf)
	}
	if len(id) > MaxCheckpointID {
		return protocol.Errorf(httpx.CodeBadParameter, "checkpoint_id must be at most %d bytes", MaxCheckpointID)
	}
	s, err := m.Snapshot(c.Request().Context(), asOf)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, Checkpoint{CheckpointID: id, StateHash: s.StateHash, EventCount: s.EventCount, AsOf: asOf})
}
