package relay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/eventlog"
	"github.com/anp2net/relay/relay/reconcile"
	"github.com/anp2net/relay/relay/state"
)

// errStop ends an Export early.
var errStop = errors.New("stop")

// buildState folds the stored log into a new state: from the saved state
// in cfg.StateDir and the log's tail when that state is usable, else from
// the whole log (SPEC §2.2). It fills s.index with every stored event.
func (s *Server) buildState(ctx context.Context, opts state.Options) (*state.State, error) {
	if s.cfg.StateDir != "" {
		dir, err := state.OpenDir(s.cfg.StateDir)
		if err != nil {
			return nil, err
		}
		s.stateDir = dir
		st, err := resume(ctx, s.store, opts, dir, s.cfg.Logger, s.cfg.OnRebuild, s.index)
		if err != nil || st != nil {
			return st, err
		}
	}
	return rebuild(ctx, s.store, opts, s.cfg.OnRebuild, func(e *protocol.Event) { s.index.Add(ItemOf(e)) })
}

// resume builds the state from dir's newest snapshot and the log after
// it. It returns nil and no error when the snapshot is missing or cannot
// be used as a whole (ahead of the log, of another log, its composition
// damaged or of another version): the caller folds the whole log. Views
// whose own saved state is unusable are fed the log's head instead.
func resume(ctx context.Context, log eventlog.Log, opts state.Options, dir *state.Dir, lg *slog.Logger, progress func(done, total int64), index *reconcile.Index) (*state.State, error) {
	t0 := time.Now()
	sv, err := dir.Latest()
	if errors.Is(err, state.ErrNoSnapshot) {
		lg.Info("no saved state: folding the whole log", "state_dir", dir.Path())
		return nil, nil
	}
	if err != nil {
		lg.Warn("saved state unreadable: folding the whole log", "err", err)
		return nil, nil
	}
	m := sv.Manifest
	if why, err := checkPosition(ctx, log, m); err != nil {
		return nil, err
	} else if why != "" {
		lg.Warn("saved state does not match the log: folding the whole log", "seq", m.Seq, "why", why)
		return nil, nil
	}
	lookup := storeLookup(log)
	st := state.New(opts)
	restored, why, err := st.Resume(sv, lookup)
	if err != nil {
		lg.Warn("saved state unusable: folding the whole log", "seq", m.Seq, "err", err)
		return nil, nil
	}
	for name, r := range why {
		lg.Info("view not restored: folding the log's head into it", "view", name, "why", r)
	}
	lg.Info("saved state restored", "seq", m.Seq, "views", len(restored), "refolded", len(why))
	if len(why) > 0 {
		if err := feedHead(ctx, log, st, m.Seq, restored, progress); err != nil {
			return nil, err
		}
	}
	if err := log.Items(ctx, nil, nil, math.MinInt64, func(at int64, id []byte) {
		it := reconcile.Item{CreatedAt: at}
		copy(it.ID[:], id)
		index.Add(it)
	}); err != nil {
		return nil, fmt.Errorf("resume: index: %w", err)
	}
	var tail int64
	folded := m.Seq
	tailLookup := foldedLookup(log, &folded)
	err = log.Export(ctx, m.Seq, noStart, func(seq int64, body []byte) error {
		e, err := protocol.DecodeJSON(body)
		if err != nil {
			return fmt.Errorf("resume: event at seq %d: %w", seq, err)
		}
		folded = seq
		st.Add(seq, e, tailLookup)
		index.Add(ItemOf(e)) // idempotent: Items may have listed it
		tail++
		return nil
	})
	if err != nil {
		return nil, err
	}
	current := true
	for _, r := range why {
		current = current && r == state.NoSnapshotSupport
	}
	dir.SetResumed(m.Seq, current)
	lg.Info("derived state resumed", "from_seq", m.Seq, "tail_events", tail, "seconds", time.Since(t0).Seconds())
	return st, nil
}

// checkPosition reports why snapshot m does not belong to log ("" when it
// does): its seq must be in the log, the event there must be the one it
// names, and the log must hold exactly its count of events up to it.
func checkPosition(ctx context.Context, log eventlog.Log, m *state.Manifest) (string, error) {
	stats, err := log.Stats(ctx)
	if err != nil {
		return "", err
	}
	if m.Seq > stats.MaxSeq {
		return fmt.Sprintf("saved at seq %d, the log ends at %d", m.Seq, stats.MaxSeq), nil
	}
	var tail int64
	var atSeq string
	err = log.Export(ctx, max(m.Seq-1, 0), noStart, func(seq int64, body []byte) error {
		if seq == m.Seq {
			e, err := protocol.DecodeJSON(body)
			if err != nil {
				return fmt.Errorf("resume: event at seq %d: %w", seq, err)
			}
			atSeq = e.ID
		}
		if seq > m.Seq {
			tail++
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	if m.Seq > 0 && atSeq != m.LastID {
		return fmt.Sprintf("the event at seq %d is not the one saved", m.Seq), nil
	}
	if stats.Events-tail != m.Count {
		return fmt.Sprintf("the log holds %d events up to seq %d, the saved state %d", stats.Events-tail, m.Seq, m.Count), nil
	}
	return "", nil
}

// feedHead feeds the log up to seq to the views not restored.
func feedHead(ctx context.Context, log eventlog.Log, st *state.State, through int64, restored map[string]bool, progress func(done, total int64)) error {
	var done int64
	err := log.Export(ctx, 0, noStart, func(seq int64, body []byte) error {
		if seq > through {
			return errStop
		}
		e, err := protocol.DecodeJSON(body)
		if err != nil {
			return fmt.Errorf("resume: event at seq %d: %w", seq, err)
		}
		st.FeedHead(e, restored)
		if done++; progress != nil && done%5000 == 0 {
			progress(seq, through)
		}
		return nil
	})
	if errors.Is(err, errStop) {
		err = nil
	}
	return err
}

// SaveState saves the derived state in the state directory (Config.StateDir):
// every view is copied at one log position under the state's lock, then
// encoded and written out without it. It does nothing without a state
// directory.
func (s *Server) SaveState() error {
	if s.stateDir == nil {
		return nil
	}
	if s.stateDir.Saved(s.state.Seq()) {
		return nil // the log has not grown since
	}
	t0 := time.Now()
	c, err := s.state.Capture()
	if err != nil {
		return err
	}
	held := time.Since(t0)
	m, err := s.stateDir.Save(c)
	if err != nil {
		return err
	}
	var bytes int64
	for _, v := range m.Views {
		bytes += v.Bytes
	}
	s.cfg.Logger.Info("derived state saved", "seq", m.Seq, "bytes", bytes, "unsaved", len(m.Unsaved),
		"locked_seconds", c.Held.Seconds(), "encode_seconds", held.Seconds(), "seconds", time.Since(t0).Seconds())
	return nil
}

// snapshotBytes returns the on-disk bytes of each view's saved state, by
// view name (none while the relay keeps no saved state).
func (s *Server) snapshotBytes() map[string]int64 {
	if s.stateDir == nil {
		return nil
	}
	return s.stateDir.Sizes()
}

func noStart(int64) error { return nil }

// resumedSeq is the log position the state resumed from, -1 when it folded
// the whole log, noStateDir without a state directory.
func (s *Server) resumedSeq() int64 {
	if s.stateDir == nil {
		return noStateDir
	}
	return s.stateDir.Resumed()
}
