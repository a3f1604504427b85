// Package federation is the relay's federation capability: the signed
// kind 10 relay announcement, POST /gossip (a chosen peer's pushes taken
// as mirrored history, anyone else's with POST /events' rules), POST /sync
// (negentropy set reconciliation over the core's index), GET /relays, and
// mirroring peers — reconcile, fetch, push, follow their stream, or page
// through GET /events when a peer is another implementation — with the
// per-peer limits. It holds no fold: what it stores goes through the
// core's log and is folded like any event.
package federation

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay"
)

// Options configure federation.
type Options struct {
	// Peers are relay URLs mirrored continuously while serving.
	Peers []string
	// PeerKeys are relay agent_ids whose authenticated POST /gossip is
	// taken as a peer's (mirrored-event rules); the relay keys of Peers are
	// learned as well. Anyone else's gossip gets POST /events' rules.
	PeerKeys []string
	// MirrorInterval is the pause between reconciliations with a peer
	// when its stream is not followed (0: 5 s).
	MirrorInterval time.Duration
	// PeerRate caps events per RateWindow that one peer may push through
	// POST /gossip (0 disables).
	PeerRate int
	// SyncRate caps POST /sync messages per RateWindow from one address; a
	// filtered message, which scans the log, counts SyncFilterCost (0
	// disables).
	SyncRate int
	// RateWindow is the window of both limits (0: a minute).
	RateWindow time.Duration
	// RevokedRelay, when set, reports whether a relay key (or base URL)
	// has been revoked at now (governance's revoke_relay, seed §15): such
	// a relay's pushes are never a peer's (they get POST /events' rules)
	// and it is not mirrored.
	RevokedRelay func(keyOrURL string, now int64) bool
	// Topics are the topics or capabilities this relay specialises in
	// (seed §12.9.2 topic relay), announced in its kind 10: at most
	// MaxTopics, each 1 to MaxTopicLen bytes of printable ASCII.
	Topics []string
	// TlogCheckpoint, when set, reports the latest signed checkpoint of the
	// relay's transparency log (SPEC §21): its size and base64 root. The
	// kind 10 carries it as a ["tlog", size, root] tag when published.
	TlogCheckpoint func() (size int64, root string, ok bool)
	// TlogAlarms, when set, reports how many transparency-log alarms this
	// relay's witness holds against the relay at a URL (SPEC §21.5);
	// GET /relays shows them.
	TlogAlarms func(url string) int
}

// DefaultOptions are the serve command's defaults.
func DefaultOptions() Options {
	return Options{MirrorInterval: 5 * time.Second, PeerRate: 120000, SyncRate: 1200, RateWindow: time.Minute}
}

// Module is federation as a relay capability module (see the package doc).
type Module struct {
	opts Options
	core *relay.Server
	cfg  relay.Config // the core's settings: relay key, clock, logger, checker

	byPeer *relay.Limiter
	bySync *relay.Limiter
	peers  peers
	paged  pagedPeers // peers mirrored by pages of GET /events
	// peerKeys holds the relay keys whose gossip is a peer's (see
	// Options.PeerKeys): agent_id → where it was learned.
	peerKeys sync.Map
	// peerClient talks to peer relays; every request carries its own
	// deadline (peerio.go).
	peerClient *http.Client
	// capped holds the peers that broke a cap, left alone until then.
	capped penalties
}

var _ relay.Runner = (*Module)(nil)

// NewModule returns federation with opts, or an error for a malformed
// peer key.
func NewModule(opts Options) (*Module, error) {
	if opts.MirrorInterval <= 0 {
		opts.MirrorInterval = 5 * time.Second
	}
	if opts.RateWindow <= 0 {
		opts.RateWindow = time.Minute
	}
	m := &Module{opts: opts, peerClient: newPeerClient(),
		byPeer: relay.NewLimiter(opts.PeerRate, opts.RateWindow), bySync: relay.NewLimiter(opts.SyncRate, opts.RateWindow)}
	for _, k := range opts.PeerKeys {
		if !protocol.IsHex64(k) {
			return nil, fmt.Errorf("peer key %q: want 64 lowercase hex", k)
		}
		m.peerKeys.Store(k, "configured")
	}
	for i, p := range m.opts.Peers {
		m.opts.Peers[i] = strings.TrimRight(p, "/")
	}
	topics, err := checkTopics(opts.Topics)
	if err != nil {
		return nil, err
	}
	m.opts.Topics = topics
	return m, nil
}

// Name is "federation".
func (s *Module) Name() string { return "federation" }

// Mount registers POST /gossip, GET /relays and POST /sync.
func (s *Module) Mount(core *relay.Server) error {
	s.core, s.cfg = core, core.Config()
	core.Route(http.MethodPost, "/gossip", s.postGossip)
	core.Route(http.MethodGet, "/relays", s.getRelays)
	core.Route(http.MethodPost, "/sync", s.postSync)
	return nil
}

// Run announces the relay (kind 10) and mirrors every configured peer
// until ctx ends.
func (s *Module) Run(ctx context.Context) {
	if err := s.Announce(ctx); err != nil {
		s.cfg.Logger.Warn("relay announcement failed", "err", err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); s.reannounce(ctx) }()
	for _, p := range s.opts.Peers {
		wg.Add(1)
		go func() { defer wg.Done(); s.MirrorLoop(ctx, p) }()
	}
	wg.Wait()
}

func (s *Module) now() int64 { return s.core.Now() }

// AnnounceEvery is how often the relay checks whether its kind 10 still
// says what it serves (the branches change with rollbacks and forks); it
// publishes a new one only when the content changed.
const AnnounceEvery = time.Minute

// reannounce keeps the relay's kind 10 current until ctx ends.
func (s *Module) reannounce(ctx context.Context) {
	t := time.NewTicker(AnnounceEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := s.Announce(ctx); err != nil && ctx.Err() == nil {
				s.cfg.Logger.Warn("relay announcement failed", "err", err)
			}
		}
	}
}

// revoked reports whether governance has revoked the relay key or URL.
func (s *Module) revoked(keyOrURL string) bool {
	return s.opts.RevokedRelay != nil && keyOrURL != "" && s.opts.RevokedRelay(keyOrURL, s.now())
}
