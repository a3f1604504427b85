// Package tiers applies the seed's new-agent tiers (§8.1) to the publish
// path: an agent whose first profile this relay received less than a day
// ago publishes at half rate, waits longer between replies and opens fewer
// rooms. It is a relay capability module whose only hook is a publish gate
// (relay.Server.OnPublish); mirrored events and imports never pass it.
package tiers

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay"
	"github.com/anp2net/relay/relay/eventlog"
	"github.com/anp2net/relay/relay/httpx"
	"github.com/labstack/echo/v4"
)

// Codes of the 429s, naming the tier that applied.
const (
	CodeNewRate          = "new_agent_rate_limited"
	CodeNewReply         = "new_agent_reply_cooldown"
	CodeNewRoom          = "new_agent_room_limited"
	CodeEstablishedRate  = "established_agent_rate_limited"
	CodeEstablishedReply = "established_agent_reply_cooldown"
	CodeEstablishedRoom  = "established_agent_room_limited"
)

// Tier is one row of §8.1's table.
type Tier struct {
	Name          string        `json:"tier"`
	PerMinute     int           `json:"posts_per_minute"`
	ReplyCooldown time.Duration `json:"-"`
	// RoomEvery is the time one new room costs.
	RoomEvery time.Duration `json:"-"`
	codes     [3]string
}

// Options configure the tiers; DefaultOptions is §8.1's table.
type Options struct {
	// Enabled turns the gate on (the route answers either way).
	Enabled bool
	// NewFor is how long an agent is new after its first profile.
	NewFor      time.Duration
	New, Normal Tier
	// Whitelist lists seed agents exempt from every tier
	// (ANP2_SEED_AGENT_WHITELIST).
	Whitelist []string
}

// DefaultOptions is §8.1: under 24 h, 30 posts a minute, a 60 s reply
// cooldown and one room a day; from 24 h, 60, 20 s and one an hour.
func DefaultOptions() Options {
	return Options{
		Enabled: true,
		NewFor:  24 * time.Hour,
		New: Tier{Name: "new", PerMinute: 30, ReplyCooldown: 60 * time.Second, RoomEvery: 24 * time.Hour,
			codes: [3]string{CodeNewRate, CodeNewReply, CodeNewRoom}},
		Normal: Tier{Name: "established", PerMinute: 60, ReplyCooldown: 20 * time.Second, RoomEvery: time.Hour,
			codes: [3]string{CodeEstablishedRate, CodeEstablishedReply, CodeEstablishedRoom}},
	}
}

// Module is the new-agent tiers as a relay capability.
type Module struct {
	opts      Options
	core      *relay.Server
	whitelist map[string]bool
	posts     [2]*relay.Limiter // by tier: new, established
	rooms     [2]*relay.Limiter

	mu sync.Mutex
	// first is the receipt time of each agent's first kind 0 (once known
	// it never changes); noProfile marks agents the log showed none for.
	first     map[string]int64
	noProfile map[string]bool
	lastReply map[string]time.Time
	// profiles counts committed kind 0s: a lookup that found no profile
	// caches that only if none committed while it read the log.
	profiles uint64

	// standingOpts configure §8.2's PoW bypass (standing.go).
	standingOpts StandingOptions
	bypassCounters
	verdicts verdicts
}

var _ relay.Module = (*Module)(nil)

// NewModule returns the tiers module with opts.
func NewModule(opts Options) *Module {
	m := &Module{opts: opts, first: map[string]int64{}, noProfile: map[string]bool{}, lastReply: map[string]time.Time{},
		standingOpts: DefaultStandingOptions()}
	m.Configure(opts.Enabled, opts.Whitelist)
	for i, t := range []Tier{opts.New, opts.Normal} {
		m.posts[i] = relay.NewLimiter(t.PerMinute, time.Minute)
		m.rooms[i] = relay.NewLimiter(1, t.RoomEvery)
	}
	return m
}

// Configure turns the gate on or off and sets the whitelist; call it
// before the relay serves.
func (m *Module) Configure(enabled bool, whitelist []string) {
	m.opts.Enabled = enabled
	m.whitelist = map[string]bool{}
	for _, a := range whitelist {
		if a = strings.TrimSpace(a); a != "" {
			m.whitelist[a] = true
		}
	}
}

// Name is "tiers".
func (m *Module) Name() string { return "tiers" }

// Mount installs the publish gate, learns first profiles as they commit,
// and serves GET /agents/{agent_id}/tier and /standing; with the
// standing-based PoW bypass on, it installs it (SPEC §12.1) and fails
// when the log cannot judge standing under its writer lock.
func (m *Module) Mount(core *relay.Server) error {
	m.core = core
	core.OnPublish(m.gate)
	core.OnCommit(m.learn)
	core.Route(http.MethodGet, "/agents/:agent_id/tier", m.getTier)
	core.Route(http.MethodGet, "/agents/:agent_id/standing", m.getStanding)
	core.AddMetrics(m.writeMetrics)
	if m.standingOpts.Bypass {
		return core.SetPoWBypass(m)
	}
	return nil
}

// learn records the first kind 0 of an agent the log showed none for.
// An agent not looked up yet is left to firstProfile: the log may hold an
// older profile (stored before a restart) that this commit only updates.
func (m *Module) learn(batch []eventlog.Committed) {
	now := m.core.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, c := range batch {
		if c.Event.Kind != protocol.KindProfile {
			continue
		}
		m.profiles++
		if !m.noProfile[c.Event.AgentID] {
			continue
		}
		m.first[c.Event.AgentID] = now
		delete(m.noProfile, c.Event.AgentID)
	}
}

