package branches

import (
	"math"
	"slices"
	"strings"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/trust"
)

// CheckpointView is one kind 12 event as judged at an evaluation time.
type CheckpointView struct {
	ID        string `json:"id"`
	Author    string `json:"author"`
	CreatedAt int64  `json:"created_at"`
	Checkpoint
	// Valid reports whether at least MinEndorsers members of the
	// high-trust set at as_of endorse it; Reason says why not.
	Valid     bool       `json:"valid"`
	Invalid   string     `json:"invalid_reason,omitempty"`
	TopN      int        `json:"top_n"`
	Required  int        `json:"required"`
	Endorsed  int        `json:"endorsed"`
	Endorsers []Endorser `json:"endorsers"`
}

// RollbackView is one rollback proposal: the kind 13 events with one
// content, pooled (each adds its author and cosigners as supporters).
type RollbackView struct {
	// ID is the first event's id, by (created_at, id); Events lists all.
	ID     string   `json:"id"`
	Events []string `json:"events"`
	Proposal
	// Checkpoint is the valid checkpoint event targeted ("" if none).
	Checkpoint        string     `json:"checkpoint_event_id"`
	CheckpointAsOf    int64      `json:"checkpoint_as_of"`
	ProposedAt        int64      `json:"proposed_at"`
	QuietPeriodEndsAt int64      `json:"quiet_period_ends_at"`
	Weight            float64    `json:"weight"`
	TotalWeight       float64    `json:"total_trusted_weight"`
	Threshold         float64    `json:"threshold"`
	State             string     `json:"state"` // pending, activated, expired, invalid
	Invalid           string     `json:"invalid_reason,omitempty"`
	ActivatedAt       int64      `json:"activated_at,omitempty"`
	Branch            string     `json:"branch,omitempty"`
	Supporters        []Endorser `json:"supporters"`
	// SovereignAct is true for a rollback ordered by a sovereign act
	// (rollback_to) rather than proposed and cosigned (kind 13).
	SovereignAct bool `json:"sovereign_act,omitempty"`
}

// View is everything the fold derives at one evaluation time.
type View struct {
	At          int64            `json:"at"`
	Checkpoints []CheckpointView `json:"checkpoints"`
	Rollbacks   []RollbackView   `json:"rollbacks"`
	Branches    []Branch         `json:"branches"`
	Bans        []BanView        `json:"bans"`
	// known, spans and roots index Branches for Members and Known (index).
	known map[string]bool
	spans []span
	roots []*forkRoot
}

// Branch is one branch id with where it comes from. Window is, for main
// after rollbacks, the rolled-back spans (as_of, activated_at) its
// untagged events leave out.
type Branch struct {
	ID          string `json:"id"`
	CreatedFrom string `json:"created_from"` // "genesis", "rollback", "voluntary_fork"
	Rollback    string `json:"rollback_proposal,omitempty"`
	// Until is, for a pre-rollback branch, its activation time: untagged
	// events created before it belong to the branch.
	Until int64 `json:"until,omitempty"`
	// RootPrefix is a voluntary fork's root event id prefix; Root the
	// root event, the earliest by (created_at, id) with that prefix ("" if
	// none is stored), RootAt its created_at.
	RootPrefix string `json:"root_prefix,omitempty"`
	Root       string `json:"root_event_id,omitempty"`
	RootAt     int64  `json:"root_created_at,omitempty"`
}

// Evaluate derives the view at time at from the events folded in, only
// counting events created at or before at.
func (f *Fold) Evaluate(at int64) View {
	f.mu.Lock()
	defer f.mu.Unlock()
	v := View{At: at}
	v.Checkpoints = f.checkpoints(at)
	v.Rollbacks = append(f.rollbacks(at, v.Checkpoints), f.sovereignRollbacks(at, v.Checkpoints)...)
	v.Branches = f.branchList(v.Rollbacks)
	v.index()
	v.indexRoots(f.root)
	v.Bans = f.bans(at)
	return v
}

