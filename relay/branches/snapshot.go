package branches

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/protocol/binform"
)

// The saved form (SPEC §2.2) is the fold's own state in a compact binary
// encoding (protocol/binform): the agent table of the votes, the events it
// keeps (votes in their slim form, kinds 12–14 and relay announcements
// whole), the branch-tagged ids with their times, and every folded event's
// id with its packed time, in id order. Caches (the high-trust sets, the
// resolved roots, the current view) are not saved: they fill again.
const snapshotVersion = "branches/2"

// SnapshotVersion names the Fold's saved form.
func (f *Fold) SnapshotVersion() string { return snapshotVersion }

// Snapshot writes f's events and indexes to w.
func (f *Fold) Snapshot(w io.Writer) error { return f.CaptureSnapshot()(w) }

type taggedSaved struct {
	id string
	at int64
}

// CaptureSnapshot copies what Snapshot writes and returns the function that
// encodes the copy: it may run while events are added and removed. Events
// are never changed once kept, and the id table lends its sorted arrays.
func (f *Fold) CaptureSnapshot() func(w io.Writer) error {
	f.mu.Lock()
	gen, version := f.gen, f.version
	votes := slices.Collect(maps.Values(f.votes))
	special := make([]*protocol.Event, 0, len(f.special))
	for _, s := range f.special {
		special = append(special, s.ev)
	}
	announces := slices.Collect(maps.Values(f.announces))
	branches := slices.Sorted(maps.Keys(f.tagged))
	tagged := make([][]taggedSaved, len(branches))
	for i, b := range branches {
		for id, at := range f.tagged[b] {
			tagged[i] = append(tagged[i], taggedSaved{id, at})
		}
	}
	ids, packed := f.ids.Freeze()
	f.mu.Unlock()
	return func(w io.Writer) error {
		var names binform.Strings
		body := &binform.Writer{}
		body.Int(len(votes))
		for _, v := range votes {
			encodeEvent(body, &names, v, true)
		}
		for _, l := range [][]*protocol.Event{special, announces} {
			body.Int(len(l))
			for _, e := range l {
				encodeEvent(body, &names, e, false)
			}
		}
		body.Int(len(branches))
		for i, b := range branches {
			body.String(b)
			body.Int(len(tagged[i]))
			for _, t := range tagged[i] {
				body.ID(t.id)
				body.Varint(t.at)
			}
		}
		body.Int(len(ids))
		for i, id := range ids {
			body.Raw(id[:])
			body.Varint(packed[i])
		}
		e := binform.NewWriter(snapshotVersion)
		e.Uvarint(gen)
		e.Uvarint(version)
		e.WriteTable(names.List())
		e.Raw(body.Bytes())
		_, err := w.Write(e.Bytes())
		return err
	}
}

// encodeEvent writes e with its author as an index into names; a slim
// vote's tags are its p tags, written as indexes too.
func encodeEvent(w *binform.Writer, names *binform.Strings, e *protocol.Event, slim bool) {
	w.ID(e.ID)
	w.Int(names.Ref(e.AgentID))
	w.Varint(e.CreatedAt)
	w.Varint(e.Kind)
	w.String(e.Content)
	if slim {
		w.Int(len(e.Tags))
		for _, t := range e.Tags {
			w.Int(names.Ref(t[1]))
		}
		return
	}
	w.String(e.Sig)
	if e.Tags == nil {
		w.Int(0)
		return
	}
	w.Int(len(e.Tags) + 1)
	for _, t := range e.Tags {
		w.Int(len(t))
		for _, s := range t {
			w.String(s)
		}
	}
}

func decodeEvent(r *binform.Reader, names []string, slim bool) *protocol.Event {
	name := func() string {
		if i := r.Index(len(names)); r.Err() == nil {
			return names[i]
		}
		return ""
	}
	e := &protocol.Event{ID: r.ID(), AgentID: name(), CreatedAt: r.Varint(), Kind: r.Varint(), Content: r.String()}
	if slim {
		if n := r.Count(1); n > 0 {
			e.Tags = make([][]string, n)
			for i := range e.Tags {
				e.Tags[i] = []string{"p", name()}
			}
		}
		return e
	}
	e.Sig = r.String()
	if n := r.Count(1); n > 0 {
		e.Tags = make([][]string, n-1)
		for i := range e.Tags {
			e.Tags[i] = make([]string, r.Count(1))
			for j := range e.Tags[i] {
				e.Tags[i][j] = r.String()
			}
		}
	}
	return e
}

// Restore replaces f's events and indexes with those Snapshot wrote; the
// cosignatures of kinds 12–14 are verified again. On an error f is
// unchanged.
func (f *Fold) Restore(r io.Reader, _ func(id string) *protocol.Event) error {
	b, err := binform.ReadAll(r)
	if err != nil {
		return fmt.Errorf("branches: %w", err)
	}
	nf, err := decodeFold(b)
	if err != nil {
		return fmt.Errorf("branches: %w", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.votes, f.special, f.announces, f.tagged, f.ids, f.agents = nf.votes, nf.special, nf.announces, nf.tagged, nf.ids, nf.agents
	f.nbans, f.gen, f.version = nf.nbans, nf.gen+1, nf.version+1 // caches keyed by them start anew
	f.topAt, f.roots = map[int64]TopSet{}, map[string]rootRef{}
	f.current.view, f.banned.agents = nil, nil
	return nil
}

// decodeFold decodes a saved form into a new Fold's state.
func decodeFold(b []byte) (*Fold, error) {
	d := binform.NewReader(b, snapshotVersion)
	nf := NewFold()
	nf.gen, nf.version = d.Uvarint(), d.Uvarint()
	names := d.ReadTable()
	for _, n := range names {
		nf.agents[n] = n
	}
	minEvent := 2 + 1 + 1 + 1 + 1 + 1 // id, author, time, kind, content, tags
	for range d.Count(minEvent) {
		if e := decodeEvent(d, names, true); d.Err() == nil {
			nf.votes[e.ID] = e
		}
	}
	for range d.Count(minEvent + 1) {
		if e := decodeEvent(d, names, false); d.Err() == nil {
			nf.special[e.ID] = &stamped{e, protocol.Cosignatures(e)}
			if e.Kind == protocol.KindBan {
				nf.nbans++
			}
		}
	}
	for range d.Count(minEvent + 1) {
		if e := decodeEvent(d, names, false); d.Err() == nil {
			nf.announces[e.ID] = e
		}
	}
	for range d.Count(2) {
		br := d.String()
		m := map[string]int64{}
		for range d.Count(3) {
			id := d.ID()
			m[id] = d.Varint()
		}
		if d.Err() != nil {
			break
		}
		if _, dup := nf.tagged[br]; dup || len(m) == 0 {
			d.Fail("branch %q twice or empty", strings.Clone(br))
			break
		}
		nf.tagged[br] = m
	}
	n := d.Count(33)
	ids, packed := make([][32]byte, n), make([]int64, n)
	for i := range ids {
		copy(ids[i][:], d.Raw(32))
		packed[i] = d.Varint()
	}
	if err := d.Done(); err != nil {
		return nil, err
	}
	t, ok := fromSortedIDs(ids, packed)
	if !ok {
		return nil, fmt.Errorf("%w: ids out of order", binform.ErrCorrupt)
	}
	nf.ids = t
	return nf, nil
}
