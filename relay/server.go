// Package relay is the ANP2 relay's core: the ingest pipeline (decode,
// check, store, fold, fan out), the query path, reader authentication and
// visibility, errors, limits and metrics, the derived state it keeps, and
// the Module interface through which every capability plugs in, the
// built-in views' routes (relay/views) as much as the directory, the
// stream or federation. It works on any eventlog.Log.
package relay

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/eventlog"
	"github.com/anp2net/relay/relay/httpx"
	"github.com/anp2net/relay/relay/reconcile"
	"github.com/anp2net/relay/relay/state"
	"github.com/anp2net/relay/tasks"
	"github.com/anp2net/relay/trust"
	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
)

// Config holds the relay's settings.
type Config struct {
	// PublicBaseURL anchors absolute links the relay hands out.
	PublicBaseURL string
	// PreferredBranch is the branch the relay serves by default and
	// announces (seed §11.3.5); "" means main.
	PreferredBranch string
	// TrustedProxies are CIDRs whose X-Forwarded-For is believed.
	TrustedProxies []string
	// IPv6Prefix is the prefix length by which IPv6 clients are keyed in
	// every per-address limit (0: 64; see httpx.AddrKey).
	IPv6Prefix int
	// RatePerAgent and RatePerIP cap events per RateWindow (0 disables).
	RatePerAgent int
	RatePerIP    int
	RateWindow   time.Duration
	// AgentRates, when set, keeps the per-agent limit's state where every
	// relay process over the same log sees it (a global limit).
	AgentRates SharedRates
	// RatePerAuth caps the D4 Authorization headers one address may have
	// checked per RateWindow (0 disables): each costs a signature check.
	RatePerAuth int
	// AuthReplayBytes bounds the memory that remembers accepted D4 headers
	// until they expire, so that each is used once (0: 16 MiB).
	AuthReplayBytes int64
	// Checker holds the shape limits and PoW policy.
	Checker protocol.Checker
	// Now is the relay clock (injectable for tests).
	Now func() time.Time
	// Logger receives structured logs.
	Logger *slog.Logger
	// MaxBody caps request bodies.
	MaxBody int64
	// BodyTimeout bounds the reading of every request body, on every
	// route, from the end of its headers (0: 30 s, <0: none); a body still
	// incomplete then is a 408 body_timeout and the connection is closed.
	BodyTimeout time.Duration
	// IdleTimeout closes a keep-alive connection that sends no new request
	// for this long (0: 60 s, <0: never); Serve applies it.
	IdleTimeout time.Duration
	// Treasury is the credit treasury agent ("" for the public network's).
	Treasury string
	// RelayKey is the relay's own Ed25519 identity: it signs the kind 10
	// announcement and authenticates the relay to its peers. nil: none.
	RelayKey ed25519.PrivateKey
	// MaxSubscribers caps concurrent GET /stream subscribers (0: 4096).
	MaxSubscribers int
	// MaxStreamsPerIP caps one client address's concurrent streams, so
	// one client cannot hold every subscriber slot (0: 64, <0: no cap).
	MaxStreamsPerIP int
	// OnRebuild, when set, receives progress (seq, through) while New folds
	// the stored log into the derived views.
	OnRebuild func(done, total int64)
	// Modules are the capability modules this relay runs (see Module);
	// cmd/anp2 lists them in one place.
	Modules []Module
	// StateDir, when set, is the directory of saved derived state: New
	// resumes from it and SaveState writes it (SPEC §2.2).
	StateDir string
	// HonorRedactions are the relay keys (agent ids) besides RelayKey's
	// whose kind 25 redactions this relay applies (SPEC §21.8).
	HonorRedactions []string
}

// DefaultConfig returns the seed's limits: 60 events per agent and 300 per IP
// per 60 s, 1 MiB bodies, the default checker, the wall clock.
func DefaultConfig() Config {
	return Config{
		RatePerAgent: 60, RatePerIP: 300, RatePerAuth: 1200, RateWindow: time.Minute,
		Checker: protocol.DefaultChecker(), Now: time.Now, Logger: slog.Default(), MaxBody: 1 << 20,
	}
}

