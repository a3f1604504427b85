package branches

import (
	"encoding/gob"
	"fmt"
	"io"
	"sort"

	"github.com/anp2net/relay/protocol"
)

// saved is a Fold's saved form (SPEC §2.2): the events it keeps (votes in
// their slim form, kinds 12–14 and relay announcements whole), the
// branch-tagged ids with their times, and every folded event's id, time
// and kind in the fold's own order. Caches (the high-trust sets, the
// resolved roots, the current view) are not saved: they fill again.
type saved struct {
	Votes, Special, Announces []*protocol.Event
	Branches                  []string
	Tagged                    [][]taggedSaved
	IDs                       []idSaved
	Indexed                   bool
	NBans                     int
	Gen, Version              uint64
}

type taggedSaved struct {
	ID string
	At int64
}

type idSaved struct {
	ID       [32]byte
	At, Kind int64
}

// SnapshotVersion names the Fold's saved form.
func (f *Fold) SnapshotVersion() string { return "branches/1" }

// Snapshot writes f's events and indexes to w.
func (f *Fold) Snapshot(w io.Writer) error { return f.CaptureSnapshot()(w) }

// CaptureSnapshot copies what Snapshot writes and returns the function that
// encodes the copy: it may run while events are added and removed.
func (f *Fold) CaptureSnapshot() func(w io.Writer) error {
	f.mu.Lock()
	sv := saved{NBans: f.nbans, Gen: f.gen, Version: f.version, Indexed: f.ids != nil}
	for _, e := range f.votes {
		sv.Votes = append(sv.Votes, e)
	}
	for _, s := range f.special {
		sv.Special = append(sv.Special, s.ev)
	}
	for _, e := range f.announces {
		sv.Announces = append(sv.Announces, e)
	}
	for b := range f.tagged {
		sv.Branches = append(sv.Branches, b)
	}
	sort.Strings(sv.Branches)
	for _, b := range sv.Branches {
		var ts []taggedSaved
		for id, at := range f.tagged[b] {
			ts = append(ts, taggedSaved{id, at})
		}
		sv.Tagged = append(sv.Tagged, ts)
	}
	sv.IDs = make([]idSaved, len(f.ids))
	for i, e := range f.ids {
		sv.IDs[i] = idSaved{e.id, e.at, e.kind}
	}
	f.mu.Unlock()
	return func(w io.Writer) error { return gob.NewEncoder(w).Encode(&sv) }
}

// Restore replaces f's events and indexes with those Snapshot wrote; the
// cosignatures of kinds 12–14 are verified again. On an error f is
// unchanged.
func (f *Fold) Restore(r io.Reader, _ func(id string) *protocol.Event) error {
	var sv saved
	if err := gob.NewDecoder(r).Decode(&sv); err != nil {
		return fmt.Errorf("branches: %w", err)
	}
	if len(sv.Branches) != len(sv.Tagged) {
		return fmt.Errorf("branches: inconsistent saved form")
	}
	votes := make(map[string]*protocol.Event, len(sv.Votes))
	for _, e := range sv.Votes {
		votes[e.ID] = e
	}
	special := make(map[string]*stamped, len(sv.Special))
	for _, e := range sv.Special {
		special[e.ID] = &stamped{e, protocol.Cosignatures(e)}
	}
	announces := make(map[string]*protocol.Event, len(sv.Announces))
	for _, e := range sv.Announces {
		announces[e.ID] = e
	}
	tagged := make(map[string]map[string]int64, len(sv.Branches))
	for i, b := range sv.Branches {
		m := make(map[string]int64, len(sv.Tagged[i]))
		for _, t := range sv.Tagged[i] {
			m[t.ID] = t.At
		}
		tagged[b] = m
	}
	var ids []idEntry
	if sv.Indexed {
		ids = make([]idEntry, len(sv.IDs))
		for i, e := range sv.IDs {
			ids[i] = idEntry{e.ID, e.At, e.Kind}
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.votes, f.special, f.announces, f.tagged, f.ids = votes, special, announces, tagged, ids
	f.nbans, f.gen, f.version = sv.NBans, sv.Gen+1, sv.Version+1
	f.topAt, f.roots = map[int64]TopSet{}, map[string]rootRef{}
	f.current.view, f.banned.agents = nil, nil
	return nil
}
