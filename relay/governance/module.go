// Package governance derives the network's governance from the log (seed
// §11.6, §14, §15): sovereign acts and the emergency freeze (kinds 21 and
// 30), protocol improvement proposals (kind 20), and the publish gate a
// freeze, a shutdown or a ban imposes. Its fold depends only on the set of
// events and the operator's Options, so a mirror and `anp2 replay` derive
// the same state (GET /state's "governance" view).
package governance

import (
	"context"
	"net/http"
	"time"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay"
	"github.com/anp2net/relay/relay/httpx"
	"github.com/anp2net/relay/relay/state"
	"github.com/labstack/echo/v4"
)

// Error codes of the publish gate.
const (
	CodeFrozen   = "network_frozen"
	CodeShutdown = "protocol_shutdown"
	CodeBanned   = "agent_banned"
	CodeRevoked  = "relay_revoked"
)

// Retry-After of a gate refusal, in seconds.
const (
	retrySovereignFreeze = 300
	retryShutdown        = 3600
)

// Module is governance as a relay capability module.
type Module struct {
	fold  *Fold
	core  *relay.Server
	cache compiledCache
}

var (
	_ relay.Module = (*Module)(nil)
	_ relay.Folder = (*Module)(nil)
)

// NewModule returns the governance module under opts, or an error for
// malformed keys or thresholds.
func NewModule(opts Options) (*Module, error) {
	o, err := opts.normalize()
	if err != nil {
		return nil, err
	}
	return &Module{fold: NewFold(o)}, nil
}

// Name is "governance".
func (m *Module) Name() string { return "governance" }

// Fold returns the governance fold.
func (m *Module) Fold() state.Fold { return m.fold }

// Governance returns the fold (for other modules and tests).
func (m *Module) Governance() *Fold { return m.fold }

// Mount registers the routes and the publish gate.
func (m *Module) Mount(core *relay.Server) error {
	m.core = core
	relay.RegisterStatus(CodeFrozen, http.StatusServiceUnavailable)
	relay.RegisterStatus(CodeShutdown, http.StatusServiceUnavailable)
	relay.RegisterStatus(CodeBanned, http.StatusForbidden)
	relay.RegisterStatus(CodeRevoked, http.StatusForbidden)
	core.OnPublish(func(_ context.Context, e *protocol.Event, now time.Time) error { return m.gate(e, now.Unix()) })
	core.OnDryRun(m.gate)
	core.OnPublishWarn(m.schemaWarnings)
	core.Route(http.MethodGet, "/sovereign_log", m.getLog)
	core.Route(http.MethodGet, "/sovereign/state", m.getSovereign)
	core.Route(http.MethodGet, "/phase", m.getPhase)
	m.mountPIPs(core)
	m.mountSchemas(core)
	return nil
}

// gate refuses publishes while the network is shut down or frozen, and
// those of banned agents; a kind 21, 30 or 31 signed under the rule in
// force always passes, so the keys can unfreeze, renew or act. Then it checks
// the content of a structured-intent kind (1000–1999) against the schemas
// its s tags name (other kinds get a warning instead, schemaWarnings).
func (m *Module) gate(e *protocol.Event, now int64) error {
	s := m.fold.Sovereign(now)
	revoked := e.Kind == protocol.KindRelayAnnounce && s.RelayRevoked(e)
	if !s.Shutdown && !s.Frozen && !s.Banned(e.AgentID) && !revoked {
		if Structured(e.Kind) {
			return m.checkSchemas(e, now)
		}
		return nil
	}
	// Only now verify an act's cosignatures: unrestricted publishes never
	// pay for it.
	if (e.Kind == KindSovereignAct || e.Kind == KindSeedDestruct || e.Kind == KindDeadMan) && m.fold.Authorized(e, now) {
		return nil
	}
	switch {
	case s.Shutdown:
		return &httpx.RetryError{Err: protocol.Errorf(CodeShutdown, "the protocol was shut down by sovereign act %s: the relay is read-only", s.ShutdownAct), After: retryShutdown, Status: http.StatusServiceUnavailable}
	case s.Frozen:
		after := retrySovereignFreeze
		if s.FrozenUntil != 0 {
			after = int(min(max(s.FrozenUntil-now, 1), retrySovereignFreeze))
		}
		return &httpx.RetryError{Err: protocol.Errorf(CodeFrozen, "the network is frozen by %s act %s: reads work, publishing is halted", s.FrozenBy, s.FreezeAct), After: after, Status: http.StatusServiceUnavailable}
	case revoked:
		return protocol.Errorf(CodeRevoked, "relay %s is revoked by a sovereign act: its announcements are refused", e.AgentID)
	}
	return protocol.Errorf(CodeBanned, "agent %s is banned by a sovereign act", e.AgentID)
}

