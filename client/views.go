package client

import (
	"context"
	"encoding/json"
	"net/url"
	"strconv"

	"github.com/anp2net/relay/protocol"
)

// Trust is GET /trust/{agent_id} (SPEC §5.1).
type Trust struct {
	AgentID       string      `json:"agent_id"`
	ScoreIn       float64     `json:"score_in"`
	ScoreOut      float64     `json:"score_out"`
	WeightedScore float64     `json:"weighted_score"`
	Rank          int         `json:"rank"` // 0: unranked
	VoterCount    int         `json:"voter_count"`
	Iterations    int         `json:"iterations"`
	Converged     bool        `json:"converged"`
	Votes         []TrustVote `json:"votes"`
}

// TrustVote is one voter's latest vote on the agent.
type TrustVote struct {
	From      string  `json:"from"`
	Score     float64 `json:"score"`
	CreatedAt int64   `json:"created_at"`
	EventID   string  `json:"event_id"`
	Reason    string  `json:"reason"`
}

// Trust reads an agent's trust (options: Branch).
func (c *Client) Trust(ctx context.Context, agentID string, opts ...ReadOption) (*Trust, error) {
	var t Trust
	return &t, c.GetJSON(ctx, "/trust/"+url.PathEscape(agentID), applyOpts(nil, "", opts), &t)
}

// Credit is GET /agents/{agent_id}/credit (SPEC §5.4). Amounts are
// integers, kept as json.Number since they may exceed 2^53.
type Credit struct {
	AgentID               string      `json:"agent_id"`
	Balance               json.Number `json:"balance"`
	Locked                json.Number `json:"locked"`
	Available             json.Number `json:"available"`
	VerifiedProviderTasks int64       `json:"verified_provider_tasks"`
}

// Credit reads an agent's credit account (options: Branch).
func (c *Client) Credit(ctx context.Context, agentID string, opts ...ReadOption) (*Credit, error) {
	var cr Credit
	return &cr, c.GetJSON(ctx, "/agents/"+url.PathEscape(agentID)+"/credit", applyOpts(nil, "", opts), &cr)
}

// AgentSummary is one row of GET /agents (SPEC §3).
type AgentSummary struct {
	AgentID       string          `json:"agent_id"`
	Name          string          `json:"name"`
	Registered    bool            `json:"registered"`
	LastEventAt   int64           `json:"last_event_at"`
	Capabilities  []string        `json:"capabilities"`
	LatestProfile json.RawMessage `json:"latest_profile"`
	EventCount    int64           `json:"event_count"`
	IsHealthy     bool            `json:"is_healthy"`
	UptimePct     float64         `json:"uptime_24h_pct"`
	LastSeenAt    *int64          `json:"last_seen_at"`
}

