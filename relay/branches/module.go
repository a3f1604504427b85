package branches

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay"
	"github.com/anp2net/relay/relay/eventlog"
	"github.com/anp2net/relay/relay/httpx"
	"github.com/anp2net/relay/relay/state"
	"github.com/labstack/echo/v4"
)

// Options configure the module.
type Options struct {
	// Folds returns fresh copies of the relay's registered folds, to
	// rebuild the state at a checkpoint's as_of exactly as /state
	// digests it (cmd/anp2's folds). Nil: the built-in views only, so
	// state hashes match only a relay without digested modules.
	Folds func() []state.NamedFold
}

// Module is the branches capability: Fold is its pure part; the adapter
// serves GET /checkpoints, /checkpoints/draft, /rollbacks and /branches.
type Module struct {
	opts Options
	fold *Fold
	core *relay.Server

	mu sync.Mutex
	// rebuildMu serializes whole-log reads (past states, branch scans).
	rebuildMu sync.Mutex
	// prefix caches Snapshot per as_of (at most maxPrefixes); a committed event created at or
	// before an as_of drops its entry.
	prefix map[int64]Snapshot
	// seq is the last committed sequence; scans caches the results of
	// whole-log scans (branch counts, branch states) for one view and seq.
	seq   int64
	scans struct {
		view    *View
		seq     int64
		entries map[string]any
	}
}

var (
	_ relay.Folder   = (*Module)(nil)
	_ state.Digester = (*Fold)(nil)
	_ relay.Module   = (*Module)(nil)
	_ state.Fold     = (*Fold)(nil)
)

// NewModule returns the module with opts.
func NewModule(opts Options) *Module {
	return &Module{opts: opts, fold: NewFold(), prefix: map[int64]Snapshot{}}
}

// Name is "branches": its digest's key among /state's views.
func (m *Module) Name() string { return "branches" }

// Fold returns the module's fold.
func (m *Module) Fold() state.Fold { return m.fold }

// View returns the fold's view at now.
func (m *Module) View(now int64) View { return *m.fold.Current(now) }

// Mount registers the routes and the cache invalidation.
func (m *Module) Mount(core *relay.Server) error {
	m.core = core
	core.OnCommit(m.invalidate)
	core.Route(http.MethodGet, "/checkpoints", m.getCheckpoints)
	core.Route(http.MethodGet, "/checkpoints/draft", m.getDraft)
	core.Route(http.MethodGet, "/rollbacks", m.getRollbacks)
	core.Route(http.MethodGet, "/branches", m.getBranches)
	core.Route(http.MethodGet, "/bans", m.getBans)
	relay.RegisterStatus(CodeAgentBanned, http.StatusForbidden)
	core.OnPublish(m.refuseBanned)
	core.ServeBranches(m)
	return nil
}

// CodeAgentBanned refuses a publish by an agent under a valid ban (403).
const CodeAgentBanned = "agent_banned"

// refuseBanned is the publish gate refusing a banned agent (SPEC §13.4).
func (m *Module) refuseBanned(_ context.Context, e *protocol.Event, now time.Time) error {
	if ban := m.fold.BannedBy(e.AgentID, now.Unix()); ban != "" {
		return protocol.Errorf(CodeAgentBanned, "agent %s is banned by kind 14 event %s: its new events are refused (its past events stay in the log)", e.AgentID, ban)
	}
	return nil
}

// getBans is GET /bans: every kind 14, newest first, judged now.
func (m *Module) getBans(c echo.Context) error {
	if _, err := httpx.Params(c); err != nil {
		return err
	}
	bans := m.fold.Current(m.core.Now()).Bans
	out := make([]BanView, 0, len(bans))
	for i := len(bans) - 1; i >= 0; i-- {
		out = append(out, bans[i])
	}
	return c.JSON(http.StatusOK, out)
}

func (m *Module) invalidate(batch []eventlog.Committed) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, c := range batch {
		m.seq = max(m.seq, c.Seq)
		for asOf := range m.prefix {
			if c.Event.CreatedAt <= asOf {
				delete(m.prefix, asOf)
			}
		}
	}
}

// scanned returns compute's result for key under view v, computed once
// per (v, log length): a whole-log scan is not repeated until an event is
// committed or the view changes.
func (m *Module) scanned(v *View, key string, compute func() (any, error)) (any, error) {
	m.mu.Lock()
	seq := m.seq
	if c := &m.scans; c.view == v && c.seq == seq {
		if r, ok := c.entries[key]; ok {
			m.mu.Unlock()
			return r, nil
		}
	}
	m.mu.Unlock()
	m.rebuildMu.Lock() // one whole-log scan at a time
	r, err := compute()
	m.rebuildMu.Unlock()
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if c := &m.scans; m.seq == seq {
		if c.view != v || c.seq != seq {
			c.view, c.seq, c.entries = v, seq, map[string]any{}
		}
		c.entries[key] = r
	}
	return r, nil
}

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

// getCheckpoints is GET /checkpoints (SPEC §13.1): valid ones first, then
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