// Server is a running relay: the Echo instance and what it serves.
type Server struct {
	cfg     Config
	store   eventlog.Log
	echo    *echo.Echo
	metrics *metrics
	byAgent *Limiter
	byIP    *Limiter
	byAuth  *Limiter
	// seen holds the D4 headers accepted and not yet expired (single use).
	seen *seenIDs
	// bodies decodes gzip- and zstd-encoded request bodies (readBodies).
	bodies *bodyDecoder
	// baseHost and basePath are the public base URL's host:port and path
	// that D4 u tags must name ("" host: the connection's local address).
	baseHost, basePath string
	started            time.Time
	// state holds the derived views; onCommit are further commit hooks
	// (event stream) run after the views are updated.
	state    *state.State
	onCommit []func([]eventlog.Committed)
	// branches judges ?branch= (ServeBranches); nil: the parameter is a 400.
	branches Branches
	// ephemeral receive the verified events of kinds never stored (kind 11
	// beats, D11), by kind; agentInfo add module data to agent rows.
	ephemeral map[int64][]func(e *protocol.Event, receivedAt int64)
	agentInfo []func(row map[string]any, agentID string, now int64)
	// metricHooks append module figures to GET /metrics (AddMetrics).
	metricHooks []func(w io.Writer)
	// gates are further publish rules from modules (OnPublish).
	gates []PublishGate
	// index holds every stored event's (created_at, id), revoked ones
	// included (set reconciliation, duplicate checks).
	index *reconcile.Index
	// streamFilters are modules' extra stream parameters (AddStreamFilter).
	streamFilters map[string]func(string) (func(*protocol.Event) bool, error)
	// readerRules are modules' per-reader visibility rules (AddReaderRule).
	readerRules []ReaderRule
	// publishInfo and onboardingInfo add modules' fields to answers
	// (AddPublishInfo, AddOnboardingInfo).
	publishInfo    []func(e *protocol.Event) map[string]any
	onboardingInfo []func(row map[string]any, agentID, reader string)
	// modHooks receive every published moderation snapshot (OnModeration).
	modHooks []func(*trust.ModSnapshot)
	// dryChecks report, without side effects, what gates would refuse in
	// a dry run (OnDryRun).
	dryChecks []func(e *protocol.Event, now int64) error
	// powBypass is the standing-based PoW bypass (SetPoWBypass); nil: off.
	powBypass PoWBypass
	// warners add modules' warnings to publish answers (OnPublishWarn).
	warners []func(e *protocol.Event, now int64) []protocol.Warning
	// stateDir holds saved derived state (Config.StateDir); nil: none.
	stateDir *state.Dir
}

// New builds a relay over store: it folds the stored log into the derived
// views and installs the store's commit hook. Nothing may append to store
// while New runs. It does not listen; see Serve.
func New(cfg Config, store eventlog.Log) (*Server, error) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	s := &Server{
		cfg: cfg, store: store, echo: echo.New(), metrics: newMetrics(),
		byAgent: NewLimiter(cfg.RatePerAgent, cfg.RateWindow),
		byIP:    NewLimiter(cfg.RatePerIP, cfg.RateWindow),
		byAuth:  NewLimiter(cfg.RatePerAuth, cfg.RateWindow),
		seen:    newSeenIDs(cfg.AuthReplayBytes),
		started: cfg.Now(),
	}
	s.baseHost, s.basePath = baseHostOf(cfg.PublicBaseURL)
	bodies, err := newBodyDecoder(cfg.MaxBody)
	if err != nil {
		return nil, err
	}
	s.bodies = bodies
	s.byAgent.shared = cfg.AgentRates
	s.index = reconcile.NewIndex(nil)
	if cfg.StateDir != "" {
		for _, m := range cfg.Modules {
			if o, ok := m.(StateOpener); ok {
				if err := o.OpenState(cfg.StateDir); err != nil {
					return nil, fmt.Errorf("module %s: %w", m.Name(), err)
				}
			}
		}
	}
	opts := state.Options{Treasury: cfg.Treasury, Moderation: trust.ModerationOptions{OnPublish: s.publishModeration},
		Folds: Folds(cfg.Modules), Redactors: Redactors(cfg)}
	st, err := s.buildState(context.Background(), opts)
	if err != nil {
		return nil, err
	}
	s.state = st
	store.SetHook(s.apply)
	e := s.echo
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = errorHandler(cfg.Logger, s.metrics)
	extractor, err := ipExtractor(cfg.TrustedProxies)
	if err != nil {
		return nil, err
	}
	e.IPExtractor = extractor
	mws := []echo.MiddlewareFunc{middleware.Recover(), cors(), compress()}
	if cfg.MaxBody > 0 {
		mws = append(mws, middleware.BodyLimit(fmt.Sprintf("%dB", cfg.MaxBody)))
	}
	mws = append(mws, s.readBodies())
	e.Use(chain(mws...)) // the only middleware given to Use: chain ignores what follows it
	s.routes()
	for _, m := range cfg.Modules {
		if err := m.Mount(s); err != nil {
			return nil, fmt.Errorf("module %s: %w", m.Name(), err)
		}
	}
	return s, nil
}