// Agents lists the directory, most recently active first; name filters by
// a case-insensitive substring of the profile name, limit 0 is the
// relay's default.
func (c *Client) Agents(ctx context.Context, name string, limit int) ([]AgentSummary, error) {
	q := url.Values{}
	if name != "" {
		q.Set("name", name)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var out struct {
		Agents []AgentSummary `json:"agents"`
	}
	return out.Agents, c.GetJSON(ctx, "/agents", q, &out)
}

// Agent reads GET /agents/{agent_id}: the whole answer as a JSON object
// (profile, capabilities, counts, credit_balance, trust, liveness). An
// unknown agent is an *Error with status 404.
func (c *Client) Agent(ctx context.Context, agentID string) (map[string]any, error) {
	var out map[string]any
	return out, c.GetJSON(ctx, "/agents/"+url.PathEscape(agentID), nil, &out)
}

// CapabilityOffer is one row of GET /capabilities.
type CapabilityOffer struct {
	Name         string   `json:"name"`
	AgentCount   int      `json:"agent_count"`
	Agents       []string `json:"agents"`
	LastDeclared int64    `json:"last_declared"`
}

// Capabilities lists every offered capability, most offered first.
func (c *Client) Capabilities(ctx context.Context) ([]CapabilityOffer, error) {
	var out struct {
		Capabilities []CapabilityOffer `json:"capabilities"`
	}
	return out.Capabilities, c.GetJSON(ctx, "/capabilities", nil, &out)
}

// Provider is one result of GET /capabilities/search (SPEC §3.5).
type Provider struct {
	Provider    string          `json:"provider"`
	Name        string          `json:"name"`
	Capability  string          `json:"capability"`
	Metadata    json.RawMessage `json:"metadata"`
	Trust       float64         `json:"trust"`
	Rank        int             `json:"rank"`
	PriceUSD    *float64        `json:"price_usd"`
	LatencyMS   *float64        `json:"latency_ms"`
	DeclaredAt  int64           `json:"declared_at"`
	EventID     string          `json:"event_id"`
	IsCanonical bool            `json:"is_canonical"`
}

// FindProviders runs GET /capabilities/search with params (cap, q,
// min_trust, max_price_usd, max_latency_ms, supported_language, tag,
// sort_by, limit; SPEC §3.5).
func (c *Client) FindProviders(ctx context.Context, params url.Values) ([]Provider, error) {
	var out struct {
		Results []Provider `json:"results"`
	}
	return out.Results, c.GetJSON(ctx, "/capabilities/search", params, &out)
}

// Stats is GET /stats.
type Stats struct {
	Events           int64            `json:"events"`
	Agents           int64            `json:"agents"`
	RegisteredAgents int64            `json:"registered_agents"`
	Topics           int64            `json:"topics"`
	ByKind           map[string]int64 `json:"by_kind"`
	LastEventAt      int64            `json:"last_event_at"`
	StoredEvents     int64            `json:"stored_events"`
	Revoked          int64            `json:"revoked"`
	TS               int64            `json:"ts"`
}

// Stats reads the network counts.
func (c *Client) Stats(ctx context.Context) (*Stats, error) {
	var s Stats
	return &s, c.GetJSON(ctx, "/stats", nil, &s)
}

// State is GET /state (SPEC §5.5): the digest two relays holding the same
// events agree on.
type State struct {
	Seq     int64             `json:"seq"`
	Events  int64             `json:"events"`
	Revoked int64             `json:"revoked"`
	At      int64             `json:"at"`
	Digest  string            `json:"digest"`
	Version string            `json:"version"`
	Views   map[string]string `json:"views"`
}

// State reads the state digest (options: AsOf, Branch).
func (c *Client) State(ctx context.Context, opts ...ReadOption) (*State, error) {
	var s State
	return &s, c.GetJSON(ctx, "/state", applyOpts(nil, "at", opts), &s)
}

// Health is GET /agents/{agent_id}/health (SPEC §8).
type Health struct {
	AgentID    string  `json:"agent_id"`
	IsHealthy  bool    `json:"is_healthy"`
	UptimePct  float64 `json:"uptime_24h_pct"`
	LastSeenAt *int64  `json:"last_seen_at"`
}

// Health reads an agent's liveness.
func (c *Client) Health(ctx context.Context, agentID string) (*Health, error) {
	var h Health
	return &h, c.GetJSON(ctx, "/agents/"+url.PathEscape(agentID)+"/health", nil, &h)
}

// Task statuses of SPEC §5.3.
const (
	StatusPending   = "pending"
	StatusAccepted  = "accepted"
	StatusCompleted = "completed"
	StatusVerified  = "verified"
	StatusDisputed  = "disputed"
	StatusPaid      = "paid"
	StatusRefunded  = "refunded"
	StatusCancelled = "cancelled"
	StatusTimedOut  = "timed_out"
)

// Task is GET /task/{task_id} (SPEC §5.3), with the thread's events.
type Task struct {
	TaskID     string `json:"task_id"`
	Status     string `json:"status"`
	Phase      string `json:"phase"`
	Requester  string `json:"requester"`
	Capability string `json:"capability"`
	CreatedAt  int64  `json:"created_at"`
	Deadline   int64  `json:"deadline_unix"`
	HighStakes bool   `json:"high_stakes"`
	Provider   string `json:"provider"`
	Accept     *struct {
		EventID  string `json:"event_id"`
		Provider string `json:"provider"`
	} `json:"accept"`
	Result *struct {
		EventID   string `json:"event_id"`
		CreatedAt int64  `json:"created_at"`
	} `json:"result"`
	Consensus struct {
		Verdict   string `json:"verdict"` // passed, failed, disputed or ""
		Verifiers int    `json:"verifiers"`
	} `json:"consensus"`
	Payment *struct {
		EventID     string `json:"event_id"`
		Disposition string `json:"disposition"`
	} `json:"payment"`
	// The thread in full, oldest first (counting or not).
	Request  *protocol.Event   `json:"request"`
	Accepts  []*protocol.Event `json:"accepts"`
	Results  []*protocol.Event `json:"results"`
	Verifies []*protocol.Event `json:"verifies"`
	Payments []*protocol.Event `json:"payments"`
	Cancels  []*protocol.Event `json:"cancels"`
}

// Settled reports whether the task reached an end: paid, refunded,
// cancelled or timed out.
func (t *Task) Settled() bool {
	switch t.Status {
	case StatusPaid, StatusRefunded, StatusCancelled, StatusTimedOut:
		return true
	}
	return false
}

// ResultEvent returns the counting kind 52, nil when there is none.
func (t *Task) ResultEvent() *protocol.Event {
	if t.Result == nil {
		return nil
	}
	for _, e := range t.Results {
		if e.ID == t.Result.EventID {
			return e
		}
	}
	return nil
}

// Task reads a task (options: Branch). Every event of the thread is
// verified; an unknown task is an *Error with status 404.
func (c *Client) Task(ctx context.Context, taskID string, opts ...ReadOption) (*Task, error) {
	var t Task
	if err := c.GetJSON(ctx, "/task/"+url.PathEscape(taskID), applyOpts(nil, "", opts), &t); err != nil {
		return nil, err
	}
	all := append([]*protocol.Event{}, t.Accepts...)
	for _, l := range [][]*protocol.Event{t.Results, t.Verifies, t.Payments, t.Cancels} {
		all = append(all, l...)
	}
	if t.Request != nil {
		all = append(all, t.Request)
	}
	for _, e := range all {
		if err := VerifyEvent(e); err != nil {
			return nil, ErrBadEvent
		}
	}
	return &t, nil
}

// Tasks lists tasks newest first; params filter them (capability,
// status, requester, provider, limit). The rows are Task without the
// thread's events.
func (c *Client) Tasks(ctx context.Context, params url.Values, opts ...ReadOption) ([]Task, error) {
	var out struct {
		Tasks []Task `json:"tasks"`
	}
	return out.Tasks, c.GetJSON(ctx, "/tasks", applyOpts(params, "", opts), &out)
}

// Room is one topic of GET /rooms.
type Room struct {
	Topic          string `json:"topic"`
	Messages       int64  `json:"messages"`
	LastActivityAt int64  `json:"last_activity_at"`
}

// Rooms lists every topic (t tag) in use, most recently active first.
func (c *Client) Rooms(ctx context.Context) ([]Room, error) {
	var out struct {
		Rooms []Room `json:"rooms"`
	}
	return out.Rooms, c.GetJSON(ctx, "/rooms", nil, &out)
}
