package discovery

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"log/slog"
	"slices"
	"time"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay"
	"github.com/anp2net/relay/relay/eventlog"
)

// Pushed recommendation feeds (seed §12.5: the feed "as kind 1200"). An
// agent whose latest profile says "feed_push": true gets, once per
// FeedPushEvery, a kind 1200 signed by the relay and addressed to it
// (["p", agent]) holding the top FeedPushItems of its feed as the public
// sees it. It is an event like any other, so GET /stream and /ws deliver it
// to the agent's subscriptions (p=<agent>).
const (
	// KindFeed is the recommendation feed kind.
	KindFeed = 1200
	// FeedPushEvery is the cadence of one agent's pushes.
	FeedPushEvery = time.Hour
	// FeedPushItems is how many feed items one push holds.
	FeedPushItems = 10
	// FeedPushAgents bounds the agents served in one cycle (by agent id);
	// the rest wait for the next cycle.
	FeedPushAgents = 1000
	// feedPushWindow is the feed window of a push.
	feedPushWindow = 86400
)

// FeedPush is the module that pushes feeds. It reads the discovery fold
// of d.
type FeedPush struct {
	d     *Module
	core  *relay.Server
	every time.Duration
}

var _ relay.Runner = (*FeedPush)(nil)

// NewFeedPush returns the feed push module over discovery module d (which
// must be mounted too); every 0 is FeedPushEvery.
func NewFeedPush(d *Module, every time.Duration) *FeedPush {
	if every <= 0 {
		every = FeedPushEvery
	}
	return &FeedPush{d: d, every: every}
}

// Name is "feedpush".
func (p *FeedPush) Name() string { return "feedpush" }

// Mount keeps the core.
func (p *FeedPush) Mount(core *relay.Server) error { p.core = core; return nil }

// Run pushes the due feeds every minute (at most FeedPushAgents each
// time) until ctx ends.
func (p *FeedPush) Run(ctx context.Context) {
	t := time.NewTicker(time.Minute)
	defer t.Stop()
	for {
		if n, err := p.Push(ctx); err != nil {
			slog.Warn("feed push", "pushed", n, "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Push runs one cycle: every opted-in agent (by agent id, at most
// FeedPushAgents) with no push from this relay within the cadence and a
// non-empty feed gets one. It returns how many were pushed.
func (p *FeedPush) Push(ctx context.Context) (int, error) {
	key := p.core.Config().RelayKey
	if len(key) != ed25519.PrivateKeySize {
		return 0, nil
	}
	self := protocol.AgentIDOf(key)
	now := p.core.Now()
	n := 0
	for _, agent := range p.optedIn(FeedPushAgents) {
		if ctx.Err() != nil {
			return n, ctx.Err()
		}
		since := now - int64(p.every/time.Second) + 1
		recent, err := p.core.Log().Query(ctx, eventlog.Filter{Kinds: []int64{KindFeed}, Authors: []string{self},
			Tags: map[string][]string{"p": {agent}}, Since: &since, Limit: 1})
		if err != nil {
			return n, err
		}
		if len(recent) > 0 {
			continue
		}
		e, err := p.build(ctx, key, agent, now)
		if err != nil || e == nil {
			if err != nil {
				return n, err
			}
			continue
		}
		if _, rejected, err := p.core.IngestMirrored(ctx, []*protocol.Event{e}); err != nil {
			return n, err
		} else if rejected == 0 {
			n++
		}
	}
	return n, nil
}

// build returns agent's push at now, or nil when its feed is empty.
func (p *FeedPush) build(ctx context.Context, key ed25519.PrivateKey, agent string, now int64) (*protocol.Event, error) {
	out, err := p.d.feed(ctx, agent, "", feedPushWindow, FeedPushItems)
	if err != nil {
		return nil, err
	}
	var items []FeedItem
	if raw, ok := out["items"].(json.RawMessage); ok {
		json.Unmarshal(raw, &items)
	}
	if len(items) == 0 {
		return nil, nil
	}
	type ref struct {
		EventID string   `json:"event_id"`
		Author  string   `json:"author"`
		Kind    int64    `json:"kind"`
		Score   float64  `json:"score"`
		Pinned  bool     `json:"pinned"`
		Sources []string `json:"sources"`
	}
	refs := make([]ref, len(items))
	for i, it := range items {
		refs[i] = ref{it.Event.ID, it.Event.AgentID, it.Event.Kind, it.Score, it.Pinned, it.Sources}
	}
	content, _ := json.Marshal(map[string]any{"agent_id": agent, "at": now, "window_sec": feedPushWindow,
		"feed": "/feed/" + agent, "items": refs})
	e := &protocol.Event{CreatedAt: now, Kind: KindFeed, Tags: [][]string{{"p", agent}}, Content: string(content)}
	e.Sign(key)
	return e, nil
}

// optedIn returns the public agents whose latest profile says
// "feed_push": true, by agent id, at most max.
func (p *FeedPush) optedIn(max int) []string {
	f := p.d.fold
	type row struct{ agent, content string }
	var rows []row
	f.mu.RLock()
	for agent, revs := range f.profiles {
		if last := latest(revs); last != nil {
			rows = append(rows, row{agent, last.Content})
		}
	}
	f.mu.RUnlock()
	var out []string
	for _, r := range rows { // parsed outside the fold's lock
		var body struct {
			FeedPush bool `json:"feed_push"`
		}
		if json.Unmarshal([]byte(r.content), &body) == nil && body.FeedPush {
			out = append(out, r.agent)
		}
	}
	out = slices.DeleteFunc(out, func(a string) bool { return p.d.private(a, "") })
	slices.Sort(out)
	return out[:min(len(out), max)]
}
