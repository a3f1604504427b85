package trust

import (
	"encoding/gob"
	"fmt"
	"io"
	"slices"
	"sort"

	"github.com/anp2net/relay/protocol"
)

// The saved forms below are the views' exact structures, written with
// encoding/gob: a restored view is the view that was saved, so its
// snapshots and digests are those of a refold of the same events. A change
// to a structure changes its SnapshotVersion, and older saved state is then
// refolded from the log instead (SPEC §2.2).

// graphSaved is a Graph's saved form.
type graphSaved struct {
	Names []string
	Pairs []pairSaved
	// Seen is each agent's sorted first-seen times (the new-agent ramp).
	Seen [][]int64
}

type pairSaved struct {
	Voter, Target int32
	Latest        int
	Recs          []voteSaved
}

type voteSaved struct {
	ID        string
	CreatedAt int64
	Score     float64
	Reason    string
}

// SnapshotVersion names the Graph's saved form.
func (g *Graph) SnapshotVersion() string { return "trust.graph/2" }

// Snapshot writes g's votes and agent table to w.
func (g *Graph) Snapshot(w io.Writer) error { return g.CaptureSnapshot()(w) }

// CaptureSnapshot copies what Snapshot writes and returns the function that
// encodes the copy: it may run while events are added and removed.
func (g *Graph) CaptureSnapshot() func(w io.Writer) error {
	g.mu.RLock()
	sv := graphSaved{Names: g.agents.names[:len(g.agents.names):len(g.agents.names)], Pairs: make([]pairSaved, len(g.pairs))}
	for i, p := range g.pairs {
		ps := pairSaved{Voter: p.key.voter, Target: p.key.target, Latest: p.latest, Recs: make([]voteSaved, len(p.recs))}
		for j, r := range p.recs {
			ps.Recs[j] = voteSaved{r.id, r.createdAt, r.score, r.reason}
		}
		sv.Pairs[i] = ps
	}
	sv.Seen = make([][]int64, len(g.seen))
	for i, t := range g.seen {
		sv.Seen[i] = append([]int64(nil), t...)
	}
	g.mu.RUnlock()
	return func(w io.Writer) error { return gob.NewEncoder(w).Encode(&sv) }
}

// Restore replaces g's votes with those Snapshot wrote. On an error g is
// unchanged.
func (g *Graph) Restore(r io.Reader, _ func(id string) *protocol.Event) error {
	var sv graphSaved
	if err := gob.NewDecoder(r).Decode(&sv); err != nil {
		return fmt.Errorf("trust graph: %w", err)
	}
	agents := newAgentTable()
	for _, n := range sv.Names {
		if _, dup := agents.index[n]; dup {
			return fmt.Errorf("trust graph: agent %q twice", n)
		}
		agents.intern(n)
	}
	pairIdx := make(map[pairKey]int32, len(sv.Pairs))
	pairs := make([]pairState, len(sv.Pairs))
	inbound := make(map[int32][]int32)
	for i, ps := range sv.Pairs {
		k := pairKey{ps.Voter, ps.Target}
		if int(k.voter) >= len(sv.Names) || int(k.target) >= len(sv.Names) || k.voter < 0 || k.target < 0 || ps.Latest >= len(ps.Recs) {
			return fmt.Errorf("trust graph: pair %d out of range", i)
		}
		if _, dup := pairIdx[k]; dup {
			return fmt.Errorf("trust graph: pair %d twice", i)
		}
		p := pairState{key: k, latest: ps.Latest, recs: make([]voteRec, len(ps.Recs))}
		for j, v := range ps.Recs {
			p.recs[j] = voteRec{id: v.ID, createdAt: v.CreatedAt, score: v.Score, reason: v.Reason}
		}
		pairIdx[k] = int32(i)
		pairs[i] = p
		inbound[k.target] = append(inbound[k.target], k.voter)
	}
	if len(sv.Seen) > len(sv.Names) {
		return fmt.Errorf("trust graph: first-seen times of %d agents, %d named", len(sv.Seen), len(sv.Names))
	}
	for i, t := range sv.Seen {
		if !slices.IsSorted(t) {
			return fmt.Errorf("trust graph: first-seen times of agent %d out of order", i)
		}
	}
	g.mu.Lock()
	g.agents, g.pairIdx, g.pairs, g.inbound, g.seen = agents, pairIdx, pairs, inbound, sv.Seen
	g.mu.Unlock()
	g.version.Add(1)
	return nil
}

