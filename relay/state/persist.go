package state

import (
	"bytes"
	"encoding/gob"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/eventlog"
)

// Snapshotter is a view whose state can be saved and restored: a built-in
// view or a module's Fold. The relay saves it with the log position the
// composition reached (SPEC §2.2) and, at the next start, restores it
// instead of folding the log's head into it.
type Snapshotter interface {
	// SnapshotVersion names the saved form; saved state of another
	// version is never restored.
	SnapshotVersion() string
	// Snapshot writes the view's state to w. The caller holds the
	// composition's lock: no Add or Remove runs meanwhile (a Capturer's
	// encoder runs without it).
	Snapshot(w io.Writer) error
	// Restore replaces the state of a view that has seen no event with
	// what Snapshot wrote; lookup fetches stored events by id for a view
	// that saved ids rather than records. On an error the view must be
	// unchanged: the relay then folds the log into it instead.
	Restore(r io.Reader, lookup func(id string) *protocol.Event) error
}

// NoSnapshotSupport is Resume's reason for a view that has no saved form.
const NoSnapshotSupport = "no snapshot support"

// CompositionView is the name of the composition's own saved state (the
// set fingerprint, the log position and the revocations) among a
// snapshot's views.
const CompositionView = "state"

// compositionVersion names the composition's saved form.
const compositionVersion = "state.composition/1"

// compositionSaved is the composition's saved form.
type compositionSaved struct {
	Seq, Count int64
	Sum        [4]uint64
	LastID     string
	Targets    []string
	Revokers   [][]string
	Revoked    []string
	// Withheld and Withholdings are the withheld ids and why (a saved
	// state from before redactions existed has none, which is right: no
	// redaction could count then).
	Withheld     []string
	Withholdings []eventlog.Withholding
}

// View is one view's saved state within a Capture.
type View struct {
	Name, Version string
	Data          []byte
}

// Capture is every view's saved state at one log position.
type Capture struct {
	// Seq is the highest log sequence folded in, Count the events folded
	// in, LastID the id of the event at Seq.
	Seq, Count int64
	LastID     string
	// Views holds the composition's state first, then every view that is
	// a Snapshotter; Unsaved names the views that are not.
	Views   []View
	Unsaved []string
	// Held is how long the capture held the composition's lock (and so
	// publishes): the copying of the views' state, not their encoding.
	Held time.Duration
}

// views returns every view by name: the built-in ones, then the modules'
// folds in registration order.
func (s *State) views() []NamedFold {
	out := []NamedFold{{"trust", s.Trust}, {"moderation", s.Moderation}, {"tasks", s.Tasks}}
	return append(out, s.folds...)
}

// Capturer is a Snapshotter that copies its state cheaply and encodes the
// copy later: CaptureSnapshot runs under the composition's lock and
// returns the encoder, which runs without it while Add and Remove go on,
// so that saving state does not hold publishes for the encoding. The
// encoder must write what Snapshot would have written at the capture.
type Capturer interface {
	Snapshotter
	CaptureSnapshot() func(w io.Writer) error
}

// Preparer is a Capturer with work of its own to do before a capture
// (discovery commits its store's open transaction): PrepareSnapshot runs
// before the composition's lock is taken, while Add and Remove go on, so
// that CaptureSnapshot has less to do under it. Its effect must not
// change what the capture saves.
type Preparer interface {
	PrepareSnapshot()
}

// Capture saves the composition and every Snapshotter view at one log
// position: under the composition's lock it copies the composition's
// bookkeeping and each Capturer view's state (a Snapshotter that is not a
// Capturer is encoded there), then encodes the copies into memory without
// the lock. The caller writes them out after (Dir.Save). Publishes wait
// for the copies only.
func (s *State) Capture() (*Capture, error) { return s.captureThen(nil) }

// captureThen is Capture with between, when not nil, run after the lock
// is released and before the copies are encoded (tests).
func (s *State) captureThen(between func()) (*Capture, error) {
	for _, v := range s.views() {
		if p, ok := v.Fold.(Preparer); ok {
			p.PrepareSnapshot()
		}
	}
	c, encoders, err := s.capture()
	if err != nil {
		return nil, err
	}
	if between != nil {
		between()
	}
	var buf bytes.Buffer
	for i := range c.Views {
		if encoders[i] == nil {
			continue // encoded under the lock
		}
		buf.Reset()
		if err := encoders[i](&buf); err != nil {
			return nil, fmt.Errorf("capture %s: %w", c.Views[i].Name, err)
		}
		c.Views[i].Data = bytes.Clone(buf.Bytes())
	}
	return c, nil
}

// capture is Capture's part under the lock: the views in order with an
// encoder each, or nil and their data when encoded already.
func (s *State) capture() (c *Capture, encoders []func(io.Writer) error, err error) {
	s.mu.Lock()
	t0 := time.Now()
	defer func() {
		if c != nil {
			c.Held = time.Since(t0)
		}
		s.mu.Unlock()
	}()
	c = &Capture{Seq: s.seq, Count: s.count, LastID: s.lastID}
	cs := s.compositionLocked()
	c.Views = append(c.Views, View{Name: CompositionView, Version: compositionVersion})
	encoders = []func(io.Writer) error{func(w io.Writer) error { return gob.NewEncoder(w).Encode(cs) }}
	for _, v := range s.views() {
		switch sn := v.Fold.(type) {
		case Capturer:
			c.Views = append(c.Views, View{Name: v.Name, Version: sn.SnapshotVersion()})
			encoders = append(encoders, sn.CaptureSnapshot())
		case Snapshotter:
			var buf bytes.Buffer
			if err := sn.Snapshot(&buf); err != nil {
				return nil, nil, fmt.Errorf("capture %s: %w", v.Name, err)
			}
			c.Views = append(c.Views, View{v.Name, sn.SnapshotVersion(), buf.Bytes()})
			encoders = append(encoders, nil)
		default:
			c.Unsaved = append(c.Unsaved, v.Name)
		}
	}
	return c, encoders, nil
}

