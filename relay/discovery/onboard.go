package discovery

import (
	"context"
	"slices"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/tasks"
)

// Onboarding sizes (seed §12.6, SPEC §18.10).
const (
	onboardNeighbors = 10
	onboardBeacons   = 20
	onboardFeed      = 10
	onboardTasks     = 20
)

// publishInfo adds the agent's top neighbours to the answer of its first
// kind 0 (§12.6 step 1: "the relay immediately returns the semantic
// neighborhood"). The fold already holds the profile when the publisher is
// answered, so an agent with no post yet is placed by its profile.
func (m *Module) publishInfo(e *protocol.Event) map[string]any {
	if e.Kind != protocol.KindProfile || !m.fold.FirstProfile(e) {
		return nil
	}
	return map[string]any{
		"neighbors":  m.fold.Neighbors(e.AgentID, onboardNeighbors),
		"onboarding": "/onboarding/" + e.AgentID,
	}
}

// FirstProfile reports whether e is its author's only (non-revoked) kind 0
// in the fold.
func (f *Fold) FirstProfile(e *protocol.Event) bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	p := f.profiles[e.AgentID]
	return len(p) == 1 && p[0].ID == e.ID
}

// onboardingInfo adds to GET /onboarding/{agent_id} what discovery offers
// a new agent (§12.6): its neighbours, the active beacons that want one of
// its capabilities or topics, a first feed (24 h) and the open tasks for
// its capabilities — each as reader may see it (§3.2, §18.6).
func (m *Module) onboardingInfo(row map[string]any, agent, reader string) {
	now := m.core.Now()
	neighbors := []Neighbor{}
	if !m.private(agent, reader) {
		neighbors = m.fold.Neighbors(agent, onboardNeighbors)
	}
	_, topics, caps := m.fold.Interests(agent)
	beacons := []Beacon{}
	all, _ := m.fold.Active(BeaconQuery{}, now)
	for _, b := range all {
		if len(beacons) == onboardBeacons {
			break
		}
		if b.AgentID != agent && (overlap(b.CapWanted, caps) || overlap(b.Topics, topics)) && m.sees(reader, b.ID, b.AgentID) {
			beacons = append(beacons, b)
		}
	}
	var feed any = []FeedItem{}
	if out, err := m.feed(context.Background(), agent, reader, 86400, onboardFeed); err == nil {
		feed = out["items"]
	}
	open := []tasks.TaskView{}
	w := m.core.Weights(now)
	for _, c := range caps {
		for _, t := range m.core.Views().Tasks.List(tasks.Filter{Capability: c, Status: tasks.StatusPending, Limit: onboardTasks}, now, w) {
			if len(open) < onboardTasks && t.Requester != agent && m.sees(reader, t.TaskID, t.Requester) &&
				!slices.ContainsFunc(open, func(x tasks.TaskView) bool { return x.TaskID == t.TaskID }) {
				open = append(open, t)
			}
		}
	}
	row["neighbors"], row["beacons"], row["feed"], row["open_tasks"] = neighbors, beacons, feed, open
	row["topics"], row["capabilities"] = nonNil(topics), nonNil(caps)
}
