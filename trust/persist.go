package trust

import (
	"fmt"
	"io"
	"slices"
	"sort"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/protocol/binform"
	"github.com/anp2net/relay/trust/sortedtab"
)

// The saved forms below are the views' exact structures in a compact
// binary encoding (protocol/binform): each agent id once in a table, then
// indexes into it; event ids as their 32 bytes; times as varints. A
// restored view is the view that was saved, so its snapshots and digests
// are those of a refold of the same events. A change to a structure
// changes its SnapshotVersion, and older saved state is then refolded from
// the log instead (SPEC §2.2).

const (
	graphVersion      = "trust.graph/3"
	moderationVersion = "trust.moderation/3"
)

// SnapshotVersion names the Graph's saved form.
func (g *Graph) SnapshotVersion() string { return graphVersion }

// Snapshot writes g's votes and agent table to w.
func (g *Graph) Snapshot(w io.Writer) error { return g.CaptureSnapshot()(w) }

// CaptureSnapshot copies what Snapshot writes and returns the function that
// encodes the copy: it may run while events are added and removed.
func (g *Graph) CaptureSnapshot() func(w io.Writer) error {
	g.mu.RLock()
	names := g.agents.names[:len(g.agents.names):len(g.agents.names)]
	pairs := make([]pairState, len(g.pairs))
	for i, p := range g.pairs {
		// recs is copied on removal (append(p.recs[:i:i], ...)) but
		// appended to in place: cap the copy at its length.
		pairs[i] = pairState{key: p.key, recs: p.recs[:len(p.recs):len(p.recs)]}
	}
	seen := make([][]int64, len(g.seen))
	for i, t := range g.seen {
		seen[i] = slices.Clone(t)
	}
	g.mu.RUnlock()
	return func(w io.Writer) error {
		e := binform.NewWriter(graphVersion)
		e.WriteTable(names)
		e.Int(len(pairs))
		for _, p := range pairs {
			e.Int(int(p.key.voter))
			e.Int(int(p.key.target))
			e.Int(len(p.recs))
			for _, r := range p.recs {
				e.ID(r.id)
				e.Varint(r.createdAt)
				e.Float64(r.score)
				e.String(r.reason)
			}
		}
		e.Int(len(seen))
		for _, t := range seen {
			e.Times(t)
		}
		_, err := w.Write(e.Bytes())
		return err
	}
}

// Restore replaces g's votes with those Snapshot wrote. On an error g is
// unchanged.
func (g *Graph) Restore(r io.Reader, _ func(id string) *protocol.Event) error {
	b, err := binform.ReadAll(r)
	if err != nil {
		return fmt.Errorf("trust graph: %w", err)
	}
	d := binform.NewReader(b, graphVersion)
	names := d.ReadTable()
	agents := newAgentTable()
	for _, n := range names {
		agents.intern(n)
	}
	np := d.Count(3)
	pairIdx := make(map[pairKey]int32, np)
	pairs := make([]pairState, np)
	inbound := make(map[int32][]int32)
	for i := range pairs {
		k := pairKey{int32(d.Index(len(names))), int32(d.Index(len(names)))}
		recs := make([]voteRec, d.Count(12))
		for j := range recs {
			recs[j] = voteRec{id: d.ID(), createdAt: d.Varint(), score: d.Float64(), reason: d.Shared()}
		}
		if d.Err() != nil {
			break
		}
		if _, dup := pairIdx[k]; dup {
			d.Fail("pair %d twice", i)
			break
		}
		pairs[i] = pairState{key: k, recs: recs}
		pairs[i].relatest()
		pairIdx[k] = int32(i)
		inbound[k.target] = append(inbound[k.target], k.voter)
	}
	seen := make([][]int64, d.Count(1))
	if len(seen) > len(names) {
		d.Fail("first-seen times of %d agents, %d named", len(seen), len(names))
	}
	for i := range seen {
		if seen[i] = d.Times(); d.Err() != nil {
			break
		}
	}
	if err := d.Done(); err != nil {
		return fmt.Errorf("trust graph: %w", err)
	}
	g.mu.Lock()
	g.agents, g.pairIdx, g.pairs, g.inbound, g.seen = agents, pairIdx, pairs, inbound, seen
	g.mu.Unlock()
	g.version.Add(1)
	return nil
}

// SnapshotVersion names the Moderation's saved form.
func (m *Moderation) SnapshotVersion() string { return moderationVersion }

// Snapshot writes m's per-event records, activity and flags to w.
func (m *Moderation) Snapshot(w io.Writer) error { return m.CaptureSnapshot()(w) }

