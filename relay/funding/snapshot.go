package funding

import (
	"encoding/gob"
	"fmt"
	"io"
	"sort"

	"github.com/anp2net/relay/protocol"
)

// saved is a Fold's saved form (SPEC §2.2): the kind 16, 17 and 22 events
// it holds, whole, and the (author, id) of every kind 10. Restore folds
// them into a fresh fold: every figure is computed from these sets.
type saved struct {
	Events    []*protocol.Event
	Operators [][2]string
}

// SnapshotVersion names the Fold's saved form.
func (f *Fold) SnapshotVersion() string { return "funding/1" }

// Snapshot writes the events f holds to w.
func (f *Fold) Snapshot(w io.Writer) error { return f.CaptureSnapshot()(w) }

// CaptureSnapshot copies what Snapshot writes and returns the function that
// encodes the copy: it may run while events are added and removed.
func (f *Fold) CaptureSnapshot() func(w io.Writer) error {
	f.mu.RLock()
	var sv saved
	for _, m := range f.fundings {
		for _, r := range m {
			sv.Events = append(sv.Events, r.ev)
		}
	}
	for _, r := range f.claims {
		sv.Events = append(sv.Events, r.ev)
	}
	for _, m := range f.reports {
		for _, r := range m {
			sv.Events = append(sv.Events, r.ev)
		}
	}
	for a, ids := range f.operators {
		for id := range ids {
			sv.Operators = append(sv.Operators, [2]string{a, id})
		}
	}
	f.mu.RUnlock()
	return func(w io.Writer) error {
		sort.Slice(sv.Events, func(i, j int) bool { return sv.Events[i].ID < sv.Events[j].ID })
		sort.Slice(sv.Operators, func(i, j int) bool { return sv.Operators[i][1] < sv.Operators[j][1] })
		return gob.NewEncoder(w).Encode(&sv)
	}
}

// Restore replaces f's sets with those Snapshot wrote. On an error f is
// unchanged.
func (f *Fold) Restore(r io.Reader, _ func(id string) *protocol.Event) error {
	var sv saved
	if err := gob.NewDecoder(r).Decode(&sv); err != nil {
		return fmt.Errorf("funding: %w", err)
	}
	g := NewFold()
	for _, e := range sv.Events {
		if e == nil || (e.Kind != protocol.KindFunding && e.Kind != protocol.KindDonation && e.Kind != protocol.KindCapacity) {
			return fmt.Errorf("funding: saved event of another kind")
		}
		g.Add(e)
	}
	for _, o := range sv.Operators {
		set(g.operators, o[0])[o[1]] = struct{}{}
	}
	f.mu.Lock()
	f.fundings, f.claims, f.byDonee, f.byAttested, f.reports, f.operators = g.fundings, g.claims, g.byDonee, g.byAttested, g.reports, g.operators
	f.mu.Unlock()
	return nil
}