// Current returns the view at EvalTime(now), the time the other views
// are evaluated at for a request, cached until an event it reads changes
// or the minute does. Callers must not change it.
func (f *Fold) Current(now int64) *View {
	at := trust.EvalTime(now)
	f.mu.Lock()
	if c := f.current; c.view != nil && c.gen == f.gen && c.at == at {
		f.mu.Unlock()
		return c.view
	}
	gen := f.gen
	f.mu.Unlock()
	v := f.Evaluate(at)
	f.mu.Lock()
	if f.gen == gen {
		f.current.gen, f.current.at, f.current.view = gen, at, &v
	}
	f.mu.Unlock()
	return &v
}

// Simple reports whether v has a single branch, main, holding every
// event: no activated rollback and no voluntary fork.
func (v *View) Simple() bool { return len(v.Branches) == 1 }

// checkpoints judges every checkpoint created at or before at.
func (f *Fold) checkpoints(at int64) []CheckpointView {
	out := []CheckpointView{}
	for _, s := range f.sorted(protocol.KindCheckpoint, at) {
		cv := CheckpointView{ID: s.ev.ID, Author: s.ev.AgentID, CreatedAt: s.ev.CreatedAt, Required: MinEndorsers}
		c, err := ParseCheckpoint(s.ev)
		if err != nil {
			cv.Invalid = reasonOf(err)
			out = append(out, cv)
			continue
		}
		cv.Checkpoint = c
		top := f.topSet(c.AsOf)
		cv.TopN = top.N
		cv.Endorsers = endorsers(s, top)
		cv.Endorsed = countTop(cv.Endorsers)
		cv.Valid = cv.Endorsed >= MinEndorsers
		if !cv.Valid {
			cv.Invalid = "too_few_top_trust_endorsers"
		}
		out = append(out, cv)
	}
	return out
}

// countTop counts the distinct agents among es that count.
func countTop(es []Endorser) int {
	seen := map[string]bool{}
	for _, e := range es {
		if e.Top {
			seen[e.AgentID] = true
		}
	}
	return len(seen)
}

// targetCheckpoint returns the earliest valid checkpoint named id.
func targetCheckpoint(cps []CheckpointView, id string) *CheckpointView {
	for i := range cps {
		if cps[i].Valid && cps[i].CheckpointID == id {
			return &cps[i]
		}
	}
	return nil
}

// rollbacks judges every proposal created at or before at.
func (f *Fold) rollbacks(at int64, cps []CheckpointView) []RollbackView {
	groups := map[string][]*stamped{}
	var order []string
	for _, s := range f.sorted(protocol.KindRollback, at) {
		k := contentKey(s.ev)
		if groups[k] == nil {
			order = append(order, k)
		}
		groups[k] = append(groups[k], s)
	}
	out := []RollbackView{}
	for _, k := range order {
		out = append(out, f.rollback(at, groups[k], cps))
	}
	return out
}

// rollback judges one proposal from its events, in (created_at, id) order.
func (f *Fold) rollback(at int64, evs []*stamped, cps []CheckpointView) RollbackView {
	first := evs[0].ev
	rv := RollbackView{ID: first.ID, ProposedAt: first.CreatedAt, QuietPeriodEndsAt: first.CreatedAt + QuietPeriod, State: "invalid", Supporters: []Endorser{}}
	for _, s := range evs {
		rv.Events = append(rv.Events, s.ev.ID)
	}
	p, err := ParseProposal(first)
	if err != nil {
		rv.Invalid = reasonOf(err)
		return rv
	}
	rv.Proposal = p
	cp := targetCheckpoint(cps, p.TargetCheckpoint)
	if cp == nil {
		rv.Invalid = "unknown_checkpoint: no valid checkpoint has this checkpoint_id"
		return rv
	}
	rv.Checkpoint, rv.CheckpointAsOf = cp.ID, cp.AsOf
	top := f.topSet(cp.AsOf)
	rv.TotalWeight = top.Total
	rv.Threshold = round6(top.Total * 2 / 3)
	counted := map[string]bool{}
	for _, s := range evs {
		if s.ev.CreatedAt > rv.QuietPeriodEndsAt {
			break
		}
		for _, e := range endorsers(s, top) {
			if e.Top && counted[e.AgentID] {
				e.Top, e.Reason = false, "duplicate"
			}
			if e.Top {
				counted[e.AgentID] = true
				rv.Weight = round6(rv.Weight + e.Weight)
			}
			rv.Supporters = append(rv.Supporters, e)
		}
		if rv.ActivatedAt == 0 && top.Total > 0 && 3*micro(rv.Weight) >= 2*micro(top.Total) {
			rv.ActivatedAt = s.ev.CreatedAt
		}
	}
	switch {
	case rv.ActivatedAt != 0:
		rv.State = "activated"
	case at < rv.QuietPeriodEndsAt:
		rv.State = "pending"
	default:
		rv.State = "expired"
	}
	return rv
}