// modSaved is a Moderation's saved form.
type modSaved struct {
	Names    []string
	Keys     []idKey
	Authors  []int32
	Activity [][]int64
	Targets  []string
	Flags    [][]flagSaved
}

type flagSaved struct {
	ID               string
	Flagger          int32
	CreatedAt        int64
	Category, Reason string
	Override, Appeal bool
	Cosigners        []int32
	Signed           []int32 // cosigners whose signature verified (§7.5)
}

// SnapshotVersion names the Moderation's saved form.
func (m *Moderation) SnapshotVersion() string { return "trust.moderation/2" }

// Snapshot writes m's per-event records, activity and flags to w.
func (m *Moderation) Snapshot(w io.Writer) error { return m.CaptureSnapshot()(w) }

// CaptureSnapshot copies what Snapshot writes and returns the function that
// encodes the copy: it may run while events are added and removed.
func (m *Moderation) CaptureSnapshot() func(w io.Writer) error {
	m.mu.RLock()
	sv := modSaved{Names: m.agents.names[:len(m.agents.names):len(m.agents.names)],
		Keys: make([]idKey, 0, len(m.events)), Authors: make([]int32, 0, len(m.events)),
		Activity: make([][]int64, len(m.activity))}
	for k, a := range m.events {
		sv.Keys = append(sv.Keys, k)
		sv.Authors = append(sv.Authors, a)
	}
	for i, a := range m.activity {
		sv.Activity[i] = append([]int64(nil), a...)
	}
	for t := range m.targets {
		sv.Targets = append(sv.Targets, t)
	}
	sort.Strings(sv.Targets)
	sv.Flags = make([][]flagSaved, len(sv.Targets))
	for i, t := range sv.Targets {
		for _, f := range m.targets[t] {
			sv.Flags[i] = append(sv.Flags[i], flagSaved{f.id, f.flagger, f.createdAt, f.category, f.reason, f.override, f.appeal, slices.Clone(f.cosigners), slices.Clone(f.signed)})
		}
	}
	m.mu.RUnlock()
	return func(w io.Writer) error { return gob.NewEncoder(w).Encode(&sv) }
}

// Restore replaces m's records with those Snapshot wrote. On an error m
// is unchanged.
func (m *Moderation) Restore(r io.Reader, _ func(id string) *protocol.Event) error {
	var sv modSaved
	if err := gob.NewDecoder(r).Decode(&sv); err != nil {
		return fmt.Errorf("moderation: %w", err)
	}
	if len(sv.Keys) != len(sv.Authors) || len(sv.Targets) != len(sv.Flags) || len(sv.Activity) > len(sv.Names) {
		return fmt.Errorf("moderation: inconsistent saved form")
	}
	agents := newAgentTable()
	for _, n := range sv.Names {
		if _, dup := agents.index[n]; dup {
			return fmt.Errorf("moderation: agent %q twice", n)
		}
		agents.intern(n)
	}
	n := int32(len(sv.Names))
	inRange := func(a int32) bool { return a >= 0 && a < n }
	events := make(map[idKey]int32, len(sv.Keys))
	for i, k := range sv.Keys {
		if !inRange(sv.Authors[i]) {
			return fmt.Errorf("moderation: author out of range")
		}
		events[k] = sv.Authors[i]
	}
	targets := make(map[string][]flagRec, len(sv.Targets))
	for i, t := range sv.Targets {
		recs := make([]flagRec, len(sv.Flags[i]))
		for j, f := range sv.Flags[i] {
			if !inRange(f.Flagger) {
				return fmt.Errorf("moderation: flagger out of range")
			}
			for _, c := range append(f.Cosigners[:len(f.Cosigners):len(f.Cosigners)], f.Signed...) {
				if !inRange(c) {
					return fmt.Errorf("moderation: cosigner out of range")
				}
			}
			recs[j] = flagRec{id: f.ID, flagger: f.Flagger, createdAt: f.CreatedAt, category: f.Category,
				reason: f.Reason, override: f.Override, appeal: f.Appeal, cosigners: f.Cosigners, signed: f.Signed}
		}
		targets[t] = recs
	}
	m.mu.Lock()
	m.agents, m.events, m.activity, m.targets = agents, events, sv.Activity, targets
	m.mu.Unlock()
	m.flagVersion.Add(1)
	m.version.Add(1)
	return nil
}
