package state_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/state"
	"github.com/anp2net/relay/relay/state/statetest"
)

// persistSetup returns a State with a digested module fold that has no
// saved form, so a resume must feed it the log's head.
func persistSetup() *state.State {
	return state.New(state.Options{Folds: []state.NamedFold{{Name: "counts", Fold: &digestedCount{kindCount{n: map[int64]int{}}}}}})
}

// TestResumeEqualsFold saves a state after a random prefix of a shuffled
// corpus (revocations before and after their targets), resumes a fresh
// state from the saved files, feeds the head to the fold without a saved
// form and the tail to all, and requires the digest of a state that folded
// everything from empty, at every cut.
func TestResumeEqualsFold(t *testing.T) {
	for seed := range uint64(3) {
		evs := shuffled(statetest.Corpus(seed+11, 12, 10, base, 600), seed)
		// The log holds what was added so far: lookup sees only that.
		var seen map[string]*protocol.Event
		lookup := func(id string) *protocol.Event { return seen[id] }
		add := func(s *state.State, seq int, e *protocol.Event) {
			seen[e.ID] = e
			s.Add(int64(seq), e, lookup)
		}
		seen = map[string]*protocol.Event{}
		full := persistSetup()
		for i, e := range evs {
			add(full, i+1, e)
		}
		want := full.Digest(base + 700)
		for _, cut := range []int{0, 1, len(evs) / 3, len(evs) - 1, len(evs)} {
			seen = map[string]*protocol.Event{}
			saved := persistSetup()
			for i, e := range evs[:cut] {
				add(saved, i+1, e)
			}
			sv := statetest.SaveLatest(t, saved)
			got := persistSetup()
			restored, why, err := got.Resume(sv, lookup)
			if err != nil {
				t.Fatal(err)
			}
			if len(restored) != 3 || why["counts"] == "" {
				t.Fatalf("restored %v, not restored %v", restored, why)
			}
			for _, e := range evs[:cut] {
				got.FeedHead(e, restored)
			}
			for i, e := range evs[cut:] {
				add(got, cut+i+1, e)
			}
			if d := got.Digest(base + 700); d.Digest != want.Digest || d.Events != want.Events || d.Revoked != want.Revoked {
				t.Fatalf("seed %d cut %d: resumed %s (%d/%d), folded %s (%d/%d); first difference %s", seed, cut,
					d.Digest, d.Events, d.Revoked, want.Digest, want.Events, want.Revoked, state.FirstDifference(d, want))
			}
		}
	}
}

// TestSaveLeavesPreviousSnapshot checks that an interrupted save (a
// temporary directory left behind) is never read and that Latest reports
// a damaged view file instead of returning its data.
func TestSaveLeavesPreviousSnapshot(t *testing.T) {
	s := persistSetup()
	evs := statetest.Corpus(3, 6, 4, base, 600)
	for i, e := range evs {
		s.Add(int64(i+1), e, nil)
	}
	root := filepath.Join(t.TempDir(), "state")
	dir, _ := state.OpenDir(root)
	c, _ := s.Capture()
	if _, err := dir.Save(c); err != nil {
		t.Fatal(err)
	}
	// A save killed half-way: a temporary directory with a newer seq.
	os.MkdirAll(filepath.Join(root, "tmp-123"), 0o700)
	os.WriteFile(filepath.Join(root, "tmp-123", "MANIFEST"), []byte(`{"format":"anp2-state/1","seq":99999}`), 0o600)
	sv, err := dir.Latest()
	if err != nil || sv.Manifest.Seq != int64(len(evs)) || len(sv.Bad) != 0 {
		t.Fatalf("latest after an interrupted save: %v %+v", err, sv)
	}
	snaps, _ := filepath.Glob(filepath.Join(root, "snap-*"))
	p := filepath.Join(snaps[0], "moderation.snap")
	b, _ := os.ReadFile(p)
	b[len(b)-1] ^= 1
	os.WriteFile(p, b, 0o600)
	sv, err = dir.Latest()
	if err != nil || sv.Bad["moderation"] != "checksum mismatch" || sv.Data["moderation"] != nil || sv.Data["trust"] == nil {
		t.Fatalf("damaged view: %v bad %v", err, sv.Bad)
	}
}

// FuzzResume feeds arbitrary bytes as each view's saved data (as if a
// checksum matched): Resume must not panic, a failed composition leaves the
// state empty, and a view whose Restore fails is reported, not restored.
func FuzzResume(f *testing.F) {
	s := persistSetup()
	for i, e := range statetest.Corpus(4, 6, 4, base, 600) {
		s.Add(int64(i+1), e, nil)
	}
	c, err := s.Capture()
	if err != nil {
		f.Fatal(err)
	}
	for i, v := range c.Views {
		f.Add(i, v.Data)
		f.Add(i, v.Data[:len(v.Data)/2])
	}
	f.Add(0, []byte{})
	f.Fuzz(func(t *testing.T, which int, data []byte) {
		if which < 0 {
			which = -which
		}
		which %= len(c.Views)
		sv := &state.Saved{Manifest: &state.Manifest{Seq: c.Seq, Count: c.Count, LastID: c.LastID},
			Data: map[string][]byte{}, Versions: map[string]string{}, Bad: map[string]string{}}
		for i, v := range c.Views {
			sv.Data[v.Name], sv.Versions[v.Name] = v.Data, v.Version
			if i == which {
				sv.Data[v.Name] = data
			}
		}
		got := persistSetup()
		restored, why, err := got.Resume(sv, func(string) *protocol.Event { return nil })
		if err != nil {
			if got.Seq() != 0 || got.Digest(base).Events != 0 {
				t.Fatalf("failed resume changed the state: %v", err)
			}
			return
		}
		for name := range why {
			if restored[name] {
				t.Fatalf("view %s both restored and not", name)
			}
		}
	})
}