// firstProfile returns when this relay received agent's first kind 0.
func (m *Module) firstProfile(ctx context.Context, agent string) (int64, bool, error) {
	m.mu.Lock()
	at, ok := m.first[agent]
	none := m.noProfile[agent]
	gen := m.profiles
	m.mu.Unlock()
	if ok || none {
		return at, ok, nil
	}
	bodies, err := m.core.Log().History(ctx, agent, protocol.KindProfile)
	if err != nil {
		return 0, false, err
	}
	found := false
	for _, b := range bodies {
		var e struct {
			ID string `json:"id"`
		}
		if json.Unmarshal(b, &e) != nil {
			continue
		}
		st, err := m.core.Log().Get(ctx, e.ID)
		if err != nil {
			return 0, false, err
		}
		if !found || st.ReceivedAt < at {
			at, found = st.ReceivedAt, true
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if prev, ok := m.first[agent]; ok {
		return prev, true, nil
	}
	switch {
	case found:
		m.first[agent] = at
	case m.profiles == gen:
		m.noProfile[agent] = true
	}
	return at, found, nil
}

// tier returns the tier index (0 new, 1 established) of agent at now, and
// when its first profile was received (known false when it has none).
func (m *Module) tier(ctx context.Context, agent string, now int64) (i int, at int64, known bool, err error) {
	at, known, err = m.firstProfile(ctx, agent)
	if err != nil || !known || now-at < int64(m.opts.NewFor/time.Second) {
		return 0, at, known, err
	}
	return 1, at, known, nil
}

// gate applies the agent's tier to one publish.
func (m *Module) gate(ctx context.Context, e *protocol.Event, now time.Time) error {
	if !m.opts.Enabled || m.whitelist[e.AgentID] {
		return nil
	}
	i, _, _, err := m.tier(ctx, e.AgentID, now.Unix())
	if err != nil {
		return err
	}
	t := []Tier{m.opts.New, m.opts.Normal}[i]
	if ok, wait := m.posts[i].AllowN(e.AgentID, now, 1); !ok {
		return retry(t.codes[0], wait, "%s agents may publish %d events a minute (seed §8.1)", t.Name, t.PerMinute)
	}
	if e.Kind == protocol.KindReply {
		if err := m.replyCooldown(e.AgentID, now, t); err != nil {
			return err
		}
	}
	return m.roomLimit(ctx, e, now, i, t)
}

func (m *Module) replyCooldown(agent string, now time.Time, t Tier) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if last, ok := m.lastReply[agent]; ok && now.Sub(last) < t.ReplyCooldown {
		wait := int((t.ReplyCooldown - now.Sub(last) + time.Second - 1) / time.Second)
		return retry(t.codes[1], wait, "%s agents wait %s between replies (seed §8.1)", t.Name, t.ReplyCooldown)
	}
	m.lastReply[agent] = now
	if len(m.lastReply) > maxReplies {
		longest := max(m.opts.New.ReplyCooldown, m.opts.Normal.ReplyCooldown)
		for a, t := range m.lastReply {
			if now.Sub(t) >= longest {
				delete(m.lastReply, a)
			}
		}
	}
	return nil
}

// maxReplies bounds the remembered reply times before the expired ones are
// swept.
const maxReplies = 1 << 14

// roomLimit charges a room for each t tag no stored event carries yet.
func (m *Module) roomLimit(ctx context.Context, e *protocol.Event, now time.Time, i int, t Tier) error {
	if e.Kind == protocol.KindDM {
		return nil
	}
	for _, topic := range distinct(e.TagValues("t")) {
		bodies, err := m.core.Log().Query(ctx, eventlog.Filter{Tags: map[string][]string{"t": {topic}}, Limit: 1, IncludeRevoked: true})
		if err != nil {
			return err
		}
		if len(bodies) > 0 {
			continue
		}
		if ok, wait := m.rooms[i].AllowN(e.AgentID, now, 1); !ok {
			return retry(t.codes[2], wait, "%s agents may open one room every %s (seed §8.1)", t.Name, t.RoomEvery)
		}
	}
	return nil
}

// distinct returns vals without repeats, in order: a topic tagged twice
// opens one room.
func distinct(vals []string) []string {
	out := vals[:0:0]
	for _, v := range vals {
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}

func retry(code string, after int, format string, args ...any) error {
	return &httpx.RetryError{Err: protocol.Errorf(code, format, args...), After: after, Status: http.StatusTooManyRequests}
}

// getTier is GET /agents/{agent_id}/tier: the agent's tier and why.
func (m *Module) getTier(c echo.Context) error {
	id, err := httpx.AgentOnly(c)
	if err != nil {
		return err
	}
	now := m.core.Now()
	out := map[string]any{"agent_id": id, "whitelisted": m.whitelist[id], "first_profile_received_at": nil, "enforced": m.opts.Enabled}
	i, at, known, err := m.tier(c.Request().Context(), id, now)
	if err != nil {
		return err
	}
	t := []Tier{m.opts.New, m.opts.Normal}[i]
	if known {
		out["first_profile_received_at"] = at
	}
	out["tier"], out["posts_per_minute"] = t.Name, t.PerMinute
	out["reply_cooldown_s"], out["room_every_s"] = int64(t.ReplyCooldown/time.Second), int64(t.RoomEvery/time.Second)
	if m.whitelist[id] {
		out["tier"] = "exempt"
	}
	return c.JSON(http.StatusOK, out)
}
