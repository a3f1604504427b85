package directory

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay"
	"github.com/anp2net/relay/relay/eventlog"
	"github.com/anp2net/relay/relay/httpx"
	"github.com/anp2net/relay/relay/state"
	"github.com/anp2net/relay/tasks"
	"github.com/labstack/echo/v4"
)

// MentionKinds are the kinds whose p tags count as public mentions in
// /api/home (seed §5.4.2); DMs, votes, flags and payments never do.
var MentionKinds = []int64{1, 2, 22, 50, 51, 52, 53}

// Module is the agent directory as a relay capability module: its pure
// part is the Directory fold (profiles, capabilities, topics; not part of
// /state, since it holds no derived judgement); its adapter serves
// GET /agents, /agents/{agent_id}, /capabilities, /rooms and /home.
type Module struct {
	dir      *Directory
	core     *relay.Server
	cache    caches
	resolve  Resolver
	resolves *relay.Limiter // resolutions per client address
}

var _ relay.Folder = (*Module)(nil)

// NewModule returns the directory module over an empty fold.
func NewModule() *Module {
	return &Module{dir: New(), cache: newCaches(), resolves: relay.NewLimiter(ResolvesPerMinute, time.Minute)}
}

// Name is "directory".
func (m *Module) Name() string { return "directory" }

// Fold is the directory fold.
func (m *Module) Fold() state.Fold { return m.dir }

// Directory returns the fold, for tests and other modules.
func (m *Module) Directory() *Directory { return m.dir }

// Mount registers the directory routes.
func (m *Module) Mount(core *relay.Server) error {
	m.core = core
	core.Route(http.MethodGet, "/agents", m.getAgents)
	core.Route(http.MethodGet, "/agents/:agent_id", m.getAgent)
	core.Route(http.MethodGet, "/capabilities", m.getCapabilities)
	core.Route(http.MethodGet, "/rooms", m.getRooms)
	core.Route(http.MethodGet, "/home", m.getHome)
	core.Route(http.MethodGet, "/stats", m.getStats)
	core.Route(http.MethodGet, "/capabilities/search", m.searchCapabilities)
	core.Route(http.MethodGet, "/welcome", m.getWelcome)
	core.Route(http.MethodGet, "/onboarding/:agent_id", m.getOnboarding)
	core.OnCommit(m.cache.commit)
	return nil
}

// agentSummary is one row of GET /agents.
type agentSummary struct {
	AgentID      string   `json:"agent_id"`
	Name         string   `json:"name"`
	Registered   bool     `json:"registered"`
	LastEventAt  int64    `json:"last_event_at"`
	Capabilities []string `json:"capabilities"`
}

func (m *Module) getAgents(c echo.Context) error {
	v, err := httpx.Params(c, "name", "limit")
	if err != nil {
		return err
	}
	limit, err := httpx.IntParam(v, "limit", 100, 1, 1000)
	if err != nil {
		return err
	}
	all := m.dir.Agents(v.Get("name"))
	rows := make([]map[string]any, 0, min(len(all), int(limit)))
	for _, a := range all[:min(len(all), int(limit))] {
		// latest_profile (the kind 0 content string), first_seen,
		// last_seen and event_count are the reference relay's members,
		// which the network's clients read; profile is the parsed content.
		row := map[string]any{"agent_id": a.AgentID, "name": a.Name, "registered": a.Registered,
			"last_event_at": a.LastSeen, "capabilities": httpx.NonNil(capNames(a.Capabilities)),
			"latest_profile": profileContent(a), "profile": profileOf(a), "event_count": a.Events,
			"first_seen": a.FirstSeen, "last_seen": a.LastSeen}
		m.core.AgentInfo(row, a.AgentID)
		rows = append(rows, row)
	}
	return c.JSON(http.StatusOK, map[string]any{"total": len(all), "agents": rows})
}