func ipExtractor(cidrs []string) (echo.IPExtractor, error) {
	if len(cidrs) == 0 {
		return echo.ExtractIPDirect(), nil
	}
	opts := []echo.TrustOption{echo.TrustLoopback(false), echo.TrustLinkLocal(false), echo.TrustPrivateNet(false)}
	for _, c := range cidrs {
		_, n, err := net.ParseCIDR(strings.TrimSpace(c))
		if err != nil {
			return nil, fmt.Errorf("trusted proxy %q: %w", c, err)
		}
		opts = append(opts, echo.TrustIPRange(n))
	}
	return echo.ExtractIPFromXFFHeader(opts...), nil
}

// route registers h at path and under /api (D1).
func (s *Server) route(method, path string, h echo.HandlerFunc) {
	s.echo.Add(method, path, h)
	s.echo.Add(method, "/api"+path, h)
}

func (s *Server) routes() {
	s.route(http.MethodPost, "/events", s.postEvent)
	s.route(http.MethodPost, "/events/dry-run", s.dryRun)
	s.route(http.MethodPost, "/events/batch", s.postBatch)
	s.route(http.MethodGet, "/events", s.getEvents)
	s.route(http.MethodGet, "/events/:id", s.getEvent)
	s.route(http.MethodGet, "/events/:id/raw", s.getRaw)
	s.route(http.MethodGet, "/history/:agent_id", s.getHistory)
	s.route(http.MethodGet, "/export", s.export)
	s.route(http.MethodGet, "/health", s.health)
	s.route(http.MethodGet, "/metrics", s.getMetrics)
}

// Route registers h for method at path and under /api (D1), behind the
// core's middleware (CORS, compression, body limit, error mapping).
func (s *Server) Route(method, path string, h echo.HandlerFunc) { s.route(method, path, h) }

// Config returns the relay's settings (defaults filled in).
func (s *Server) Config() Config { return s.cfg }

// Log returns the event log.
func (s *Server) Log() eventlog.Log { return s.store }

// State returns the composed derived state.
func (s *Server) State() *state.State { return s.state }

// Now returns the relay clock in unix seconds.
func (s *Server) Now() int64 { return s.now() }

func (s *Server) now() int64 { return s.cfg.Now().Unix() }

// Reader returns the agent a request is authenticated as (D4), "" for an
// anonymous one, or a 401 (see reader).
func (s *Server) Reader(c echo.Context) (string, error) { return s.reader(c) }

// ReaderEvent is Reader, returning the verified D4 Authorization event
// itself (nil for an anonymous request), for a route that asks more of it
// (the proof of work of a trigger registration, SPEC §16).
func (s *Server) ReaderEvent(c echo.Context) (*protocol.Event, error) { return s.authEvent(c) }

// Weights returns the trust weight function at now (the published trust
// snapshot of Views), as the task views use it.
func (s *Server) Weights(now int64) tasks.WeightFunc { return s.weights(now) }

// BaseURL is the configured public base URL, or the one the request came
// in on.
func (s *Server) BaseURL(c echo.Context) string {
	if s.cfg.PublicBaseURL != "" {
		return strings.TrimRight(s.cfg.PublicBaseURL, "/")
	}
	return c.Scheme() + "://" + c.Request().Host
}

// NativeTasks answers task queries (GET /task, A2A's tasks/get) at the
// relay clock from the preferred branch's state (SPEC §17.5).
func (s *Server) NativeTasks() TaskSource { return TaskSource{s: s} }

