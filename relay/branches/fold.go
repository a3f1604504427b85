// Package branches is the emergency-fork capability (seed §11, SPEC §17):
// checkpoints (kind 12), rollback proposals (kind 13), the branches a
// rollback creates, and bans (kind 14). Its pure part, Fold, derives all of
// it from the set of stored events and an evaluation time (D6); its
// adapter, Module, serves GET /checkpoints, /rollbacks and /branches and
// checks each checkpoint's state_hash against this relay's own log.
package branches

import (
	"cmp"
	"encoding/hex"
	"slices"
	"strings"
	"sync"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/trust"
)

// Rules of SPEC §17 (seed §11).
const (
	// TopPercent and TopFloor define the high-trust set at a time T: the
	// agents of rank 1..max(TopFloor, ceil(TopPercent% of ranked agents))
	// whose weighted score is positive, in the trust graph of the votes
	// created at or before T.
	TopPercent = 1
	TopFloor   = 10
	// MinEndorsers is how many distinct members of the high-trust set at
	// as_of (the author and valid cosigners) a checkpoint or a ban needs.
	MinEndorsers = 3
	// QuietPeriod is how long after its first event a rollback proposal
	// can gather support (seconds).
	QuietPeriod = 6 * 3600
)

// stamped is an event of kinds 12–14 with its judged cosignatures,
// verified once when it is added.
type stamped struct {
	ev     *protocol.Event
	cosign []protocol.Cosignature
}

// Fold holds the events the capability reads: votes (kind 6, for the
// trust graph at past times), checkpoints, proposals, bans, relay
// announcements and branch-tagged events. It is safe for concurrent use.
type Fold struct {
	// sovereign and revokedRelay are Options.Sovereign and
	// Options.RevokedRelay (nil: none).
	sovereign    func(at int64) []SovereignRollback
	revokedRelay func(keyOrURL string, at int64) bool

	mu        sync.Mutex
	votes     map[string]*protocol.Event
	special   map[string]*stamped // kinds 12, 13, 14
	announces map[string]*protocol.Event
	// tagged maps a branch id to the events tagging it (id → created_at).
	tagged map[string]map[string]int64
	// ids are every folded event's id, time and governance bit, for the
	// forks' roots (roots.go); roots remembers each resolved fork's root.
	ids *idTable
	// agents holds one copy of each agent id the kept votes name, so a
	// vote keeps no string of the parsed event it came from.
	agents map[string]string
	roots  map[string]rootRef
	// topAt caches the high-trust set over the votes created at or
	// before a time; a vote added or removed drops the entries it changes.
	topAt map[int64]TopSet
	// gen changes with every event the view reads; current caches the
	// view for (gen, minute).
	gen     uint64
	current struct {
		gen  uint64
		at   int64
		view *View
	}
	// nbans counts the kind 14 events; version changes with every vote or
	// ban, and banned caches the banned agents for (version, minute).
	nbans   int
	version uint64
	banned  struct {
		version uint64
		at      int64
		agents  map[string]string
	}
}

// kindSovereignAct is the kind of governance's sovereign acts (seed §15).
const kindSovereignAct = 30

// SovereignRollback is a valid sovereign rollback_to act: its event id,
// its time and the checkpoint event it names.
type SovereignRollback struct {
	ActID      string
	At         int64
	Checkpoint string
}

// NewFold returns an empty fold.
func NewFold() *Fold {
	return &Fold{votes: map[string]*protocol.Event{}, special: map[string]*stamped{},
		announces: map[string]*protocol.Event{}, tagged: map[string]map[string]int64{},
		topAt: map[int64]TopSet{}, roots: map[string]rootRef{}, ids: newIDTable(), agents: map[string]string{}}
}

// Add folds one stored, non-revoked event in.
func (f *Fold) Add(e *protocol.Event) { f.apply(e, true) }

// Remove withdraws an event its author revoked.
func (f *Fold) Remove(e *protocol.Event) { f.apply(e, false) }

