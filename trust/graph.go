package trust

import (
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anp2net/relay/protocol"
)

// MaxReasonRunes bounds the vote and flag reasons this package keeps and
// reports (§5.4.1: "truncated to 120 chars"), counted in runes.
const MaxReasonRunes = 120

// Options tune when published snapshots are refreshed. They never change a
// computed value, only how fresh the published one is.
type Options struct {
	// MinInterval is the least wall-clock time between two background
	// refreshes triggered by new events (default 1 s), which bounds the
	// refresh work under write load. A change of minute always triggers a
	// refresh.
	MinInterval time.Duration
	// MaxLag is how far (in seconds) the published snapshot's Now may trail
	// the request time before Current computes synchronously
	// instead of answering from it (default 300).
	MaxLag int64
	// Excluded, when set, returns the agents whose votes, flags and
	// weights do not count at evaluation time at (agents under a ban,
	// seed §11.5); the map is read, never changed. Kind 14 events change
	// the graph's version so snapshots are recomputed.
	Excluded func(at int64) map[string]bool
}

func (o Options) withDefaults() Options {
	if o.MinInterval == 0 {
		o.MinInterval = time.Second
	}
	if o.MaxLag == 0 {
		o.MaxLag = 300
	}
	return o
}

// voteRec is one stored kind 6 vote for one (voter, target) pair.
type voteRec struct {
	id        string
	createdAt int64
	score     float64
	reason    string
}

func (a *voteRec) less(b *voteRec) bool {
	if a.createdAt != b.createdAt {
		return a.createdAt < b.createdAt
	}
	return a.id < b.id
}

type pairKey struct{ voter, target int32 }

// pairState holds every live vote of one (voter, target) pair; latest is
// the index of the one that counts (-1 when none is left).
type pairState struct {
	key    pairKey
	recs   []voteRec
	latest int
}

func (p *pairState) relatest() {
	p.latest = -1
	for i := range p.recs {
		if p.latest < 0 || p.recs[p.latest].less(&p.recs[i]) {
			p.latest = i
		}
	}
}

// Graph is the trust.v1 view: it folds kind 6 votes and answers trust
// queries. It is safe for one writer (Add, Remove) and many readers.
type Graph struct {
	opts Options

	mu      sync.RWMutex
	agents  agentTable
	pairIdx map[pairKey]int32 // pair → index into pairs
	pairs   []pairState       // every pair that ever had a vote
	inbound map[int32][]int32 // target → voters that ever had a pair with it
	// seen holds, per agent index, the sorted created_at of its live kind
	// 0 and kind 6 events: the first is when the agent was first seen, the
	// start of its new-agent ramp (NewAgentRamp).
	seen    [][]int64
	version atomic.Uint64

	snap       atomic.Pointer[Snapshot]
	refreshMu  sync.Mutex
	refreshing atomic.Bool
	lastStart  atomic.Int64 // wall clock (unix nanoseconds) of the last refresh
	computes   atomic.Int64 // Compute calls (ComputeCalls)
}

// NewGraph returns an empty trust graph.
func NewGraph(opts Options) *Graph {
	return &Graph{
		opts:    opts.withDefaults(),
		agents:  newAgentTable(),
		pairIdx: make(map[pairKey]int32),
		inbound: make(map[int32][]int32),
	}
}

// Version counts the changes folded in so far; a Snapshot records the
// version it was computed from.
func (g *Graph) Version() uint64 { return g.version.Load() }

// voteTargets returns the distinct 64-hex p tags of ev other than its author.
// Self-votes are ignored: an agent cannot raise its own trust.
func voteTargets(ev *protocol.Event) []string {
	var out []string
	for _, p := range ev.TagValues("p") {
		if !protocol.IsHex64(p) || p == ev.AgentID || contains(out, p) {
			continue
		}
		out = append(out, p)
	}
	return out
}

