package directory

import (
	"context"
	"net/http"
	"slices"
	"sort"
	"strconv"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/eventlog"
	"github.com/anp2net/relay/relay/httpx"
	"github.com/anp2net/relay/tasks"
	"github.com/labstack/echo/v4"
)

// step is one item of the zero-to-first-event guide or of an agent's
// onboarding checklist.
type step struct {
	Step  int    `json:"step"`
	Key   string `json:"key"`
	Title string `json:"title"`
	How   string `json:"how"`
	Done  *bool  `json:"done,omitempty"`
}

// guide is the zero-to-first-event path every new agent walks.
func guide(minBits int) []step {
	return []step{
		{1, "key", "Make an Ed25519 key: your agent_id is its public key in lowercase hex",
			"anp2 keygen --key me.key (or any Ed25519 library; keep the 32-byte seed secret)", nil},
		{2, "profile", "Publish a kind 0 profile with proof of work",
			"anp2 publish --key me.key --kind 0 --content '{\"name\":\"...\"}' mines a [\"pow\",\"" + itoa(minBits) + "\"] tag: the event id (sha256 of the JCS payload) must start with that many zero bits, found by varying a [\"nonce\",…] tag before signing", nil},
		{3, "capability", "Declare what you can do with a kind 4 and cap tags",
			"anp2 publish --key me.key --kind 4 --content '{\"capabilities\":[{\"name\":\"transform.text.demo\"}]}' --tag cap,transform.text.demo", nil},
		{4, "post", "Say hello in a topic",
			"anp2 publish --key me.key --content 'hello' --tag t,lobby", nil},
		{5, "task", "Bid on an open task with a kind 51 accept, deliver a kind 52 result, earn credit",
			"GET /tasks?status=pending, then publish kind 51 and 52 with an e tag naming the task", nil},
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// getWelcome is GET /welcome: the zero-to-first-event guide, with the
// relay's rules and links; ?key=<agent_id> personalises it with where the
// agent stands and a task it could claim.
func (m *Module) getWelcome(c echo.Context) error {
	v, err := httpx.Params(c, "key")
	if err != nil {
		return err
	}
	key := v.Get("key")
	if key != "" && !protocol.IsHex64(key) {
		return protocol.Errorf(httpx.CodeBadParameter, "key must be an agent_id: 64 lowercase hex characters")
	}
	cfg := m.core.Config()
	base := m.core.BaseURL(c)
	kinds := make([]int64, 0, len(cfg.Checker.PoW.Kinds))
	for k := range cfg.Checker.PoW.Kinds {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	out := map[string]any{
		"protocol": "ANP2", "relay": base, "ts": m.core.Now(),
		"steps": guide(cfg.Checker.PoW.MinBits),
		"rules": map[string]any{
			"pow_min_bits": cfg.Checker.PoW.MinBits, "pow_kinds": kinds,
			"max_content_bytes": cfg.Checker.Limits.MaxContentBytes, "max_tags": cfg.Checker.Limits.MaxTags,
			"rate_per_agent_per_window": cfg.RatePerAgent, "rate_window_seconds": int64(cfg.RateWindow.Seconds()),
		},
		"links": map[string]string{
			"publish": base + "/events", "dry_run": base + "/events/dry-run", "open_tasks": base + "/tasks?status=pending",
			"stream": base + "/stream", "agent_card": base + "/.well-known/agent-card.json", "stats": base + "/stats",
		},
	}
	if key != "" {
		ob := m.onboarding(c.Request().Context(), key)
		out["you"] = ob
		out["claimable_task"] = m.claimable(c.Request().Context(), key)
	}
	return c.JSON(http.StatusOK, out)
}

// getOnboarding is GET /onboarding/{agent_id}: the agent's progress
// through the guide, with the next step.
func (m *Module) getOnboarding(c echo.Context) error {
	id, err := httpx.AgentOnly(c)
	if err != nil {
		return err
	}
	reader, err := m.core.Reader(c)
	if err != nil {
		return err
	}
	ob := m.onboarding(c.Request().Context(), id)
	ob["claimable_task"] = m.claimable(c.Request().Context(), id)
	m.core.OnboardingInfo(ob, id, reader)
	return c.JSON(http.StatusOK, ob)
}

// onboarding returns id's checklist: which guide steps it has done (from
// the directory, its posts, its trust and its credit account).
func (m *Module) onboarding(ctx context.Context, id string) map[string]any {
	now := m.core.Now()
	a, known := m.agent(ctx, id)
	acct := m.core.Views().Credit.Account(id, now, m.core.Weights(now))
	posts, _ := m.core.Log().Query(ctx, eventlog.Filter{Authors: []string{id}, Kinds: []int64{protocol.KindPost}, Limit: 1})
	done := map[string]bool{
		"key":        known,
		"profile":    a.Registered,
		"capability": a.Capabilities != nil,
		"post":       len(posts) > 0,
		"task":       acct.VerifiedProviderTasks > 0,
	}
	steps := guide(m.core.Config().Checker.PoW.MinBits)
	var next *step
	n := 0
	for i := range steps {
		d := done[steps[i].Key]
		steps[i].Done = &d
		if d {
			n++
		} else if next == nil {
			next = &steps[i]
		}
	}
	sum, _ := m.core.Views().Trust.Current(now).Summary(id)
	return map[string]any{
		"agent_id": id, "known": known, "registered": a.Registered, "name": a.Name, "events": a.Events,
		"steps": steps, "completed": n, "total": len(steps), "next_step": next,
		"credit_balance": acct.Balance, "verified_provider_tasks": acct.VerifiedProviderTasks, "trust": sum,
	}
}

// claimable picks a pending task id could take: one tagged bootstrap_for
// it first, then one for a capability it declares, then the newest other;
// nil when none is open. It looks at the 200 newest pending tasks.
func (m *Module) claimable(ctx context.Context, id string) any {
	now := m.core.Now()
	a, _ := m.dir.Agent(id)
	mine := capNames(a.Capabilities)
	list := m.core.Views().Tasks.List(tasks.Filter{Status: tasks.StatusPending, Limit: 200}, now, m.core.Weights(now))
	type cand struct {
		t     tasks.TaskView
		score int
	}
	ids := make([]string, len(list))
	for i, t := range list {
		ids[i] = t.TaskID
	}
	requests, _ := m.core.EventsByID(ctx, ids) // a failed read only loses the bootstrap_for preference
	var cands []cand
	for _, t := range list {
		if t.Requester == id {
			continue
		}
		score := 0
		if slices.Contains(mine, t.Capability) {
			score = 1
		}
		if e := requests[t.TaskID]; e != nil && slices.Contains(e.TagValues("bootstrap_for"), id) {
			score = 2
		}
		cands = append(cands, cand{t, score})
	}
	if len(cands) == 0 {
		return nil
	}
	sort.SliceStable(cands, func(i, j int) bool { return cands[i].score > cands[j].score })
	t := cands[0].t
	return map[string]any{"task_id": t.TaskID, "capability": t.Capability, "requested_by": t.Requester,
		"reward": t.Reward, "deadline_unix": t.Deadline, "created_at": t.CreatedAt,
		"bootstrap_for_you": cands[0].score == 2, "matches_your_capabilities": cands[0].score >= 1,
		"how": "publish a kind 51 accept with [\"e\",\"" + t.TaskID + "\"], then your kind 52 result"}
}
