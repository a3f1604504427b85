package directory

import (
	"context"
	"encoding/json"
	"strconv"
	"sync"
	"time"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay"
	"github.com/anp2net/relay/relay/eventlog"
	"github.com/anp2net/relay/relay/httpx"
	"github.com/labstack/echo/v4"
)

// DNS-like caching of the directory's answers (seed §12.9, SPEC §18.8).
const (
	// ProfileTTL is the default cache lifetime of profile and capability
	// answers (seed §12.9.1); a ttl_sec hint in the kind 0 / kind 4 wins.
	ProfileTTL = 3600
	// NegativeTTL is how long "this agent has no events here" is cached
	// (seed §12.9.4), on the relay and in the 404's Cache-Control.
	NegativeTTL = 30
	// maxNegative bounds the negative cache (unknown ids cost memory).
	maxNegative = 100_000
	// ResolvesPerMinute bounds the resolutions one client address may
	// cause (each may ask up to 3 relays): past it, 429 rate_limited.
	ResolvesPerMinute = 30
)

// A Resolver fetches agent's latest profile from elsewhere — its home
// relays named in known (its profile here, possibly nil), else the
// bootstrap relays — stores it as a mirrored event and returns it
// (federation.Module.ResolveProfile).
type Resolver func(ctx context.Context, agent string, known *protocol.Event) (*protocol.Event, error)

// SetResolver lets GET /agents/{agent_id}?resolve=true fetch agents
// through r. It returns m.
func (m *Module) SetResolver(r Resolver) *Module { m.resolve = r; return m }

// caches are the relay-side caches of the directory: the negative cache
// (agent → until when it is known to be absent, and whether resolution
// failed too) and the freshness of resolved profiles (agent → until when
// its profile needs no new resolution).
type caches struct {
	mu       sync.Mutex
	negative map[string]negEntry
	fresh    map[string]int64
}

type negEntry struct {
	until    int64
	resolved bool // resolution was tried and found nothing
}

func newCaches() caches {
	return caches{negative: map[string]negEntry{}, fresh: map[string]int64{}}
}

// absent reports a live negative entry for agent.
func (c *caches) absent(agent string, now int64) (negEntry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.negative[agent]
	if ok && e.until <= now {
		delete(c.negative, agent)
		ok = false
	}
	return e, ok
}

// setAbsent caches agent's absence for NegativeTTL.
func (c *caches) setAbsent(agent string, now int64, resolved bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.negative) >= maxNegative {
		for k, e := range c.negative {
			if e.until <= now {
				delete(c.negative, k)
			}
		}
		if len(c.negative) >= maxNegative {
			return // full of live entries: answer uncached
		}
	}
	c.negative[agent] = negEntry{until: now + NegativeTTL, resolved: resolved}
}

// commit ends the cache entries the committed events make stale: any
// event by an agent, or naming it in a p tag, ends its negative entry at
// once; a kind 23
// cache_invalidate by an agent (seed §12.9.5) ends the freshness of its
// resolved profile, so the next ?resolve=true asks its home relays again.
func (c *caches) commit(batch []eventlog.Committed) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.negative) == 0 && len(c.fresh) == 0 {
		return
	}
	for _, b := range batch {
		delete(c.negative, b.Event.AgentID)
		for _, p := range b.Event.TagValues("p") { // a payment may credit an agent with no event
			delete(c.negative, p)
		}
		if b.Event.Kind == protocol.KindCacheInvalidate {
			delete(c.fresh, b.Event.AgentID)
		}
	}
}

func (c *caches) isFresh(agent string, now int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.fresh[agent] > now
}

func (c *caches) setFresh(agent string, until int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.fresh[agent] = until
}

// profileTTL is the cache lifetime of a profile answer: its ttl_sec hint,
// else ProfileTTL.
func profileTTL(p *protocol.Event) int {
	if p == nil {
		return ProfileTTL
	}
	return httpx.TTLHint(p.Content, ProfileTTL)
}

// capabilityTTL is the lifetime of an answer built from these kind 4s: the
// smallest of their ttl_sec hints, else ProfileTTL.
func capabilityTTL(ttl int, e *protocol.Event) int {
	if e == nil {
		return ttl
	}
	return min(ttl, httpx.TTLHint(e.Content, ProfileTTL))
}

// hasHomeRelays reports whether a profile names home_relays.
func hasHomeRelays(p *protocol.Event) bool {
	var body struct {
		HomeRelays []any `json:"home_relays"`
	}
	return p != nil && json.Unmarshal([]byte(p.Content), &body) == nil && len(body.HomeRelays) > 0
}

// resolveAgent applies ?resolve=true before GET /agents/{agent_id} is
// answered: an unknown agent (no live negative entry from a failed
// resolution) is fetched through the resolver; a known one whose profile
// names home_relays is fetched again from them once its profile's TTL has
// run out since it was last resolved or stored (or after a kind 23). A
// failure is cached like an absence, NegativeTTL.
func (m *Module) resolveAgent(c echo.Context, id string, now int64) error {
	if m.resolve == nil {
		return nil
	}
	a, known := m.dir.Agent(id)
	switch {
	case !known:
		if e, ok := m.cache.absent(id, now); ok && e.resolved {
			return nil
		}
	case a.Profile == nil || !hasHomeRelays(a.Profile) || m.cache.isFresh(id, now):
		return nil
	}
	if ok, wait := m.resolves.AllowN(m.core.ClientKey(c), time.Unix(now, 0), 1); !ok {
		return &httpx.RetryError{Err: protocol.Errorf(relay.CodeRateLimited,
			"at most %d resolutions a minute from one address", ResolvesPerMinute), After: wait}
	}
	p, err := m.resolve(c.Request().Context(), id, a.Profile)
	if err != nil || p == nil {
		if !known {
			m.cache.setAbsent(id, now, true)
		} else {
			m.cache.setFresh(id, now+NegativeTTL)
		}
		return nil
	}
	if latest, _ := m.dir.Agent(id); latest.Profile != nil {
		p = latest.Profile
	}
	m.cache.setFresh(id, now+int64(profileTTL(p)))
	return nil
}

// notFound answers an unknown agent: a 404 cached NegativeTTL seconds.
func notFound(c echo.Context, id string) error {
	c.Response().Header().Set("Cache-Control", "public, max-age="+strconv.Itoa(NegativeTTL))
	return protocol.Errorf(relay.CodeNotFound, "agent %s has no events here", id)
}
