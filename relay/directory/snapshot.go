package directory

import (
	"encoding/gob"
	"fmt"
	"io"
	"slices"
	"sort"

	"github.com/anp2net/relay/protocol"
)

// saved is a Directory's saved form (SPEC §2.2): per agent its event times
// and the ids of its profile and capability revisions (read back from the
// log at restore), per topic its event times, and the counts by kind.
type saved struct {
	Agents    []string
	Times     [][]int64
	Profiles  [][]string
	Caps      [][]string
	Rooms     []string
	RoomTimes [][]int64
	Kinds     []int64
	Counts    []int
	// Ever lists the agents (indexes into Agents) that have published a
	// kind 0, revoked since or not (registered "true thereafter").
	Ever []int
}

// SnapshotVersion names the Directory's saved form.
func (d *Directory) SnapshotVersion() string { return "directory/2" }

// Snapshot writes d's records to w.
func (d *Directory) Snapshot(w io.Writer) error { return d.CaptureSnapshot()(w) }

// CaptureSnapshot copies what Snapshot writes and returns the function that
// encodes the copy: it may run while events are added and removed.
func (d *Directory) CaptureSnapshot() func(w io.Writer) error {
	d.mu.RLock()
	var sv saved
	for id := range d.agents {
		sv.Agents = append(sv.Agents, id)
	}
	sort.Strings(sv.Agents)
	for i, id := range sv.Agents {
		a := d.agents[id]
		if a.everProfile {
			sv.Ever = append(sv.Ever, i)
		}
		sv.Times = append(sv.Times, slices.Clone(a.times)) // times change in place
		sv.Profiles = append(sv.Profiles, eventIDs(a.profiles))
		sv.Caps = append(sv.Caps, eventIDs(a.caps))
	}
	for t := range d.rooms {
		sv.Rooms = append(sv.Rooms, t)
	}
	sort.Strings(sv.Rooms)
	for _, t := range sv.Rooms {
		sv.RoomTimes = append(sv.RoomTimes, slices.Clone(d.rooms[t].times))
	}
	for k := range d.kinds {
		sv.Kinds = append(sv.Kinds, k)
	}
	sort.Slice(sv.Kinds, func(i, j int) bool { return sv.Kinds[i] < sv.Kinds[j] })
	for _, k := range sv.Kinds {
		sv.Counts = append(sv.Counts, d.kinds[k])
	}
	d.mu.RUnlock()
	return func(w io.Writer) error { return gob.NewEncoder(w).Encode(&sv) }
}

func eventIDs(evs []*protocol.Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.ID
	}
	return out
}

// Restore replaces d's records with those Snapshot wrote, fetching the
// profile and capability events with lookup. On an error d is unchanged.
func (d *Directory) Restore(r io.Reader, lookup func(id string) *protocol.Event) error {
	var sv saved
	if err := gob.NewDecoder(r).Decode(&sv); err != nil {
		return fmt.Errorf("directory: %w", err)
	}
	n := len(sv.Agents)
	if len(sv.Times) != n || len(sv.Profiles) != n || len(sv.Caps) != n || len(sv.Rooms) != len(sv.RoomTimes) || len(sv.Kinds) != len(sv.Counts) {
		return fmt.Errorf("directory: inconsistent saved form")
	}
	fetch := func(ids []string, agent string) ([]*protocol.Event, error) {
		var out []*protocol.Event
		for _, id := range ids {
			e := lookup(id)
			if e == nil || e.ID != id || e.AgentID != agent {
				return nil, fmt.Errorf("directory: saved event %s is not in the log", id)
			}
			out = append(out, e)
		}
		return out, nil
	}
	agents := make(map[string]*agentRec, n)
	for i, id := range sv.Agents {
		a := &agentRec{times: sv.Times[i]}
		var err error
		if a.profiles, err = fetch(sv.Profiles[i], id); err != nil {
			return err
		}
		if a.caps, err = fetch(sv.Caps[i], id); err != nil {
			return err
		}
		if !sort.SliceIsSorted(a.times, func(x, y int) bool { return a.times[x] < a.times[y] }) {
			return fmt.Errorf("directory: agent times out of order")
		}
		agents[id] = a
	}
	for _, i := range sv.Ever {
		if i < 0 || i >= n {
			return fmt.Errorf("directory: registered agent %d out of range", i)
		}
		agents[sv.Agents[i]].everProfile = true
	}
	rooms := make(map[string]*roomRec, len(sv.Rooms))
	for i, t := range sv.Rooms {
		rooms[t] = &roomRec{times: sv.RoomTimes[i]}
	}
	kinds := make(map[int64]int, len(sv.Kinds))
	for i, k := range sv.Kinds {
		kinds[k] = sv.Counts[i]
	}
	d.mu.Lock()
	d.agents, d.rooms, d.kinds = agents, rooms, kinds
	d.mu.Unlock()
	return nil
}