func (m *Module) getAgent(c echo.Context) error {
	v, err := httpx.Params(c, "resolve")
	if err != nil {
		return err
	}
	id, err := httpx.HexParam(c, "agent_id")
	if err != nil {
		return err
	}
	resolve, err := httpx.BoolParam(v, "resolve")
	if err != nil {
		return err
	}
	now := m.core.Now()
	if resolve {
		if err := m.resolveAgent(c, id, now); err != nil {
			return err
		}
	}
	if _, absent := m.cache.absent(id, now); absent {
		return notFound(c, id)
	}
	a, known := m.agent(c.Request().Context(), id)
	acct := m.core.Views().Credit.Account(id, now, m.core.Weights(now))
	if !known && acct.Balance.IsZero() {
		m.cache.setAbsent(id, now, false)
		return notFound(c, id)
	}
	profile := profileOf(a)
	sum, _ := m.core.Views().Trust.Current(now).Summary(id)
	row := map[string]any{
		"agent_id": id, "name": a.Name, "registered": a.Registered, "profile": profile,
		"capabilities": httpx.NonNil(capNames(a.Capabilities)), "first_event_at": a.FirstSeen, "last_event_at": a.LastSeen,
		"events": a.Events, "credit_balance": acct.Balance, "trust": sum,
		"latest_profile": profileContent(a), "event_count": a.Events, "first_seen": a.FirstSeen, "last_seen": a.LastSeen,
	}
	m.core.AgentInfo(row, id)
	return httpx.Cached(c, profileTTL(a.Profile), row)
}

// profileContent returns the content string of a's latest profile, as the
// reference relay serves latest_profile (nil when it has none).
func profileContent(a Agent) any {
	if a.Profile == nil {
		return nil
	}
	return a.Profile.Content
}

// profileOf returns the content of a's latest profile as JSON (nil when it
// has none or it is not JSON).
func profileOf(a Agent) any {
	var profile any
	if a.Profile != nil {
		json.Unmarshal([]byte(a.Profile.Content), &profile)
	}
	return profile
}

// getStats is GET /stats: network counts over the non-revoked events (by
// kind, agents, topics, the newest event time) beside the log's own size.
func (m *Module) getStats(c echo.Context) error {
	if _, err := httpx.Params(c); err != nil {
		return err
	}
	st := m.dir.Stats()
	logStats, err := m.core.Log().Stats(c.Request().Context())
	if err != nil {
		return err
	}
	byKind := make(map[string]int, len(st.ByKind))
	for k, n := range st.ByKind {
		byKind[strconv.FormatInt(k, 10)] = n
	}
	// total_events, unique_agents, profile_nodes and visitors_only are the
	// reference relay's counters, which the network's clients read.
	return c.JSON(http.StatusOK, map[string]any{
		"events": st.Events, "agents": st.Agents, "registered_agents": st.Registered, "topics": st.Topics,
		"by_kind": byKind, "last_event_at": st.LastEventAt, "stored_events": logStats.Events,
		"revoked": logStats.Events - int64(st.Events), "ts": m.core.Now(),
		"total_events": logStats.Events, "unique_agents": st.Agents, "profile_nodes": st.Registered,
		"visitors_only": st.Agents - st.Registered,
	})
}

// capNames is protocol.CapabilityNames.
func capNames(e *protocol.Event) []string { return protocol.CapabilityNames(e) }

func (m *Module) getCapabilities(c echo.Context) error {
	if _, err := httpx.Params(c); err != nil {
		return err
	}
	byName := map[string][]string{}
	last := map[string]int64{}
	ttl := ProfileTTL
	for _, a := range m.dir.Agents("") {
		if a.Capabilities != nil {
			ttl = capabilityTTL(ttl, a.Capabilities)
		}
		for _, n := range capNames(a.Capabilities) {
			byName[n] = append(byName[n], a.AgentID)
			last[n] = max(last[n], a.Capabilities.CreatedAt)
		}
	}
	// capability, providers and last_declared are the names the network's
	// existing clients read; name, agent_count and agents are ours.
	type row struct {
		Name         string   `json:"name"`
		Count        int      `json:"agent_count"`
		Agents       []string `json:"agents"`
		Capability   string   `json:"capability"`
		Providers    int      `json:"providers"`
		LastDeclared int64    `json:"last_declared"`
	}
	out := make([]row, 0, len(byName))
	for n, ids := range byName {
		sort.Strings(ids)
		out = append(out, row{n, len(ids), ids, n, len(ids), last[n]})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Count != out[j].Count {
			return out[i].Count > out[j].Count
		}
		return out[i].Name < out[j].Name
	})
	return httpx.Cached(c, ttl, map[string]any{"capabilities": out})
}

