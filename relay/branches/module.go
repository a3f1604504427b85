package branches

import (
	"context"
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
	// Sovereign, when set, returns the rollbacks a valid sovereign act
	// (kind 30 rollback_to, seed §15, the governance module) ordered, as
	// of at: each activates at its act's time like a kind 13 proposal that
	// reached its threshold.
	Sovereign func(at int64) []SovereignRollback
	// RevokedRelay, when set, reports whether governance revoked a relay
	// key or URL at at: its announcements leave the relay shares of
	// GET /branches.
	RevokedRelay func(keyOrURL string, at int64) bool
	// LiveRebuildEvery is the least time between two rebuilds of the
	// preferred branch's state from the log (0: DefaultLiveRebuildEvery).
	LiveRebuildEvery time.Duration
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
	// live is the preferred branch's state, kept current (live.go).
	live live
}

var (
	_ relay.Folder   = (*Module)(nil)
	_ state.Digester = (*Fold)(nil)
	_ relay.Module   = (*Module)(nil)
	_ relay.Runner   = (*Module)(nil)
	_ state.Fold     = (*Fold)(nil)
)

// NewModule returns the module with opts.
func NewModule(opts Options) *Module {
	f := NewFold()
	f.sovereign, f.revokedRelay = opts.Sovereign, opts.RevokedRelay
	m := &Module{opts: opts, fold: f, prefix: map[int64]Snapshot{}}
	m.live.wake = make(chan struct{}, 1)
	return m
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
	core.OnCommit(m.onCommitLive)
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

// refuseBanned is the publish gate refusing a banned agent (SPEC §17.4).
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
