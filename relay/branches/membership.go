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
//   - a voluntary fork b-… holds the events that tag it, its root (the
//     earliest event by (created_at, id) whose id has its prefix) and the
//     events before the root, by (created_at, id), that share a main or
//     pre-rollback branch with the root (its line).
func (v View) Members(e *protocol.Event) []string {
	tags := v.knownTags(branchTags(e))
	out := v.lines(e.CreatedAt, e.Kind, tags)
	forks := len(out)
	for _, t := range tags {
		if strings.HasPrefix(t, "b-") {
			out = append(out, t)
		}
	}
	for _, r := range v.roots {
		if slices.Contains(out[forks:], r.fork) {
			continue
		}
		if e.ID == r.id || r.before(e) && intersects(out[:forks], r.line) {
			out = append(out, r.fork)
		}
	}
	slices.Sort(out[forks:]) // branch order: forks are listed sorted
	return out
}

// In reports whether e belongs to branch under v: slices.Contains(
// v.Members(e), branch), without computing the other branches.
func (v View) In(e *protocol.Event, branch string) bool {
	if !v.Known(branch) {
		return false
	}
	tags := v.knownTags(branchTags(e))
	if !strings.HasPrefix(branch, "b-") {
		return slices.Contains(v.lines(e.CreatedAt, e.Kind, tags), branch)
	}
	if slices.Contains(tags, branch) {
		return true
	}
	for _, r := range v.roots {
		if r.fork == branch {
			return e.ID == r.id || r.before(e) && intersects(v.lines(e.CreatedAt, e.Kind, tags), r.line)
		}
	}
	return false
}

// knownTags keeps the tags naming a branch of v.
func (v View) knownTags(all []string) []string {
	var tags []string
	for _, t := range all {
		if v.Known(t) {
			tags = append(tags, t)
		}
	}
	return tags
}

// lines returns the main and pre-rollback branches of an event created at
// at, of kind, with the known branch tags tags.
func (v View) lines(at, kind int64, tags []string) []string {
	inWindow := false
	for _, sp := range v.spans {
		inWindow = inWindow || (at > sp.asOf && at < sp.until)
	}
	var out []string
	governance := kind == protocol.KindCheckpoint || kind == protocol.KindRollback || kind == protocol.KindBan
	if governance || !inWindow && (len(tags) == 0 || slices.Contains(tags, "main")) {
		out = append(out, "main")
	}
	for _, sp := range v.spans {
		if at < sp.until || slices.Contains(tags, sp.id) {
			out = append(out, sp.id)
		}
	}
	return out
}

// indexRoots records the roots of v's forks (root resolves one) with
// their lines. Call after index.
func (v *View) indexRoots(root func(fork string) rootRef) {
	for _, b := range v.Branches {
		if b.CreatedFrom != "voluntary_fork" {
			continue
		}
		if r := root(b.ID); r.ok {
			v.roots = append(v.roots, &forkRoot{fork: b.ID, id: r.id, at: r.at, line: v.lines(r.at, r.kind, v.knownTags(r.tags))})
		}
	}
}

func intersects(a, b []string) bool {
	for _, x := range a {
		if slices.Contains(b, x) {
			return true
		}
	}
	return false
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
