package relay

import (
	"context"
	"io"
	"time"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/eventlog"
	"github.com/anp2net/relay/relay/state"
	"github.com/anp2net/relay/trust"
)

// A Module is one capability of the relay, in its own package with two
// parts: a pure part (a fold over the log, no HTTP, no SQL) and an
// adapter (its routes, its background loops). It plugs into the core
// through this interface only; the modules a relay runs are listed in one
// place (cmd/anp2/modules.go) and handed to New in Config.Modules, so
// adding a capability is its package plus one line there.
//
// The core calls, in order: Fold (for a Folder) while building the
// composed state, before the stored log is folded; Mount once the core is
// built; Run (for a Runner) while Serve serves.
type Module interface {
	// Name names the module: its key among GET /state's views when its
	// fold is digested, and its name in logs.
	Name() string
	// Mount registers the module's routes and hooks on the core. An error
	// stops New.
	Mount(core *Server) error
}

// A Folder is a Module with a fold over the stored events. The composed
// state feeds it as it feeds the built-in views (every stored event its
// author has not revoked; a Remove when a revocation comes later), so the
// relay, a rebuild at start and `anp2 replay` derive the same state from
// the same events. A fold that is a state.Digester is part of /state.
type Folder interface {
	Module
	Fold() state.Fold
}

// A StateOpener is a Folder whose fold keeps part of its state in files
// of its own beside the saved state (SPEC §2.2). New calls OpenState with
// the state directory (Config.StateDir) before the fold sees any event or
// saved state, when there is one; dir "" asks for files of this process
// only, removed when the module closes. An error stops New.
type StateOpener interface {
	Folder
	OpenState(dir string) error
}

// A Runner is a Module with background work while the relay serves (a
// mirror loop, a refresher). Run returns when ctx ends.
type Runner interface {
	Module
	Run(ctx context.Context)
}

// Folds returns the named folds of the Folders among mods, for
// state.Options.Folds: the relay and the replayer build their state from
// the same list.
func Folds(mods []Module) []state.NamedFold {
	var out []state.NamedFold
	for _, m := range mods {
		if f, ok := m.(Folder); ok {
			out = append(out, state.NamedFold{Name: m.Name(), Fold: f.Fold()})
		}
	}
	return out
}

// OnCommit adds a hook that receives every committed batch, after the
// derived state has folded it and before the publishers are answered. It
// must be called before the relay serves (from Mount).
func (s *Server) OnCommit(hook func([]eventlog.Committed)) { s.onCommit = append(s.onCommit, hook) }

// OnModeration adds a hook that receives every published moderation
// snapshot (its Changed lists the events whose visibility changed). It
// must be called before the relay serves (from Mount).
func (s *Server) OnModeration(hook func(*trust.ModSnapshot)) { s.modHooks = append(s.modHooks, hook) }

func (s *Server) publishModeration(snap *trust.ModSnapshot) {
	for _, h := range s.modHooks {
		h(snap)
	}
}

// OnEphemeral adds a hook that receives every verified, rate-charged
// event of kind (one never stored, such as kind 11 beats, D11) with its
// receipt time. It must be called before the relay serves (from Mount).
func (s *Server) OnEphemeral(kind int64, hook func(e *protocol.Event, receivedAt int64)) {
	if s.ephemeral == nil {
		s.ephemeral = map[int64][]func(*protocol.Event, int64){}
	}
	s.ephemeral[kind] = append(s.ephemeral[kind], hook)
}

// A PublishGate is a module's rule on the direct publish path: it returns
// an error to refuse e (an *httpx.RetryError for a 429 with Retry-After).
type PublishGate func(ctx context.Context, e *protocol.Event, now time.Time) error

// OnPublish adds a gate that every direct publish (POST /events, Ingest)
// passes after the agent is charged and before the event is stored.
// Mirrored events and imports never pass gates. It must be called before
// the relay serves (from Mount).
func (s *Server) OnPublish(gate PublishGate) { s.gates = append(s.gates, gate) }

// OnDryRun adds a check that POST /events/dry-run runs after the log
// rules: a non-nil error is listed among the violations. Unlike a gate it
// must have no side effect (charge nothing). It must be called before the
// relay serves (from Mount).
func (s *Server) OnDryRun(check func(e *protocol.Event, now int64) error) {
	s.dryChecks = append(s.dryChecks, check)
}