// sovereignRollbacks judges the rollbacks sovereign acts ordered at or
// before at: activated at the act's time when the named checkpoint event
// is a valid checkpoint, invalid otherwise.
func (f *Fold) sovereignRollbacks(at int64, cps []CheckpointView) []RollbackView {
	if f.sovereign == nil {
		return nil
	}
	var out []RollbackView
	for _, sr := range f.sovereign(at) {
		if sr.At > at {
			continue
		}
		rv := RollbackView{ID: sr.ActID, Events: []string{sr.ActID}, ProposedAt: sr.At, QuietPeriodEndsAt: sr.At,
			State: "invalid", Supporters: []Endorser{}, SovereignAct: true}
		rv.Reason = "sovereign act rollback_to"
		for _, cp := range cps {
			if cp.ID == sr.Checkpoint && cp.Valid {
				rv.TargetCheckpoint, rv.Checkpoint, rv.CheckpointAsOf = cp.CheckpointID, cp.ID, cp.AsOf
			}
		}
		if rv.Checkpoint == "" {
			rv.Invalid = "unknown_checkpoint: the act names no valid checkpoint event"
		} else {
			rv.State, rv.ActivatedAt = "activated", sr.At
		}
		out = append(out, rv)
	}
	return out
}

// branchList names the branches: main, one pre-rollback branch per
// activated rollback (suffix 8 hex of its id, 12 or 16 on collision), and
// every voluntary fork named by a branch tag.
func (f *Fold) branchList(rbs []RollbackView) []Branch {
	out := []Branch{{ID: "main", CreatedFrom: "genesis"}}
	var ids []string
	for _, r := range rbs {
		if r.State == "activated" {
			ids = append(ids, r.ID)
		}
	}
	for i := range rbs {
		if rbs[i].State != "activated" {
			continue
		}
		rbs[i].Branch = "pre-rollback-" + uniquePrefix(rbs[i].ID, ids)
		out = append(out, Branch{ID: rbs[i].Branch, CreatedFrom: "rollback", Rollback: rbs[i].ID, Until: rbs[i].ActivatedAt})
	}
	var forks []string
	for b := range f.tagged {
		if strings.HasPrefix(b, "b-") {
			forks = append(forks, b)
		}
	}
	slices.Sort(forks)
	for _, b := range forks {
		br := Branch{ID: b, CreatedFrom: "voluntary_fork", RootPrefix: strings.TrimPrefix(b, "b-")}
		if r := f.root(b); r.ok {
			br.Root, br.RootAt = r.id, r.at
		}
		out = append(out, br)
	}
	return out
}

// uniquePrefix returns the first 8 hex of id, or 12, or 16, the shortest
// no other of ids shares (§11.3.1 collision rule).
func uniquePrefix(id string, ids []string) string {
	for _, n := range []int{8, 12} {
		clash := false
		for _, o := range ids {
			clash = clash || (o != id && o[:n] == id[:n])
		}
		if !clash {
			return id[:n]
		}
	}
	return id[:16]
}

func round6(x float64) float64 { return math.Round(x*1e6) / 1e6 }

// micro returns x in millionths, so weights compare exactly.
func micro(x float64) int64 { return int64(math.Round(x * 1e6)) }
