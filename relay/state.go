package relay

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"time"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/eventlog"
	"github.com/anp2net/relay/relay/reconcile"
	"github.com/anp2net/relay/relay/state"
	"github.com/anp2net/relay/tasks"
	"github.com/anp2net/relay/trust"
	"github.com/labstack/echo/v4"
)

// rebuild folds every stored event into a fresh state, in log order, and
// reports progress (done, total) every few thousand events.
func rebuild(ctx context.Context, st eventlog.Log, opts state.Options, progress func(done, total int64), also func(*protocol.Event)) (*state.State, error) {
	s := state.New(opts)
	var folded int64
	lookup := foldedLookup(st, &folded)
	var total, done int64
	err := st.Export(ctx, 0, func(through int64) error { total = through; return nil },
		func(seq int64, body []byte) error {
			folded = seq
			e, err := s.AddStored(seq, body, lookup)
			if err != nil {
				return fmt.Errorf("rebuild: event at seq %d: %w", seq, err)
			}
			if e != nil { // nil: a withheld event's tombstone
				also(e)
			}
			done++
			if progress != nil && done%5000 == 0 {
				progress(seq, total)
			}
			return nil
		})
	if err != nil {
		return nil, err
	}
	if progress != nil {
		progress(total, total)
	}
	return s, nil
}

// foldedLookup is storeLookup for a fold of the stored log in seq order:
// it finds only the events at or before *folded, as a live relay's lookup
// finds only the events committed (and folded) before. A later event is
// not there yet: the revocation is then applied when it is added, and no
// view is asked to remove an event it never saw.
func foldedLookup(st eventlog.Log, folded *int64) state.Lookup {
	return func(id string) *protocol.Event {
		se, err := st.Get(context.Background(), id)
		if err != nil || se.Seq > *folded {
			return nil
		}
		e, err := protocol.DecodeJSON(se.Body)
		if err != nil {
			return nil
		}
		return e
	}
}

// storeLookup fetches stored events for revocations (rare: kind 9 only).
func storeLookup(st eventlog.Log) state.Lookup {
	return func(id string) *protocol.Event {
		e, err := st.GetEvent(context.Background(), id)
		if err != nil {
			return nil
		}
		return e
	}
}

// apply is the store's commit hook: it folds newly committed events into
// the derived state before their publishers are answered.
func (s *Server) apply(batch []eventlog.Committed) {
	// A batch is committed at once: a kind 9 must not find a target that
	// comes after it in the batch before that target is folded.
	var folded int64
	lookup := foldedLookup(s.store, &folded)
	for _, c := range batch {
		folded = c.Seq
		s.state.Add(c.Seq, c.Event, lookup)
		s.index.Add(ItemOf(c.Event))
	}
	for _, h := range s.onCommit {
		h(batch)
	}
}

// weights returns the verifier weight function at now: the published trust
// snapshot, refreshed in the background when stale, with no weight for a
// verifier whose collusion challenge holds (§18.6.1).
func (s *Server) weights(now int64) tasks.WeightFunc { return verifierWeights(s.viewsState(), now) }

// verifierWeights is st's verifier weight function at now (the published
// trust and moderation snapshots; trust.VerifierWeight).
func verifierWeights(st *state.State, now int64) tasks.WeightFunc {
	return trust.VerifierWeight(st.Trust.Current(now), st.Moderation.Current(now))
}

// TaskSource answers task queries at the relay clock with the trust
// weights of the same state: the preferred branch's (SPEC §17.5), or the
// branch NativeTasksIn named. The A2A module reads native tasks through it.
type TaskSource struct {
	s *Server
	// st is the state of the branch asked for; nil: the preferred
	// branch's, resolved at each call.
	st *state.State
}

// state returns the state t answers from.
func (t TaskSource) state() *state.State {
	if t.st != nil {
		return t.st
	}
	return t.s.viewsState()
}

// Task returns the task with id, or false.
func (t TaskSource) Task(id string) (tasks.TaskView, bool) {
	now, st := t.s.cfg.Now().Unix(), t.state()
	return st.Tasks.Task(id, now, verifierWeights(st, now))
}

// List returns the tasks matching f, newest first.
func (t TaskSource) List(f tasks.Filter) []tasks.TaskView {
	now, st := t.s.cfg.Now().Unix(), t.state()
	return st.Tasks.List(f, now, verifierWeights(st, now))
}