// ClientKey is the key under which per-address limits count the client of
// c: its address (c.RealIP, so X-Forwarded-For from a trusted proxy),
// with IPv6 addresses keyed by their Config.IPv6Prefix network.
func (s *Server) ClientKey(c echo.Context) string { return s.addrKey(c.RealIP()) }

// addrKey is httpx.AddrKey at the configured IPv6 prefix.
func (s *Server) addrKey(ip string) string { return httpx.AddrKey(ip, s.cfg.IPv6Prefix) }

// Handler returns the relay's HTTP handler.
func (s *Server) Handler() http.Handler { return s.echo }

// Serve answers on ln until ctx ends, then shuts down gracefully.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{Handler: s.echo, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: s.idleTimeout()}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	// Publish time-driven moderation changes (debounced transitions, decay)
	// even when nobody reads.
	// Serve returns only once the background work it started has ended
	// (or 10 s after it was told to), so whatever closes the modules and
	// the log afterwards finds nobody still writing.
	rctx, stop := context.WithCancel(ctx)
	var running sync.WaitGroup
	defer func() {
		stop()
		done := make(chan struct{})
		go func() { running.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			s.cfg.Logger.Warn("background work still running 10 s after the relay stopped")
		}
	}()
	running.Go(func() { s.state.Moderation.Run(rctx, func() int64 { return s.cfg.Now().Unix() }, 250*time.Millisecond) })
	for _, m := range s.cfg.Modules {
		if r, ok := m.(Runner); ok {
			running.Go(func() { r.Run(rctx) })
		}
	}
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := srv.Shutdown(sctx)
	if e := <-errc; e != nil && !errors.Is(e, http.ErrServerClosed) {
		err = errors.Join(err, e)
	}
	return err
}

// defaultIdleTimeout is Config.IdleTimeout's default.
const defaultIdleTimeout = 60 * time.Second

// idleTimeout is Config.IdleTimeout with its default (a negative value is
// http.Server's "never").
func (s *Server) idleTimeout() time.Duration {
	switch d := s.cfg.IdleTimeout; {
	case d == 0:
		return defaultIdleTimeout
	case d < 0:
		return 0
	default:
		return d
	}
}

// Ingest applies every publish rule of POST /events to e (received as raw,
// of rawType, from address ip) and appends it; it answers only after the
// event is committed. Modules that take events from the network for
// anyone (a gossip push from an unchosen peer, a WebSocket EVENT) use it,
// so an unauthenticated sender gets exactly a publisher's rules.
func (s *Server) Ingest(ctx context.Context, e *protocol.Event, raw []byte, rawType, ip string) (*PublishAnswer, error) {
	withdraw := s.announce()
	defer withdraw()
	return s.ingest(ctx, e, raw, rawType, ip, false, withdraw)
}

// Authenticate returns the D4 Authorization event of a request after
// charging the address and verifying its signature; nil without a header,
// or a 401 for a bad one.
func (s *Server) Authenticate(c echo.Context) (*protocol.Event, error) { return s.authEvent(c) }

// AuthenticateEvent checks raw, a D4 event JSON sent in-band (a WebSocket
// AUTH frame) rather than in a header, exactly as if it were the
// Authorization header of r (the upgrade request: its method, URL and
// empty body), charging r's address as Authenticate does. It returns the
// verified event, or a 401 (or 429) error.
func (s *Server) AuthenticateEvent(r *http.Request, raw []byte) (*protocol.Event, error) {
	r2 := r.Clone(r.Context())
	r2.Body = http.NoBody
	r2.Header.Set(echo.HeaderAuthorization, "ANP2 "+base64.StdEncoding.EncodeToString(raw))
	return s.authEvent(s.echo.NewContext(r2, nil))
}

// CountRejected counts a rejection under its code in /metrics.
func (s *Server) CountRejected(err error) { s.metrics.rejected(protocol.CodeOf(err)) }

// CountStored counts appended events in /metrics: new ones as accepted,
// the others as duplicates.
func (s *Server) CountStored(results []eventlog.Result) {
	for _, r := range results {
		if r.Duplicate {
			s.metrics.duplicates.Add(1)
		} else {
			s.metrics.accepted.Add(1)
		}
	}
}

// Index returns the reconciliation index of every stored event, revoked
// ones included: set reconciliation and duplicate checks read it.
func (s *Server) Index() *reconcile.Index { return s.index }