// AddAgentInfo adds a hook that adds a module's fields to each agent row
// the directory serves (GET /agents, GET /agents/{id}). It must be called
// before the relay serves (from Mount).
func (s *Server) AddAgentInfo(hook func(row map[string]any, agentID string, now int64)) {
	s.agentInfo = append(s.agentInfo, hook)
}

// AgentInfo adds what the modules know of agent id to a directory row (see
// AddAgentInfo).
func (s *Server) AgentInfo(row map[string]any, id string) {
	now := s.now()
	for _, h := range s.agentInfo {
		h(row, id, now)
	}
}

// AddMetrics adds a hook that appends a module's figures, in the
// Prometheus text format, to GET /metrics. Call it from Mount.
func (s *Server) AddMetrics(hook func(w io.Writer)) { s.metricHooks = append(s.metricHooks, hook) }

// AddPublishInfo registers a hook that may add fields to the answer of a
// direct publish (POST /events) that stored e anew: it returns the fields
// (nil for none). The answer's own fields (id, accepted, duplicate,
// stored) cannot be replaced. It must be called before the relay serves
// (from Mount).
func (s *Server) AddPublishInfo(hook func(e *protocol.Event) map[string]any) {
	s.publishInfo = append(s.publishInfo, hook)
}

// AddOnboardingInfo registers a hook that adds a module's fields to the
// answer of GET /onboarding/{agent_id} for reader ("" for anonymous). It
// must be called before the relay serves (from Mount).
func (s *Server) AddOnboardingInfo(hook func(row map[string]any, agentID, reader string)) {
	s.onboardingInfo = append(s.onboardingInfo, hook)
}

// OnboardingInfo adds what the modules give an agent's onboarding answer
// for reader (see AddOnboardingInfo); the directory calls it.
func (s *Server) OnboardingInfo(row map[string]any, agentID, reader string) {
	for _, h := range s.onboardingInfo {
		h(row, agentID, reader)
	}
}

// OnPublishWarn registers a module's warnings for an accepted publish: the
// departures from the seed's shape it accepts (D17), listed in the answer's
// "warnings" (POST /events, each result of POST /events/batch, and dry
// runs). It must be called before the relay serves (from Mount).
func (s *Server) OnPublishWarn(w func(e *protocol.Event, now int64) []protocol.Warning) {
	s.warners = append(s.warners, w)
}

// A ReaderRule is a module's rule on who may read whose events (seed §12.8
// discoverability). It returns nil when it restricts nothing right now —
// the common case, which then costs one call per request — else a
// predicate: may reader ("" for anonymous) see the events by author?
type ReaderRule func() func(reader, author string) bool

// AddReaderRule registers a module's ReaderRule. Every read path consults
// it where it applies §7.1 visibility (GET /events, /events/{id}, /raw,
// /history, an anonymous /export, /stream and the WebSocket through Sees).
// It must be called before the relay serves (from Mount).
func (s *Server) AddReaderRule(r ReaderRule) { s.readerRules = append(s.readerRules, r) }

// AddStreamFilter registers a module's extra GET /stream (and WebSocket
// REQ) parameter: make turns the parameter's value into an event
// predicate, or a 400. It must be called before the relay serves (from
// Mount).
func (s *Server) AddStreamFilter(name string, build func(value string) (func(*protocol.Event) bool, error)) {
	if s.streamFilters == nil {
		s.streamFilters = map[string]func(string) (func(*protocol.Event) bool, error){}
	}
	s.streamFilters[name] = build
}

// StreamFilter returns the predicate a registered extra stream parameter
// gives for value; ok is false when no module registered name.
func (s *Server) StreamFilter(name, value string) (keep func(*protocol.Event) bool, ok bool, err error) {
	build, ok := s.streamFilters[name]
	if !ok {
		return nil, false, nil
	}
	keep, err = build(value)
	return keep, true, err
}

// StreamFilterNames lists the registered extra stream parameters.
func (s *Server) StreamFilterNames() []string {
	out := make([]string, 0, len(s.streamFilters))
	for n := range s.streamFilters {
		out = append(out, n)
	}
	return out
}