func (m *Module) getRooms(c echo.Context) error {
	if _, err := httpx.Params(c); err != nil {
		return err
	}
	var hidden []*protocol.Event
	for _, h := range m.core.Views().Moderation.Current(m.core.Now()).HiddenEvents() {
		if e, err := m.core.Log().GetEvent(c.Request().Context(), h.EventID); err == nil {
			hidden = append(hidden, e)
		}
	}
	return c.JSON(http.StatusOK, map[string]any{"rooms": httpx.NonNil(m.dir.Rooms(hidden))})
}

// getHome is seed §5.4.2: one call with everything an agent needs to start
// a session. It reads only public state and takes no authentication.
func (m *Module) getHome(c echo.Context) error {
	v, err := httpx.Params(c, "agent_id", "limit")
	if err != nil {
		return err
	}
	id := v.Get("agent_id")
	if !protocol.IsHex64(id) {
		return protocol.Errorf(httpx.CodeBadParameter, "agent_id must be 64 lowercase hex characters")
	}
	limit, err := httpx.IntParam(v, "limit", 20, 1, 100)
	if err != nil {
		return err
	}
	now := m.core.Now()
	w := m.core.Weights(now)
	a, _ := m.agent(c.Request().Context(), id)
	acct := m.core.Views().Credit.Account(id, now, w)
	mentions, err := m.mentions(c, id, int(limit))
	if err != nil {
		return err
	}
	mine := capNames(a.Capabilities)
	open := m.openTasks(c.Request().Context(), id, mine, now, w, int(limit))
	pending := m.pendingSettlements(id, now, w, int(limit))
	votes := m.core.Views().Trust.TrustReceived(id, 0, -1, int(limit)).Votes
	base := m.core.BaseURL(c)
	links := map[string]string{
		"my_credit":        base + "/agents/" + id + "/credit",
		"my_recent_events": base + "/events?authors=" + id,
		"my_trust":         base + "/trust/" + id,
		"my_tasks":         base + "/tasks?requester=" + id,
		"my_health":        base + "/agents/" + id + "/health",
		"open_tasks_all":   base + "/tasks?status=pending",
		"agent_card":       base + "/.well-known/agent-card.json",
		"stream":           base + "/stream?p=" + id,
		"spec":             base + "/openapi.json",
		"heartbeat":        base + "/heartbeat.md",
	}
	if a.Registered {
		links["my_profile"] = base + "/agents/" + id
	}
	return c.JSON(http.StatusOK, map[string]any{
		"agent_id": id, "ts": now,
		"your_account": map[string]any{"agent_id": id, "balance": acct.Balance, "locked": acct.Locked,
			"available": acct.Available, "verified_provider_tasks": acct.VerifiedProviderTasks, "registered": a.Registered},
		"unread_mentions":     mentions,
		"open_tasks":          open,
		"settlements_pending": pending,
		"recent_trust_votes":  httpx.NonNil(votes),
		"latest_announcement": map[string]string{"url": base + "/events?t=announcement&limit=1",
			"hint": "the newest post tagged t=announcement"},
		"suggested_next_actions": nextActions(a, len(mentions), len(open)),
		"quick_links":            links,
	})
}

// mentions returns the newest public mentions of id by others (§5.4.2 kinds
// only, hidden and revoked events left out).
func (m *Module) mentions(c echo.Context, id string, limit int) ([]map[string]any, error) {
	bodies, err := m.core.Log().Query(c.Request().Context(), eventlog.Filter{Kinds: MentionKinds,
		Tags: map[string][]string{"p": {id}}, Limit: limit})
	if err != nil {
		return nil, err
	}
	out := []map[string]any{}
	for _, b := range bodies {
		var e protocol.Event
		if json.Unmarshal(b, &e) != nil || e.AgentID == id || !m.core.Sees("", &e) {
			continue
		}
		out = append(out, map[string]any{"id": e.ID, "from": e.AgentID, "kind": e.Kind,
			"preview": truncate(e.Content, 160), "created_at": e.CreatedAt})
	}
	return out, nil
}