// ItemOf is an event's reconciliation item.
func ItemOf(e *protocol.Event) reconcile.Item {
	it := reconcile.Item{CreatedAt: e.CreatedAt}
	hex.Decode(it.ID[:], []byte(e.ID))
	return it
}

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
	st, err := rebuild(ctx, s.store, opts, s.cfg.OnRebuild, func(e *protocol.Event) { s.index.Add(ItemOf(e)) })
	if err == nil {
		dropWithheldItems(st, s.index)
	}
	return st, err
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
		folded = seq
		e, err := st.AddStored(seq, body, tailLookup)
		if err != nil {
			return fmt.Errorf("resume: event at seq %d: %w", seq, err)
		}
		if e != nil { // nil: a withheld event's tombstone
			index.Add(ItemOf(e)) // idempotent: Items may have listed it
		}
		tail++
		return nil
	})
	if err != nil {
		return nil, err
	}
	dropWithheldItems(st, index)
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
			id, ok := tombstoneID(body)
			if !ok {
				e, err := protocol.DecodeJSON(body)
				if err != nil {
					return fmt.Errorf("resume: event at seq %d: %w", seq, err)
				}
				id = e.ID
			}
			atSeq = id
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
		if _, ok := tombstoneID(body); ok {
			return nil // in no view
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

// Branches is what a module serving the branches of seed §11.3 gives the
// core for `?branch=` on GET /events and GET /state.
type Branches interface {
	// Select returns the membership test for a ?branch= list at now (an
	// empty list means the relay's preferred branch): keep nil keeps
	// every event, and for an event it leaves out names a branch the
	// event is in ("" if none); unknown lists the ids no branch has. A
	// malformed id is an error.
	Select(ids []string, now int64) (keep func(*protocol.Event) (bool, string), unknown []string, err error)
	// State returns the state digest of one branch's events at at.
	State(ctx context.Context, branch string, at int64) (state.Digest, error)
	// Views returns the derived state of one branch's events as of now,
	// for the view routes' ?branch=.
	Views(ctx context.Context, branch string, now int64) (*state.State, error)
	// Default returns the derived state of the relay's preferred branch as
	// of now, for the views without ?branch=: nil when the relay's own
	// state (every event) is that state.
	Default(ctx context.Context, now int64) (*state.State, error)
	// IDs lists the branches the relay can answer for as of now.
	IDs(now int64) []string
}

// ViewState returns the derived state the views answer from for branch
// (SPEC §17.5): "" is the relay's preferred branch (its own state while
// that holds every event), "all" the relay's own state of every event,
// another id that branch's state. A malformed id is a 400, an unknown one
// a 404; a failed rebuild from the log is an internal error.
func (s *Server) ViewState(ctx context.Context, branch string) (*state.State, error) {
	switch {
	case branch == "all" || branch == "" && s.branches == nil:
		return s.state, nil
	case s.branches == nil:
		return nil, protocol.Errorf(CodeBadParameter, "this relay serves no branches")
	case branch == "":
		st, err := s.branches.Default(ctx, s.now())
		if err != nil {
			return nil, err
		}
		if st == nil {
			return s.state, nil
		}
		return st, nil
	}
	return s.branches.Views(ctx, branch, s.now())
}

// StateDigest returns the state digest at at of branch (GET /state):
// "" and "all" are the relay's own state of every event, another id that
// branch's; a branch is a 400 on a relay that serves no branches.
func (s *Server) StateDigest(ctx context.Context, branch string, at int64) (state.Digest, error) {
	if branch == "" || branch == "all" {
		return s.state.Digest(at), nil
	}
	if s.branches == nil {
		return state.Digest{}, protocol.Errorf(CodeBadParameter, "this relay serves no branches")
	}
	return s.branches.State(ctx, branch, at)
}

// Views returns the derived state the views answer from by default: the
// relay's preferred branch's (SPEC §17.5), which is State() while the
// relay has one branch. Modules serving derived views read it; State()
// stays the state of every event (GET /state, the folds).
func (s *Server) Views() *state.State { return s.viewsState() }

// viewsState is ViewState(ctx, ""): the state of the preferred branch the
// views, moderation's hiding included, answer from by default. A failed
// rebuild from the log is logged and answered from every event.
func (s *Server) viewsState() *state.State {
	st, err := s.ViewState(context.Background(), "")
	if err != nil {
		s.cfg.Logger.Error("views: the preferred branch's state", "err", err)
		return s.state
	}
	return st
}

// NativeTasksIn answers task queries from branch's state (ViewState's
// rules and errors; "" is NativeTasks).
func (s *Server) NativeTasksIn(ctx context.Context, branch string) (TaskSource, error) {
	if branch == "" {
		return s.NativeTasks(), nil
	}
	st, err := s.ViewState(ctx, branch)
	return TaskSource{s: s, st: st}, err
}

// BranchIDs lists the branches this relay can answer for (its preferred
// one first), or nil when it serves no branches.
func (s *Server) BranchIDs() []string {
	if s.branches == nil {
		return nil
	}
	return s.branches.IDs(s.now())
}

// ServeBranches makes b judge ?branch= (one module; the last call wins).
// It must be called before the relay serves (from Mount).
func (s *Server) ServeBranches(b Branches) { s.branches = b }

// BranchFilter returns the membership test of a ?branch= list (empty: the
// relay's preferred branch; "all": every event) as of now, for a stream:
// keep is nil when every event is kept (no branches module, or no branch
// leaves anything out); unknown lists the ids no branch has. A list is an
// error on a relay that serves no branches, as on GET /events.
func (s *Server) BranchFilter(ids []string) (keep func(*protocol.Event) bool, unknown []string, err error) {
	if s.branches == nil {
		if len(ids) > 0 && !(len(ids) == 1 && ids[0] == "all") {
			return nil, nil, protocol.Errorf(CodeBadParameter, "this relay serves no branches")
		}
		return nil, nil, nil
	}
	sel, unknown, err := s.branches.Select(ids, s.now())
	if err != nil || sel == nil {
		return nil, unknown, err
	}
	return func(e *protocol.Event) bool { ok, _ := sel(e); return ok }, unknown, nil
}

// HeaderBranchUnknown names the requested branches no branch has.
const HeaderBranchUnknown = "X-ANP-Branch-Unknown"

// onBranches keeps the bodies in the requested branches; with
// placeholders (a thread query), an event of another branch becomes
// ["cross-branch", id, branch] (§11.3.6). Omitting branch means the
// preferred branch for every query (seed §11.3.3, "same as omitting"),
// lookups by ids and the raw include_revoked view included: mirrors and
// auditors ask branch=all.
func (s *Server) onBranches(c echo.Context, q Query, bodies [][]byte, placeholders bool) ([][]byte, error) {
	ids := q.Branches
	if s.branches == nil {
		if len(ids) > 0 && !(len(ids) == 1 && ids[0] == "all") {
			return nil, protocol.Errorf(CodeBadParameter, "this relay serves no branches")
		}
		return bodies, nil
	}
	keep, unknown, err := s.branches.Select(ids, s.now())
	if err != nil {
		return nil, err
	}
	if len(unknown) > 0 {
		c.Response().Header().Set(HeaderBranchUnknown, strings.Join(unknown, ","))
	}
	if keep == nil {
		return bodies, nil
	}
	out := bodies[:0:0]
	for _, b := range bodies {
		e, err := protocol.DecodeJSON(b)
		if err != nil {
			continue
		}
		if ok, other := keep(e); ok {
			out = append(out, b)
		} else if placeholders && other != "" {
			out = append(out, []byte(`["cross-branch","`+e.ID+`","`+other+`"]`))
		}
	}
	return out, nil
}

// exportBranches returns the membership test for GET /export?branch=
// (nil: the whole log, the default and branch=all).
func (s *Server) exportBranches(c echo.Context, list string) (func(*protocol.Event) (bool, string), error) {
	if list == "" {
		return nil, nil
	}
	if s.branches == nil {
		return nil, protocol.Errorf(CodeBadParameter, "this relay serves no branches")
	}
	keep, unknown, err := s.branches.Select(strings.Split(list, ","), s.now())
	if err != nil {
		return nil, err
	}
	if len(unknown) > 0 {
		c.Response().Header().Set(HeaderBranchUnknown, strings.Join(unknown, ","))
	}
	return keep, nil
}