// Add folds a kind 6 vote in, one vote per distinct p tag; other kinds,
// malformed content and self-votes are ignored.
func (g *Graph) Add(ev *protocol.Event) {
	if ev.Kind == protocol.KindBan && g.opts.Excluded != nil {
		g.version.Add(1)
	}
	if seenBy(ev) {
		g.see(ev, true)
	}
	if ev.Kind != protocol.KindTrustVote {
		return
	}
	score, reason, err := protocol.ParseVote(ev.Content)
	targets := voteTargets(ev)
	if err != nil || len(targets) == 0 {
		return
	}
	rec := voteRec{id: strings.Clone(ev.ID), createdAt: ev.CreatedAt, score: score, reason: truncateRunes(reason, MaxReasonRunes)}
	g.mu.Lock()
	defer g.mu.Unlock()
	voter := g.agents.intern(ev.AgentID)
	for _, t := range targets {
		target := g.agents.intern(t)
		p := g.pair(pairKey{voter, target}, true)
		p.recs = append(p.recs, rec)
		if p.latest < 0 || p.recs[p.latest].less(&rec) {
			p.latest = len(p.recs) - 1
		}
	}
	g.version.Add(1)
}

// Remove withdraws a previously added vote (revoked by its author with
// kind 9). Unknown events are ignored.
func (g *Graph) Remove(ev *protocol.Event) {
	if ev.Kind == protocol.KindBan && g.opts.Excluded != nil {
		g.version.Add(1)
	}
	if seenBy(ev) {
		g.see(ev, false)
	}
	if ev.Kind != protocol.KindTrustVote {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	voter, ok := g.agents.lookup(ev.AgentID)
	if !ok {
		return
	}
	changed := false
	for _, t := range voteTargets(ev) {
		target, ok := g.agents.lookup(t)
		if !ok {
			continue
		}
		p := g.pair(pairKey{voter, target}, false)
		if p == nil {
			continue
		}
		for i := range p.recs {
			if p.recs[i].id == ev.ID {
				p.recs = append(p.recs[:i:i], p.recs[i+1:]...)
				p.relatest()
				changed = true
				break
			}
		}
	}
	if changed {
		g.version.Add(1)
	}
}

// pair returns the state of pair k, creating it when create is set (nil
// otherwise when it does not exist).
func (g *Graph) pair(k pairKey, create bool) *pairState {
	if i, ok := g.pairIdx[k]; ok {
		return &g.pairs[i]
	}
	if !create {
		return nil
	}
	g.pairIdx[k] = int32(len(g.pairs))
	g.pairs = append(g.pairs, pairState{key: k, latest: -1})
	g.inbound[k.target] = append(g.inbound[k.target], k.voter)
	return &g.pairs[len(g.pairs)-1]
}

// agentTable interns agent ids to dense indices. Names only grow, so a copy
// of the names slice header taken under the lock stays valid after it.
type agentTable struct {
	index map[string]int32
	names []string
}

func newAgentTable() agentTable { return agentTable{index: make(map[string]int32)} }

func (a *agentTable) intern(id string) int32 {
	if i, ok := a.index[id]; ok {
		return i
	}
	id = strings.Clone(id)
	i := int32(len(a.names))
	a.index[id] = i
	a.names = append(a.names, id)
	return i
}

func (a *agentTable) lookup(id string) (int32, bool) {
	i, ok := a.index[id]
	return i, ok
}

func truncateRunes(s string, n int) string {
	count := 0
	for i := range s {
		if count == n {
			return strings.Clone(s[:i])
		}
		count++
	}
	return strings.Clone(s)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// seenBy reports whether ev dates its author's first sighting: a kind 0,
// or a kind 6 the graph counts (valid content, a target other than its
// author).
func seenBy(ev *protocol.Event) bool {
	switch ev.Kind {
	case protocol.KindProfile:
		return true
	case protocol.KindTrustVote:
		_, _, err := protocol.ParseVote(ev.Content)
		return err == nil && len(voteTargets(ev)) > 0
	}
	return false
}

// see adds (or, with add false, removes) ev's created_at among its
// author's first-seen times; a change of the earliest changes the version.
func (g *Graph) see(ev *protocol.Event, add bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	a, ok := g.agents.lookup(ev.AgentID)
	if !ok {
		if !add {
			return
		}
		a = g.agents.intern(ev.AgentID)
	}
	for len(g.seen) <= int(a) {
		g.seen = append(g.seen, nil)
	}
	times := g.seen[a]
	i, found := slices.BinarySearch(times, ev.CreatedAt)
	switch {
	case add:
		g.seen[a] = slices.Insert(times, i, ev.CreatedAt)
	case found:
		g.seen[a] = slices.Delete(times, i, i+1)
	default:
		return
	}
	if i == 0 {
		g.version.Add(1)
	}
}