func (s *State) compositionLocked() *compositionSaved {
	cs := &compositionSaved{Seq: s.seq, Count: s.count, Sum: s.sum, LastID: s.lastID}
	for t := range s.revokers {
		cs.Targets = append(cs.Targets, t)
	}
	sort.Strings(cs.Targets)
	for _, t := range cs.Targets {
		cs.Revokers = append(cs.Revokers, s.revokers[t])
	}
	s.revMu.RLock()
	for id := range s.revoked {
		cs.Revoked = append(cs.Revoked, id)
	}
	s.revMu.RUnlock()
	sort.Strings(cs.Revoked)
	cs.Withheld = s.WithheldIDs()
	sort.Strings(cs.Withheld)
	for _, id := range cs.Withheld {
		cs.Withholdings = append(cs.Withholdings, s.withheld[id])
	}
	return cs
}

// restoreComposition replaces the composition's bookkeeping of an empty
// State with saved state of compositionVersion; on an error s is
// unchanged.
func (s *State) restoreComposition(data []byte) error {
	var cs compositionSaved
	if err := gob.NewDecoder(bytes.NewReader(data)).Decode(&cs); err != nil {
		return fmt.Errorf("composition: %w", err)
	}
	if len(cs.Targets) != len(cs.Revokers) || len(cs.Withheld) != len(cs.Withholdings) || cs.Count < 0 || cs.Seq < 0 {
		return fmt.Errorf("composition: inconsistent saved form")
	}
	revokers := make(map[string][]string, len(cs.Targets))
	for i, t := range cs.Targets {
		revokers[t] = cs.Revokers[i]
	}
	revoked := make(map[string]struct{}, len(cs.Revoked))
	for _, id := range cs.Revoked {
		revoked[id] = struct{}{}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.count != 0 {
		return fmt.Errorf("composition: restore into a state that has folded events")
	}
	s.seq, s.count, s.sum, s.lastID, s.revokers = cs.Seq, cs.Count, cs.Sum, cs.LastID, revokers
	s.revMu.Lock()
	s.revoked = revoked
	for i, id := range cs.Withheld {
		s.withheld[id] = cs.Withholdings[i]
	}
	s.revMu.Unlock()
	s.version.Add(uint64(cs.Count))
	return nil
}

// Seq returns the highest log sequence folded in.
func (s *State) Seq() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.seq
}

// Resume restores an empty s from sv: the composition's bookkeeping, then
// every view whose saved state is present, checksum-valid (Dir.Latest) and
// of its current version. It returns the views restored and, for the
// others, why not; those must then be fed the log's head with FeedHead.
// It fails, leaving s unchanged, when the composition's own state cannot
// be restored: the caller then folds the whole log.
func (s *State) Resume(sv *Saved, lookup func(id string) *protocol.Event) (restored map[string]bool, why map[string]string, err error) {
	if sv.Versions[CompositionView] != compositionVersion {
		if r, bad := sv.Bad[CompositionView]; bad {
			return nil, nil, fmt.Errorf("composition: %s", r)
		}
		return nil, nil, fmt.Errorf("composition: version %q, want %q", sv.Versions[CompositionView], compositionVersion)
	}
	if err := s.restoreComposition(sv.Data[CompositionView]); err != nil {
		return nil, nil, err
	}
	if s.Seq() != sv.Manifest.Seq || s.count != sv.Manifest.Count || s.lastID != sv.Manifest.LastID {
		return nil, nil, fmt.Errorf("composition: position differs from the manifest's")
	}
	restored, why = map[string]bool{}, map[string]string{}
	for _, v := range s.views() {
		sn, ok := v.Fold.(Snapshotter)
		switch {
		case !ok:
			why[v.Name] = NoSnapshotSupport
		case sv.Bad[v.Name] != "":
			why[v.Name] = sv.Bad[v.Name]
		case sv.Data[v.Name] == nil && sv.Versions[v.Name] == "":
			why[v.Name] = "not saved"
		case sv.Versions[v.Name] != sn.SnapshotVersion():
			why[v.Name] = fmt.Sprintf("version %q, want %q", sv.Versions[v.Name], sn.SnapshotVersion())
		default:
			if err := sn.Restore(bytes.NewReader(sv.Data[v.Name]), lookup); err != nil {
				why[v.Name] = err.Error()
				continue
			}
			restored[v.Name] = true
		}
	}
	return restored, why, nil
}

// FeedHead adds ev, an event at or before the restored log position, to
// the views not in restored, unless a revocation excludes it: a view that
// could not be restored sees the same events a full fold would have given
// it (folds are functions of the set of events, D6).
func (s *State) FeedHead(ev *protocol.Event, restored map[string]bool) {
	if s.Revoked(ev.ID) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, v := range s.views() {
		if !restored[v.Name] {
			v.Fold.Add(ev)
		}
	}
}
