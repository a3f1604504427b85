package tasks

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"io"
	"sort"

	"github.com/anp2net/relay/protocol"
)

// SnapshotVersion names the Fold's saved form: the ids of the lifecycle
// events it holds, sorted, 32 bytes each.
func (f *Fold) SnapshotVersion() string { return "tasks.ids/2" }

// Snapshot writes the ids of every event f holds. A task's records keep
// parsed contents, not events; the log keeps the events, and Restore reads
// them back from it.
func (f *Fold) Snapshot(w io.Writer) error { return f.CaptureSnapshot()(w) }

// CaptureSnapshot copies what Snapshot writes and returns the function that
// encodes the copy: it may run while events are added and removed.
func (f *Fold) CaptureSnapshot() func(w io.Writer) error {
	f.mu.RLock()
	var ids [][32]byte
	for _, t := range f.tasks {
		if t.req != nil {
			ids = append(ids, t.req.id)
		}
		for _, l := range t.lists {
			for _, r := range l {
				ids = append(ids, r.id)
			}
		}
	}
	f.mu.RUnlock()
	return func(w io.Writer) error {
		sort.Slice(ids, func(i, j int) bool { return bytes.Compare(ids[i][:], ids[j][:]) < 0 })
		for _, id := range ids {
			if _, err := w.Write(id[:]); err != nil {
				return err
			}
		}
		return nil
	}
}

// Restore adds to an empty f the events whose ids Snapshot wrote, fetched
// with lookup. It fails, leaving f unchanged, when f is not empty, the
// saved form is malformed or an event is not found.
func (f *Fold) Restore(r io.Reader, lookup func(id string) *protocol.Event) error {
	f.mu.RLock()
	empty := len(f.tasks) == 0
	f.mu.RUnlock()
	if !empty {
		return fmt.Errorf("tasks: restore into a fold that is not empty")
	}
	b, err := io.ReadAll(r)
	if err != nil {
		return fmt.Errorf("tasks: %w", err)
	}
	if len(b)%32 != 0 {
		return fmt.Errorf("tasks: saved ids are %d bytes, not a multiple of 32", len(b))
	}
	evs := make([]*protocol.Event, 0, len(b)/32)
	for i := 0; i < len(b); i += 32 {
		id := hex.EncodeToString(b[i : i+32])
		ev := lookup(id)
		if ev == nil || ev.ID != id {
			return fmt.Errorf("tasks: saved event %s is not in the log", id)
		}
		evs = append(evs, ev)
	}
	for _, ev := range evs {
		f.Add(ev)
	}
	return nil
}