// CaptureSnapshot copies what Snapshot writes and returns the function that
// encodes the copy: it may run while events are added and removed. The
// per-event records are not copied: the table lends its sorted arrays,
// which later writes leave unchanged.
func (m *Moderation) CaptureSnapshot() func(w io.Writer) error {
	m.mu.Lock() // Freeze merges the table's recent additions
	names := m.agents.names[:len(m.agents.names):len(m.agents.names)]
	keys, authors := m.events.Freeze()
	activity := make([][]int64, len(m.activity))
	for i, a := range m.activity {
		activity[i] = slices.Clone(a)
	}
	targets := make([]string, 0, len(m.targets))
	for t := range m.targets {
		targets = append(targets, t)
	}
	flags := make([][]flagRec, len(targets))
	for i, t := range targets {
		flags[i] = slices.Clone(m.targets[t]) // cosigner lists are never changed in place
	}
	m.mu.Unlock()
	return func(w io.Writer) error {
		e := binform.NewWriter(moderationVersion)
		e.WriteTable(names)
		e.Int(len(keys))
		for i, k := range keys {
			e.Raw(k[:])
			e.Int(int(authors[i]))
		}
		e.Int(len(activity))
		for _, a := range activity {
			e.Times(a)
		}
		order := make([]int, len(targets))
		for i := range order {
			order[i] = i
		}
		sort.Slice(order, func(a, b int) bool { return targets[order[a]] < targets[order[b]] })
		e.Int(len(targets))
		for _, i := range order {
			e.ID(targets[i])
			e.Int(len(flags[i]))
			for _, f := range flags[i] {
				encodeFlag(e, &f)
			}
		}
		_, err := w.Write(e.Bytes())
		return err
	}
}

func encodeFlag(e *binform.Writer, f *flagRec) {
	e.ID(f.id)
	e.Int(int(f.flagger))
	e.Varint(f.createdAt)
	e.String(f.category)
	e.String(f.reason)
	e.Bool(f.override)
	e.Bool(f.appeal)
	for _, l := range [][]int32{f.cosigners, f.signed} {
		e.Int(len(l))
		for _, a := range l {
			e.Int(int(a))
		}
	}
}

func decodeFlag(d *binform.Reader, n int) flagRec {
	f := flagRec{id: d.ID(), flagger: int32(d.Index(n)), createdAt: d.Varint(), category: canonicalCategory(d.Shared()),
		reason: d.Shared(), override: d.Bool(), appeal: d.Bool()}
	for _, l := range []*[]int32{&f.cosigners, &f.signed} {
		if c := d.Count(1); c > 0 {
			*l = make([]int32, c)
			for i := range *l {
				(*l)[i] = int32(d.Index(n))
			}
		}
	}
	return f
}

// Restore replaces m's records with those Snapshot wrote. On an error m
// is unchanged.
func (m *Moderation) Restore(r io.Reader, _ func(id string) *protocol.Event) error {
	b, err := binform.ReadAll(r)
	if err != nil {
		return fmt.Errorf("moderation: %w", err)
	}
	d := binform.NewReader(b, moderationVersion)
	names := d.ReadTable()
	agents := newAgentTable()
	for _, n := range names {
		agents.intern(n)
	}
	ne := d.Count(17)
	keys, authors := make([]idKey, ne), make([]int32, ne)
	for i := range keys {
		copy(keys[i][:], d.Raw(len(idKey{})))
		authors[i] = int32(d.Index(len(names)))
	}
	activity := make([][]int64, d.Count(1))
	if len(activity) > len(names) {
		d.Fail("activity of %d agents, %d named", len(activity), len(names))
	}
	for i := range activity {
		activity[i] = d.Times()
	}
	for _, a := range authors {
		if int(a) >= len(activity) && d.Err() == nil {
			d.Fail("author %d has no activity", a) // Remove reads it
		}
	}
	nt := d.Count(3)
	targets := make(map[string][]flagRec, nt)
	for range nt {
		t := d.ID()
		recs := make([]flagRec, d.Count(10))
		for j := range recs {
			recs[j] = decodeFlag(d, len(names))
		}
		if _, dup := targets[t]; dup && d.Err() == nil {
			d.Fail("target %s twice", t)
		}
		if d.Err() != nil {
			break
		}
		targets[t] = recs
	}
	if err := d.Done(); err != nil {
		return fmt.Errorf("moderation: %w", err)
	}
	events, ok := sortedtab.FromSorted(cmpKey, keyPrefix, keys, authors)
	if !ok {
		return fmt.Errorf("moderation: %w: event keys out of order", binform.ErrCorrupt)
	}
	m.mu.Lock()
	m.agents, m.events, m.activity, m.targets = agents, events, activity, targets
	m.mu.Unlock()
	m.flagVersion.Add(1)
	m.version.Add(1)
	return nil
}