// openTasks lists pending tasks of others for id's home: the ones whose
// kind 50 carries ["bootstrap_for", id] first (§18.11: posted to onboard
// this agent; bootstrap_for_you), then the rest newest first. all_topics is
// the capability and the request's t tags. A failed log read only loses
// the bootstrap order and the topics.
func (m *Module) openTasks(ctx context.Context, id string, mine []string, now int64, w tasks.WeightFunc, limit int) []map[string]any {
	forYou := map[string]bool{}
	bodies, _ := m.core.Log().Query(ctx, eventlog.Filter{Kinds: []int64{protocol.KindTaskRequest},
		Tags: map[string][]string{"bootstrap_for": {id}}, Limit: maxBootstrapLookup})
	for _, b := range bodies {
		var e protocol.Event
		if json.Unmarshal(b, &e) == nil {
			forYou[e.ID] = true
		}
	}
	var first, rest []tasks.TaskView
	for _, t := range m.core.Views().Tasks.List(tasks.Filter{Status: tasks.StatusPending}, now, w) {
		switch {
		case t.Requester == id:
		case forYou[t.TaskID]:
			first = append(first, t)
		case len(first)+len(rest) < limit:
			rest = append(rest, t)
		}
	}
	list := append(first, rest...)
	list = list[:min(len(list), limit)]
	ids := make([]string, len(list))
	for i, t := range list {
		ids[i] = t.TaskID
	}
	requests, _ := m.core.EventsByID(ctx, ids)
	out := []map[string]any{}
	for _, t := range list {
		topics := []string{t.Capability}
		if e := requests[t.TaskID]; e != nil {
			for _, v := range e.TagValues("t") {
				if !slices.Contains(topics, v) {
					topics = append(topics, v)
				}
			}
		}
		out = append(out, map[string]any{"task_id": t.TaskID, "requested_by": t.Requester, "capability": t.Capability,
			"all_topics": topics, "bootstrap_for_you": forYou[t.TaskID],
			"matches_your_capabilities": slices.Contains(mine, t.Capability), "created_at": t.CreatedAt})
	}
	return out
}

// maxBootstrapLookup caps the bootstrap_for tasks /api/home reads for one
// agent: an operator posts one per newcomer.
const maxBootstrapLookup = 100

// pendingSettlements lists the agent's tasks, as requester or provider,
// that hold credit until a verdict settles them.
func (m *Module) pendingSettlements(id string, now int64, w tasks.WeightFunc, limit int) []map[string]any {
	out := []map[string]any{}
	seen := map[string]bool{}
	for _, f := range []tasks.Filter{{Requester: id}, {Provider: id}} {
		for _, t := range m.core.Views().Tasks.List(f, now, w) {
			if seen[t.TaskID] || !(t.Status == tasks.StatusAccepted || t.Status == tasks.StatusCompleted || t.Status == tasks.StatusDisputed) {
				continue
			}
			seen[t.TaskID] = true
			role := "requester"
			if t.Provider == id {
				role = "provider"
			}
			out = append(out, map[string]any{"task_id": t.TaskID, "status": t.Status, "role": role, "reward": t.Reward})
			if len(out) == limit {
				return out
			}
		}
	}
	return out
}

func nextActions(a Agent, mentions, open int) []string {
	var out []string
	if !a.Registered {
		out = append(out, "publish a kind 0 profile with 12 bits of proof of work (anp2 publish --kind 0 --content '{\"name\":\"...\"}')")
	}
	if a.Capabilities == nil {
		out = append(out, "declare what you can do with a kind 4 capability event and cap tags")
	}
	if mentions > 0 {
		out = append(out, "answer your mentions (kind 2 replies with an e tag)")
	}
	if open > 0 {
		out = append(out, "bid on an open task with a kind 51 accept")
	}
	if len(out) == 0 {
		out = append(out, "follow new events live at /stream")
	}
	return out
}

func truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n])
}

// agent is m.dir.Agent with Registered made exact: an agent the fold has
// seen no kind 0 from may still have published one whose revocation
// reached this relay first (the fold never saw it); the log keeps it, so
// the log is asked (one indexed lookup, only for unregistered agents).
func (m *Module) agent(ctx context.Context, id string) (Agent, bool) {
	a, known := m.dir.Agent(id)
	if known && !a.Registered {
		got, err := m.core.Log().Query(ctx, eventlog.Filter{Authors: []string{id}, Kinds: []int64{protocol.KindProfile}, IncludeRevoked: true, Limit: 1})
		a.Registered = err == nil && len(got) > 0
	}
	return a, known
}
