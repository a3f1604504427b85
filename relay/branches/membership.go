package branches

import (
	"encoding/json"
	"slices"
	"strings"

	"github.com/anp2net/relay/protocol"
)

// Members returns the branches of v that e belongs to (SPEC §17.3). Only
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
	inWindow := false
	for _, sp := range v.spans {
		inWindow = inWindow || (e.CreatedAt > sp.asOf && e.CreatedAt < sp.until)
	}
	var out []string
	governance := e.Kind == protocol.KindCheckpoint || e.Kind == protocol.KindRollback || e.Kind == protocol.KindBan
	if governance || !inWindow && (len(tags) == 0 || slices.Contains(tags, "main")) {
		out = append(out, "main")
	}
	for _, sp := range v.spans {
		if e.CreatedAt < sp.until || slices.Contains(tags, sp.id) {
			out = append(out, sp.id)
		}
	}
	forks := len(out)
	for _, t := range tags {
		if strings.HasPrefix(t, "b-") {
			out = append(out, t)
		}
	}
	slices.Sort(out[forks:]) // branch order: forks are listed sorted
	return out
}

// span is an activated rollback's pre-rollback branch and rolled-back
// span (as_of, until).
type span struct {
	id          string
	asOf, until int64
}

// index fills v's lookup tables from its branches and rollbacks.
func (v *View) index() {
	v.known = make(map[string]bool, len(v.Branches))
	for _, b := range v.Branches {
		v.known[b.ID] = true
		if b.CreatedFrom == "rollback" {
			for _, r := range v.Rollbacks {
				if r.ID == b.Rollback {
					v.spans = append(v.spans, span{id: b.ID, asOf: r.CheckpointAsOf, until: b.Until})
				}
			}
		}
	}
}

// Known reports whether id names a branch of v.
func (v View) Known(id string) bool { return v.known[id] }

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
			URL       string `json:"url"`
		}
		json.Unmarshal([]byte(e.Content), &c)
		if f.revokedRelay != nil && (f.revokedRelay(a, at) || c.URL != "" && f.revokedRelay(strings.TrimRight(c.URL, "/"), at)) {
			continue // governance revoked this relay (revoke_relay)
		}
		if !ValidBranchID(c.Preferred) {
			c.Preferred = "main"
		}
		out[a] = c.Preferred
	}
	return out
}
