package branches

import (
	"encoding/json"
	"slices"

	"github.com/anp2net/relay/protocol"
)

// Members returns the branches of v that e belongs to (SPEC §13.3). Only
// branch tags naming a branch of v count (an event whose tags name none
// is untagged):
//   - a pre-rollback branch holds every event created before its
//     rollback's activation, and later events that tag it;
//   - main holds the untagged events and those tagging main, except the
//     ones created inside a rolled-back span (checkpoint as_of,
//     activation): no tag brings those back into main;
//   - checkpoints, proposals and bans (kinds 12–14) are in main whatever
//     their time: they are what the branches derive from;
//   - a voluntary fork b-… holds the events that tag it.
func (v View) Members(e *protocol.Event) []string {
	var tags []string
	for _, t := range branchTags(e) {
		if v.Known(t) {
			tags = append(tags, t)
		}
	}
	var out []string
	inWindow := false
	for _, b := range v.Branches {
		if b.CreatedFrom != "rollback" {
			continue
		}
		asOf := v.rollbackAsOf(b.Rollback)
		inWindow = inWindow || (e.CreatedAt > asOf && e.CreatedAt < b.Until)
	}
	governance := e.Kind == protocol.KindCheckpoint || e.Kind == protocol.KindRollback || e.Kind == protocol.KindBan
	if governance || !inWindow && (len(tags) == 0 || slices.Contains(tags, "main")) {
		out = append(out, "main")
	}
	for _, b := range v.Branches {
		switch {
		case b.ID == "main":
		case b.CreatedFrom == "rollback" && (e.CreatedAt < b.Until || slices.Contains(tags, b.ID)):
			out = append(out, b.ID)
		case b.CreatedFrom == "voluntary_fork" && slices.Contains(tags, b.ID):
			out = append(out, b.ID)
		}
	}
	return out
}

func (v View) rollbackAsOf(id string) int64 {
	for _, r := range v.Rollbacks {
		if r.ID == id {
			return r.CheckpointAsOf
		}
	}
	return 0
}

// Known reports whether id names a branch of v.
func (v View) Known(id string) bool {
	for _, b := range v.Branches {
		if b.ID == id {
			return true
		}
	}
	return false
}

// Preferences returns each relay's preferred branch from its latest kind
// 10 announcement created at or before at (default main).
func (f *Fold) Preferences(at int64) map[string]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	latest := map[string]*protocol.Event{}
	for _, e := range f.announces {
		if e.CreatedAt > at {
			continue
		}
		if l := latest[e.AgentID]; l == nil || e.CreatedAt > l.CreatedAt || (e.CreatedAt == l.CreatedAt && e.ID > l.ID) {
			latest[e.AgentID] = e
		}
	}
	out := map[string]string{}
	for a, e := range latest {
		var c struct {
			Preferred string `json:"preferred_branch"`
		}
		if json.Unmarshal([]byte(e.Content), &c) != nil || !ValidBranchID(c.Preferred) {
			c.Preferred = "main"
		}
		out[a] = c.Preferred
	}
	return out
}
