package governance

import (
	"encoding/gob"
	"fmt"
	"io"
	"sort"

	"github.com/anp2net/relay/protocol"
)

// saved is a Fold's saved form (SPEC §2.2): the acts (kinds 21, 30, 31)
// and the PIP events it holds, whole (PIP cosignatures are verified again
// at restore), the sovereign keys' activity, and the schema usage of every
// event. Caches (the judgement, signature checks, the sovereign state) are
// not saved: they fill again.
type saved struct {
	Acts, PIPs []*protocol.Event
	Activity   []activitySaved
	Usage      []usageSaved
}

type activitySaved struct {
	Key, ID string
	At      int64
}

type usageSaved struct {
	Name, ID string
	At, Kind int64
}

// SnapshotVersion names the Fold's saved form.
func (f *Fold) SnapshotVersion() string { return "governance/1" }

// Snapshot writes f's events, activity and usage to w.
func (f *Fold) Snapshot(w io.Writer) error { return f.CaptureSnapshot()(w) }

// CaptureSnapshot copies what Snapshot writes and returns the function that
// encodes the copy: it may run while events are added and removed.
func (f *Fold) CaptureSnapshot() func(w io.Writer) error {
	var sv saved
	f.mu.Lock()
	for _, e := range f.events {
		sv.Acts = append(sv.Acts, e)
	}
	for k, m := range f.activity {
		for id, at := range m {
			sv.Activity = append(sv.Activity, activitySaved{k, id, at})
		}
	}
	f.mu.Unlock()
	f.pips.mu.Lock()
	for _, m := range f.pips.byNum {
		for _, pe := range m {
			sv.PIPs = append(sv.PIPs, pe.e)
		}
	}
	for _, e := range f.pips.broken {
		sv.PIPs = append(sv.PIPs, e)
	}
	f.pips.mu.Unlock()
	f.usage.mu.Lock()
	for n, m := range f.usage.byName {
		for id, u := range m {
			sv.Usage = append(sv.Usage, usageSaved{n, id, u.at, u.kind})
		}
	}
	f.usage.mu.Unlock()
	return func(w io.Writer) error {
		sort.Slice(sv.Acts, func(i, j int) bool { return sv.Acts[i].ID < sv.Acts[j].ID })
		sort.Slice(sv.PIPs, func(i, j int) bool { return sv.PIPs[i].ID < sv.PIPs[j].ID })
		return gob.NewEncoder(w).Encode(&sv)
	}
}

// Restore replaces f's events, activity and usage with those Snapshot
// wrote. On an error f is unchanged.
func (f *Fold) Restore(r io.Reader, _ func(id string) *protocol.Event) error {
	var sv saved
	if err := gob.NewDecoder(r).Decode(&sv); err != nil {
		return fmt.Errorf("governance: %w", err)
	}
	events := make(map[string]*protocol.Event, len(sv.Acts))
	for _, e := range sv.Acts {
		if e == nil || (e.Kind != KindSovereignAct && e.Kind != KindSeedDestruct && e.Kind != KindDeadMan) {
			return fmt.Errorf("governance: saved act of another kind")
		}
		events[e.ID] = e
	}
	pips := newPipSet()
	for _, e := range sv.PIPs {
		if e == nil {
			return fmt.Errorf("governance: empty saved PIP event")
		}
		pips.add(e)
	}
	activity := map[string]map[string]int64{}
	for _, a := range sv.Activity {
		if activity[a.Key] == nil {
			activity[a.Key] = map[string]int64{}
		}
		activity[a.Key][a.ID] = a.At
	}
	byName := map[string]map[string]usageEvent{}
	for _, u := range sv.Usage {
		if byName[u.Name] == nil {
			byName[u.Name] = map[string]usageEvent{}
		}
		byName[u.Name][u.ID] = usageEvent{u.At, u.Kind}
	}
	f.mu.Lock()
	f.events, f.activity, f.pips = events, activity, pips
	f.version++
	f.judgedAt, f.j, f.signed, f.sov = ^uint64(0), nil, map[string]*signed{}, nil
	f.mu.Unlock()
	f.usage.mu.Lock()
	f.usage.byName = byName
	f.usage.mu.Unlock()
	return nil
}
