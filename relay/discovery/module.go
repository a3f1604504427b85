package discovery

import (
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay"
	"github.com/anp2net/relay/relay/httpx"
	"github.com/anp2net/relay/relay/state"
	"github.com/labstack/echo/v4"
)

// Module is seed §12 as a relay capability: the discovery Fold and the
// routes that read it.
type Module struct {
	fold *Fold
	core *relay.Server
	// lock holds a temporary store's file lock while the module uses it
	// (OpenState with no directory).
	lock *os.File
}

var _ relay.Folder = (*Module)(nil)

// NewModule returns the discovery module over an empty fold.
func NewModule() *Module { return &Module{fold: New()} }

var _ relay.StateOpener = (*Module)(nil)

// StoreFile is the store's file name in the state directory.
const StoreFile = "discovery.db"

// OpenState puts the fold's store in dir (StoreFile), or, for dir "", in
// a temporary file removed at Close. It fails when the file cannot be
// created.
func (m *Module) OpenState(dir string) error {
	if dir == "" {
		path, lock, err := createTemp()
		if err != nil {
			return fmt.Errorf("discovery store: %w", err)
		}
		if err := m.fold.OpenStore(path, true); err != nil {
			lock.Close()
			return err
		}
		m.lock = lock
		return nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("discovery store: %w", err)
	}
	return m.fold.OpenStore(filepath.Join(dir, StoreFile), false)
}

// Close closes the fold's store (what no save committed rolls back; a
// temporary one is removed).
func (m *Module) Close() error {
	err := m.fold.Close()
	if m.lock != nil {
		m.lock.Close()
		m.lock = nil
	}
	return err
}

// Name is "discovery".
func (m *Module) Name() string { return "discovery" }

// Fold is the discovery fold.
func (m *Module) Fold() state.Fold { return m.fold }

// Discovery returns the fold, for tests and other modules.
func (m *Module) Discovery() *Fold { return m.fold }

// Mount registers the discovery routes.
func (m *Module) Mount(core *relay.Server) error {
	m.core = core
	core.Route(http.MethodGet, "/beacons", m.getBeacons)
	core.Route(http.MethodGet, "/agents/:agent_id/subscriptions", m.getFollowing)
	core.Route(http.MethodGet, "/subscriptions/:agent_id", m.getSubscriptions)
	core.Route(http.MethodGet, "/agents/:agent_id/followers", m.getFollowers)
	core.Route(http.MethodGet, "/topics/:topic/followers", m.getTopicFollowers)
	core.Route(http.MethodGet, "/citations/:event_id", m.getCitations)
	core.Route(http.MethodGet, "/copresence/:agent_id", m.getCopresence)
	core.Route(http.MethodGet, "/neighbors/:agent_id", m.getNeighbors)
	core.Route(http.MethodGet, "/feed/:agent_id", m.getFeed)
	core.Route(http.MethodGet, "/recommendations/:agent_id", m.getFeed)
	core.AddAgentInfo(m.agentInfo)
	// §12.8 on every read path: invite_only agents' events go only to
	// themselves, the agents they follow and relays.
	core.AddReaderRule(m.fold.ReaderRule)
	// §12.6: neighbours in the answer to a first profile, and discovery's
	// part of GET /onboarding/{agent_id}.
	core.AddPublishInfo(m.publishInfo)
	core.AddOnboardingInfo(m.onboardingInfo)
	// GET /stream?follows=<agent_id>: what that agent follows (§12.7),
	// judged against the follows as they stand when each event is sent.
	core.AddStreamFilter("follows", func(v string) (func(*protocol.Event) bool, error) {
		if !protocol.IsHex64(v) {
			return nil, protocol.Errorf(httpx.CodeBadParameter, "follows must be an agent_id (64 lowercase hex)")
		}
		return func(e *protocol.Event) bool { return m.fold.FollowsEvent(v, e) }, nil
	})
	return nil
}