// getRollbacks is GET /rollbacks: every proposal, newest first.
func (m *Module) getRollbacks(c echo.Context) error {
	if _, err := httpx.Params(c); err != nil {
		return err
	}
	rbs := m.fold.Current(m.core.Now()).Rollbacks
	out := make([]RollbackView, 0, len(rbs))
	for i := len(rbs) - 1; i >= 0; i-- {
		out = append(out, rbs[i])
	}
	return c.JSON(http.StatusOK, out)
}

var _ relay.Branches = (*Module)(nil)

// Select implements relay.Branches for GET /events?branch= (SPEC §13.5).
func (m *Module) Select(ids []string, now int64) (func(*protocol.Event) (bool, string), []string, error) {
	if len(ids) == 0 {
		ids = []string{"main"}
	}
	all := false
	for _, id := range ids {
		if all = all || id == "all"; id != "all" && !ValidBranchID(id) {
			return nil, nil, protocol.Errorf(httpx.CodeBadParameter, "branch %q is not main, all, pre-rollback-<8 to 16 hex> or b-<8 to 16 hex>", id)
		}
	}
	if all {
		return nil, nil, nil
	}
	v := m.fold.Current(now)
	want := map[string]bool{}
	var unknown []string
	for _, id := range ids {
		if v.Known(id) {
			want[id] = true
		} else {
			unknown = append(unknown, id)
		}
	}
	if v.Simple() && want["main"] {
		return nil, unknown, nil
	}
	return func(e *protocol.Event) (bool, string) {
		members := v.Members(e)
		for _, b := range members {
			if want[b] {
				return true, ""
			}
		}
		if len(members) > 0 {
			return false, members[0]
		}
		return false, ""
	}, unknown, nil
}

// State implements relay.Branches for GET /state?branch=: the state.v1
// digest at at of the events of branch (SPEC §13.5), rebuilt from the log
// with fresh folds; an unknown branch is a 404 unknown_branch.
func (m *Module) State(ctx context.Context, branch string, at int64) (state.Digest, error) {
	if !ValidBranchID(branch) {
		return state.Digest{}, protocol.Errorf(httpx.CodeBadParameter, "branch %q is not a branch id", branch)
	}
	v := m.fold.Current(at)
	if !v.Known(branch) {
		return state.Digest{}, protocol.Errorf(relay.CodeNotFound, "unknown branch %q", branch)
	}
	opts := state.Options{Treasury: m.core.Config().Treasury}
	if m.opts.Folds != nil {
		opts.Folds = m.opts.Folds()
	}
	r, err := m.scanned(v, fmt.Sprintf("state %s %d", branch, at), func() (any, error) {
		return BranchState(v, branch, at, opts, LogEvents(ctx, m.core.Log()))
	})
	if err != nil {
		return state.Digest{}, err
	}
	return r.(state.Digest), nil
}

// Views implements relay.Branches for the view routes' ?branch=: the
// state of branch's events under the view at now, rebuilt from the log
// and kept until an event is committed or the view changes. An unknown
// branch is a 404 not_found.
func (m *Module) Views(ctx context.Context, branch string, now int64) (*state.State, error) {
	if !ValidBranchID(branch) {
		return nil, protocol.Errorf(httpx.CodeBadParameter, "branch %q is not a branch id", branch)
	}
	v := m.fold.Current(now)
	if !v.Known(branch) {
		return nil, protocol.Errorf(relay.CodeNotFound, "unknown branch %q", branch)
	}
	opts := state.Options{Treasury: m.core.Config().Treasury}
	if m.opts.Folds != nil {
		opts.Folds = m.opts.Folds()
	}
	r, err := m.scanned(v, "views "+branch, func() (any, error) {
		return BranchFold(v, branch, opts, LogEvents(ctx, m.core.Log()))
	})
	if err != nil {
		return nil, err
	}
	return r.(*state.State), nil
}

// BranchState folds the events of branch under v, given by each, into a
// fresh state built with opts and returns its digest at at.
func BranchState(v *View, branch string, at int64, opts state.Options, each func(func(*protocol.Event) error) error) (state.Digest, error) {
	st, err := BranchFold(v, branch, opts, each)
	if err != nil {
		return state.Digest{}, err
	}
	return st.Digest(at), nil
}

// BranchFold folds the events of branch under v, given by each, into a
// fresh state built with opts.
func BranchFold(v *View, branch string, opts state.Options, each func(func(*protocol.Event) error) error) (*state.State, error) {
	var evs []*protocol.Event
	err := each(func(e *protocol.Event) error {
		for _, b := range v.Members(e) {
			if b == branch && e.Kind != protocol.KindHealth {
				evs = append(evs, e)
				break
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return fold(evs, opts), nil
}

// fold returns a fresh state of evs (revocations preloaded, so no lookup).
func fold(evs []*protocol.Event, opts state.Options) *state.State {
	st := state.New(opts)
	for _, e := range evs {
		st.Preload(e)
	}
	for i, e := range evs {
		st.Add(int64(i+1), e, nil)
	}
	return st
}