// logEntry is one row of GET /sovereign_log: the judgement and the event.
type logEntry struct {
	*Act
	Event *protocol.Event `json:"event"`
}

// getLog is GET /sovereign_log: every kind 21, 30 and 31 act, valid or
// not, oldest first.
func (m *Module) getLog(c echo.Context) error {
	if _, err := httpx.Params(c); err != nil {
		return err
	}
	acts := m.fold.Log()
	out := make([]logEntry, 0, len(acts))
	for _, a := range acts {
		out = append(out, logEntry{a, a.event})
	}
	return c.JSON(http.StatusOK, out)
}

// getSovereign is GET /sovereign/state[?at=].
func (m *Module) getSovereign(c echo.Context) error {
	v, err := httpx.Params(c, "at")
	if err != nil {
		return err
	}
	at, err := httpx.IntParam(v, "at", m.core.Now(), 0, 1<<53-1)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, m.fold.Sovereign(at))
}

// phaseAnswer is GET /phase.
type phaseAnswer struct {
	// Phase is the governance phase as configured and derived (§14.7):
	// 1 seed keys only, 2 sovereign keys configured, 3 seed keys destroyed.
	Phase              int      `json:"phase"`
	SeedKeysActive     bool     `json:"seed_keys_active"`
	SeedKeys           []string `json:"seed_keys"`
	SeedThreshold      int      `json:"seed_threshold"`
	SovereignKeys      []string `json:"sovereign_keys"`
	SovereignThreshold int      `json:"sovereign_threshold"`
	SeedFreezeTTL      int64    `json:"seed_freeze_ttl_s"`
	DeadManAfter       int64    `json:"dead_man_after_s"`
	StewardThreshold   int      `json:"steward_threshold"`
	AuthorityVia       string   `json:"authority_transferred_by,omitempty"`
	Frozen             bool     `json:"frozen"`
	Shutdown           bool     `json:"shutdown"`
	Stewards           []string `json:"stewards"`
	Now                int64    `json:"now"`
}

func (m *Module) getPhase(c echo.Context) error {
	if _, err := httpx.Params(c); err != nil {
		return err
	}
	now := m.core.Now()
	s := m.fold.Sovereign(now)
	o := m.fold.opts
	a := phaseAnswer{Phase: 1, SeedKeysActive: s.SeedKeysActive, SeedKeys: httpx.NonNil(o.SeedKeys), SeedThreshold: o.SeedThreshold,
		SovereignKeys: httpx.NonNil(s.Regime.SovKeys), SovereignThreshold: s.Regime.SovThreshold, SeedFreezeTTL: o.SeedFreezeTTL,
		DeadManAfter: o.DeadManAfter, StewardThreshold: s.Regime.StewardThreshold, AuthorityVia: s.Regime.By,
		Frozen: s.Frozen, Shutdown: s.Shutdown, Stewards: s.Stewards, Now: now}
	switch {
	case s.SeedKeysDestroyedAt != 0:
		a.Phase = 3
	case len(s.Regime.SovKeys) > 0:
		a.Phase = 2
	}
	return c.JSON(http.StatusOK, a)
}