// agentInfo adds the agent's discoverability and follow counts to the
// directory's rows (GET /agents, /agents/{id}).
func (m *Module) agentInfo(row map[string]any, id string, _ int64) {
	row["discoverability"] = m.fold.Discoverability(id)
	row["following_count"] = len(m.fold.Following(id, false))
	row["follower_count"] = len(m.fold.Followers(TargetAgent, id, false))
}

// sees reports whether reader may see an event by author: the core's
// visibility (revocation, moderation) and the reader rule this module
// registers (§12.8: an invite_only author's events go only to itself, to
// agents it follows and to relays).
func (m *Module) sees(reader, id, author string) bool {
	return m.core.Sees(reader, &protocol.Event{ID: id, AgentID: author})
}

// private reports whether agent's discovery lists are closed to reader:
// its discoverability is not public and reader is not agent itself.
func (m *Module) private(agent, reader string) bool {
	return reader != agent && m.fold.Discoverability(agent) != Public
}

// Cache lifetimes of the discovery answers (§12.9.1): 60 s for beacons, as
// the seed's default beacon TTL, and for every other view, which changes
// with each publish.
const (
	BeaconTTL = 60
	viewTTL   = 60
)

func (m *Module) getBeacons(c echo.Context) error {
	v, err := httpx.Params(c, "t", "cap_wanted", "agent_id", "limit")
	if err != nil {
		return err
	}
	reader, err := m.core.Reader(c)
	if err != nil {
		return err
	}
	limit, err := httpx.IntParam(v, "limit", 100, 1, 1000)
	if err != nil {
		return err
	}
	q := BeaconQuery{Topic: v.Get("t"), CapWanted: v.Get("cap_wanted"), Author: v.Get("agent_id")}
	if err := textParam(v, "t", "cap_wanted"); err != nil {
		return err
	}
	if q.Author != "" && !protocol.IsHex64(q.Author) {
		return protocol.Errorf(httpx.CodeBadParameter, "agent_id must be 64 lowercase hex characters")
	}
	now := m.core.Now()
	all, _ := m.fold.Active(q, now)
	byTopic := q.Topic != "" || q.CapWanted != ""
	out := make([]Beacon, 0, min(len(all), int(limit)))
	for _, b := range all {
		if len(out) == int(limit) {
			break
		}
		if !m.sees(reader, b.ID, b.AgentID) || !byTopic && reader != b.AgentID && m.fold.Discoverability(b.AgentID) == TopicOnly {
			continue
		}
		out = append(out, b)
	}
	return answer(c, BeaconTTL, map[string]any{"at": now, "count": len(out), "beacons": out})
}

// textParam answers a 400 unless each named parameter, when given, is
// non-empty and at most 1024 bytes.
func textParam(v url.Values, names ...string) error {
	for _, n := range names {
		if s, ok := v[n]; ok && (s[0] == "" || len(s[0]) > 1024) {
			return protocol.Errorf(httpx.CodeBadParameter, "%s must be 1 to 1024 bytes", n)
		}
	}
	return nil
}

// ParseWindow reads a duration such as 7d, 24h, 30m, 90s or a plain number
// of seconds, from 1 second to 90 days; errors are invalid_parameter.
func ParseWindow(s string) (int64, error) {
	unit := int64(1)
	num := s
	if n := len(s); n > 0 {
		switch s[n-1] {
		case 'd':
			unit, num = 86400, s[:n-1]
		case 'h':
			unit, num = 3600, s[:n-1]
		case 'm':
			unit, num = 60, s[:n-1]
		case 's':
			num = s[:n-1]
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 1 || strings.HasPrefix(num, "+") || n > 90*86400/unit {
		return 0, protocol.Errorf(httpx.CodeBadParameter, "window must be a duration such as 7d, 24h, 30m or 3600 (seconds), from 1s to 90d")
	}
	return n * unit, nil
}

func windowParam(v url.Values, def int64) (int64, error) {
	if !v.Has("window") {
		return def, nil
	}
	return ParseWindow(v.Get("window"))
}

// answer writes v as JSON with Cache-Control max-age ttl and a strong ETag
// (httpx.Cached): a 304 for a matching If-None-Match.
func answer(c echo.Context, ttl int, v any) error { return httpx.Cached(c, ttl, v) }
