package state_test

import (
	"path/filepath"
	"reflect"
	"testing"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/branches"
	"github.com/anp2net/relay/relay/directory"
	"github.com/anp2net/relay/relay/discovery"
	"github.com/anp2net/relay/relay/funding"
	"github.com/anp2net/relay/relay/governance"
	"github.com/anp2net/relay/relay/state"
	"github.com/anp2net/relay/relay/state/statetest"
	"github.com/anp2net/relay/tasks"
	"github.com/anp2net/relay/trust"
)

// Every saved view copies its state under the composition's lock and
// encodes the copy after it (state.Capturer).
var (
	_ state.Capturer = (*trust.Graph)(nil)
	_ state.Capturer = (*trust.Moderation)(nil)
	_ state.Capturer = (*tasks.Fold)(nil)
	_ state.Capturer = (*directory.Directory)(nil)
	_ state.Capturer = (*discovery.Fold)(nil)
	_ state.Capturer = (*funding.Fold)(nil)
	_ state.Capturer = (*branches.Fold)(nil)
	_ state.Capturer = (*governance.Fold)(nil)
)

// everyViewState returns a State with every saved module fold beside the
// built-in views, and its directory (a view outside /state's digest).
// Its discovery fold's store is in memory, or disc when given.
func everyViewState(disc ...*discovery.Fold) (*state.State, *directory.Directory) {
	d := directory.New()
	if len(disc) == 0 {
		disc = append(disc, discovery.New())
	}
	return state.New(state.Options{Folds: []state.NamedFold{
		{Name: "directory", Fold: d},
		{Name: "discovery", Fold: disc[0]},
		{Name: "funding", Fold: funding.NewFold()},
		{Name: "branches", Fold: branches.NewFold()},
		{Name: "governance", Fold: governance.NewFold(governance.Options{})},
	}}), d
}

// sameDirectory reports whether two directories answer alike.
func sameDirectory(a, b *directory.Directory) bool {
	return reflect.DeepEqual(a.Agents(""), b.Agents("")) && reflect.DeepEqual(a.Rooms(nil), b.Rooms(nil)) && reflect.DeepEqual(a.Stats(), b.Stats())
}

// TestCaptureWhileAddingEqualsFold captures every view at a cut of a
// shuffled corpus, folds the rest of the corpus in while the copies are
// encoded (as publishes do during a save), then resumes a fresh state from
// what was saved and folds the same rest: its digest must be that of a
// state that folded the whole corpus from empty, and its directory (not
// digested) must answer alike, so no encoder saw an event added after its
// capture (which the rest would then count twice).
func TestCaptureWhileAddingEqualsFold(t *testing.T) {
	for seed := range uint64(2) {
		evs := shuffled(statetest.Corpus(seed+21, 16, 12, base, 600), seed)
		seen := map[string]*protocol.Event{}
		lookup := func(id string) *protocol.Event { return seen[id] }
		add := func(s *state.State, seq int, e *protocol.Event) {
			seen[e.ID] = e
			s.Add(int64(seq), e, lookup)
		}
		full, fullDir := everyViewState()
		for i, e := range evs {
			add(full, i+1, e)
		}
		want := full.Digest(base + 700)
		cut := len(evs) / 2
		seen = map[string]*protocol.Event{}
		// Discovery keeps its per-event indexes in a store file, which
		// the resumed state reopens (as a restarted relay does).
		store := filepath.Join(t.TempDir(), "discovery.db")
		liveDisc, err := discovery.Open(store, false)
		if err != nil {
			t.Fatal(err)
		}
		live, _ := everyViewState(liveDisc)
		for i, e := range evs[:cut] {
			add(live, i+1, e)
		}
		// The rest is folded while the copies are encoded (under -race,
		// an encoder reading what an Add writes is reported).
		added := make(chan struct{})
		c, err := live.CaptureThen(func() {
			go func() {
				defer close(added)
				for i, e := range evs[cut:] {
					add(live, cut+i+1, e)
				}
			}()
		})
		<-added
		if err != nil {
			t.Fatal(err)
		}
		liveDisc.Close() // the relay stops: what no save committed rolls back
		if c.Seq != int64(cut) || len(c.Unsaved) != 0 {
			t.Fatalf("capture at seq %d (want %d), unsaved %v", c.Seq, cut, c.Unsaved)
		}
		dir, err := state.OpenDir(filepath.Join(t.TempDir(), "state"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := dir.Save(c); err != nil {
			t.Fatal(err)
		}
		sv, err := dir.Latest()
		if err != nil {
			t.Fatal(err)
		}
		// The resumed relay's log holds the events up to the cut.
		seen = map[string]*protocol.Event{}
		for _, e := range evs[:cut] {
			seen[e.ID] = e
		}
		gotDisc, err := discovery.Open(store, false)
		if err != nil {
			t.Fatal(err)
		}
		defer gotDisc.Close()
		got, gotDir := everyViewState(gotDisc)
		restored, why, err := got.Resume(sv, lookup)
		if err != nil || len(why) != 0 {
			t.Fatalf("resume: %v, not restored %v", err, why)
		}
		if len(restored) != 8 {
			t.Fatalf("restored %v, want every view", restored)
		}
		for i, e := range evs[cut:] {
			add(got, cut+i+1, e)
		}
		if d := got.Digest(base + 700); d.Digest != want.Digest || d.Events != want.Events {
			t.Fatalf("seed %d: resumed from a capture taken while adding %s (%d events), folded %s (%d); first difference %s",
				seed, d.Digest, d.Events, want.Digest, want.Events, state.FirstDifference(d, want))
		}
		if !sameDirectory(gotDir, fullDir) {
			t.Fatalf("seed %d: the directory resumed from a capture taken while adding differs from the one folded from empty", seed)
		}
	}
}