func (f *Fold) apply(e *protocol.Event, add bool) {
	var cs []protocol.Cosignature
	if add && (e.Kind == protocol.KindCheckpoint || e.Kind == protocol.KindRollback || e.Kind == protocol.KindBan) {
		cs = protocol.Cosignatures(e) // verify outside the lock
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if e.Kind == protocol.KindTrustVote || e.Kind == protocol.KindBan {
		f.version++
	}
	if _, had := f.special[e.ID]; e.Kind == protocol.KindBan && add != had {
		if add {
			f.nbans++
		} else {
			f.nbans--
		}
	}
	tags := branchTags(e)
	switch e.Kind {
	case protocol.KindTrustVote, protocol.KindCheckpoint, protocol.KindRollback, protocol.KindBan, protocol.KindRelayAnnounce,
		kindSovereignAct: // a rollback_to may activate a rollback
		f.gen++
	default:
		if len(tags) > 0 {
			f.gen++
		}
	}
	switch e.Kind {
	case protocol.KindTrustVote:
		if add {
			v := f.slimVote(e)
			f.votes[v.ID] = v
		} else {
			delete(f.votes, e.ID)
		}
		for t := range f.topAt {
			if t >= e.CreatedAt {
				delete(f.topAt, t)
			}
		}
	case protocol.KindCheckpoint, protocol.KindRollback, protocol.KindBan:
		setOrDelete(f.special, e.ID, &stamped{e, cs}, add)
	case protocol.KindRelayAnnounce:
		setOrDelete(f.announces, e.ID, e, add)
	}
	f.indexID(e, add)
	for _, b := range tags {
		if f.tagged[b] == nil {
			f.tagged[b] = map[string]int64{}
		}
		if add {
			f.tagged[b][e.ID] = e.CreatedAt
		} else if delete(f.tagged[b], e.ID); len(f.tagged[b]) == 0 {
			delete(f.tagged, b)
		}
	}
}

func setOrDelete[V any](m map[string]V, k string, v V, add bool) {
	if add {
		m[k] = v
	} else {
		delete(m, k)
	}
}

// TopSet is the high-trust set at a time: agent → weight, the agents in
// rank order.
type TopSet struct {
	At     int64              `json:"at"`
	N      int                `json:"top_n"`
	Agents []string           `json:"agents"`
	Weight map[string]float64 `json:"-"`
	Total  float64            `json:"total_weight"`
}

// TopHour is the grain of the high-trust set's time: top(T) is taken at
// the whole hour at or before T, so hostile events naming many distinct
// times cost at most one trust computation per hour of history.
const TopHour = 3600

// topTime returns the time top(t) is evaluated at.
func topTime(t int64) int64 {
	if t < 0 {
		return t - ((t%TopHour)+TopHour)%TopHour
	}
	return t - t%TopHour
}

// topSet returns the high-trust set at topTime(t): trust.v1 over the votes
// created at or before it. Only the set is cached (a few agents), never
// the trust snapshot; a vote created at or before a cached time drops it.
// Callers hold mu.
func (f *Fold) topSet(t int64) TopSet {
	t = topTime(t)
	if ts, ok := f.topAt[t]; ok {
		return ts
	}
	g := trust.NewGraph(trust.Options{})
	for _, v := range f.votes {
		if v.CreatedAt <= t {
			g.Add(v)
		}
	}
	s := g.Compute(t)
	n := max(TopFloor, (TopPercent*s.RankedCount()+99)/100)
	ts := TopSet{At: s.Now, N: n, Weight: map[string]float64{}}
	for _, row := range s.TrustGraph(0, n) {
		if row.Rank < 1 || row.Rank > n || row.WeightedScore <= 0 {
			continue
		}
		w := round6(s.Weight(row.AgentID))
		ts.Agents = append(ts.Agents, row.AgentID)
		ts.Weight[row.AgentID] = w
		ts.Total += w
	}
	ts.Total = round6(ts.Total)
	f.topAt[t] = ts
	return ts
}

// Endorser is one agent endorsing a checkpoint, proposal or ban: its
// author or a cosigner.
type Endorser struct {
	AgentID string  `json:"agent_id"`
	EventID string  `json:"event_id"`
	Role    string  `json:"role"` // "author" or "cosigner"
	Valid   bool    `json:"valid"`
	Reason  string  `json:"reason,omitempty"`
	Top     bool    `json:"top"`
	Weight  float64 `json:"weight"`
}

// endorsers lists the author and every cosign tag of s, judged against
// top: an endorser counts when its signature is valid and it is in top.
func endorsers(s *stamped, top TopSet) []Endorser {
	out := []Endorser{{AgentID: s.ev.AgentID, EventID: s.ev.ID, Role: "author", Valid: true}}
	for _, c := range s.cosign {
		out = append(out, Endorser{AgentID: c.AgentID, EventID: s.ev.ID, Role: "cosigner", Valid: c.Valid, Reason: c.Reason})
	}
	for i := range out {
		w, ok := top.Weight[out[i].AgentID]
		out[i].Top = ok && out[i].Valid
		if out[i].Top {
			out[i].Weight = w
		}
		if out[i].Valid && !ok {
			out[i].Reason = "not_top_trust"
		}
	}
	return out
}

// sorted returns the stamped events of kind created at or before at, by
// (created_at, id). Callers hold mu.
func (f *Fold) sorted(kind int64, at int64) []*stamped {
	var out []*stamped
	for _, s := range f.special {
		if s.ev.Kind == kind && s.ev.CreatedAt <= at {
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b *stamped) int {
		return cmp.Or(cmp.Compare(a.ev.CreatedAt, b.ev.CreatedAt), cmp.Compare(a.ev.ID, b.ev.ID))
	})
	return out
}

// contentKey groups events of one kind with the same content (the
// cosigned digest).
func contentKey(e *protocol.Event) string {
	d, err := protocol.CosignDigest(e.Kind, e.Content)
	if err != nil {
		return "raw:" + e.Content
	}
	return hex.EncodeToString(d[:])
}

// slimVote keeps what the trust graph reads of a kind 6 (id, author, time,
// content, p tags), not its signature or other tags.
func (f *Fold) slimVote(e *protocol.Event) *protocol.Event {
	v := &protocol.Event{ID: strings.Clone(e.ID), AgentID: f.intern(e.AgentID), CreatedAt: e.CreatedAt, Kind: e.Kind,
		Content: strings.Clone(e.Content)}
	for _, t := range e.Tags {
		if len(t) >= 2 && t[0] == "p" {
			p := strings.Clone(t[1])
			if protocol.IsHex64(p) {
				p = f.intern(p)
			}
			v.Tags = append(v.Tags, []string{"p", p})
		}
	}
	return v
}

// intern returns the fold's copy of an agent id. Callers hold mu.
func (f *Fold) intern(id string) string {
	if s, ok := f.agents[id]; ok {
		return s
	}
	s := strings.Clone(id)
	f.agents[s] = s
	return s
}
