package state_test

import (
	"math/rand/v2"
	"testing"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/branches"
	"github.com/anp2net/relay/relay/state"
	"github.com/anp2net/relay/relay/state/statetest"
)

// viewsState returns a State with the built-in views (trust, moderation,
// tasks) and the branches fold: the views whose saved forms are binary.
func viewsState() *state.State {
	return state.New(state.Options{Folds: []state.NamedFold{{Name: "branches", Fold: branches.NewFold()}}})
}

// viewsCorpus returns a mixed stream large enough that the per-event
// tables merge their recent additions several times (more than 4096
// events), the revocation corpus (revocations before and after their
// targets), and posts that open voluntary forks rooted at earlier events
// (odd and even prefixes), shuffled: arrivals out of (created_at, id)
// order, as mirroring delivers them.
func viewsCorpus(seed uint64) []*protocol.Event {
	var evs []*protocol.Event
	statetest.Mixed(seed, 9000, 60, base, 3*86400, func(e *protocol.Event) { evs = append(evs, e) })
	evs = append(evs, statetest.Corpus(seed+40, 12, 10, base, 600)...)
	rng := rand.New(rand.NewPCG(seed, 8))
	pool := statetest.Agents(4)
	for i := range 6 {
		root := evs[rng.IntN(len(evs))]
		fork := "b-" + root.ID[:8+i%3]
		evs = append(evs, pool[i%len(pool)].Sign(protocol.KindPost, root.CreatedAt+int64(rng.IntN(600)), "fork", []string{"branch", fork}))
	}
	return shuffled(evs, seed)
}

// saveResume captures s, writes it to a fresh state directory, reads it
// back and resumes a new viewsState from it; every view must restore.
func saveResume(t *testing.T, s *state.State, lookup state.Lookup) *state.State {
	t.Helper()
	sv := statetest.SaveLatest(t, s)
	got := viewsState()
	restored, why, err := got.Resume(sv, lookup)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"trust", "moderation", "tasks", "branches"} {
		if !restored[v] {
			t.Fatalf("view %s not restored: %s", v, why[v])
		}
	}
	return got
}

// TestViewsResumeEqualsFold folds a shuffled mixed log with revocations
// into a state, saves and resumes it at a cut, folds more into the resumed
// state, saves and resumes that again (a restored view's saved form), and
// folds the rest: at each step every view's digest (trust, moderation,
// tasks, credit, branches) must equal that of a state that folded the same
// events from empty, at several evaluation times. Restores read no event
// from the log: the lookup fails the test.
func TestViewsResumeEqualsFold(t *testing.T) {
	times := []int64{base + 3600, base + 2*86400, base + 40*86400}
	for seed := range uint64(2) {
		evs := viewsCorpus(seed + 50)
		noLookup := func(id string) *protocol.Event {
			t.Fatalf("a restore read event %s from the log", id)
			return nil
		}
		var seen map[string]*protocol.Event
		lookup := func(id string) *protocol.Event { return seen[id] }
		compare := func(stage string, got *state.State, upTo int) {
			t.Helper()
			seen = map[string]*protocol.Event{}
			ref := viewsState()
			for i, e := range evs[:upTo] {
				seen[e.ID] = e
				ref.Add(int64(i+1), e, lookup)
			}
			for _, at := range times {
				w, g := ref.Digest(at), got.Digest(at)
				if g.Digest != w.Digest || g.Events != w.Events || g.Revoked != w.Revoked {
					t.Fatalf("seed %d %s at %d: view %s differs (resumed %d/%d events/revoked, folded %d/%d)",
						seed, stage, at, state.FirstDifference(g, w), g.Events, g.Revoked, w.Events, w.Revoked)
				}
			}
		}
		cut1, cut2 := len(evs)/3, 2*len(evs)/3
		seen = map[string]*protocol.Event{}
		s := viewsState()
		for i, e := range evs[:cut1] {
			seen[e.ID] = e
			s.Add(int64(i+1), e, lookup)
		}
		got := saveResume(t, s, noLookup)
		compare("after the first resume", got, cut1)
		seen = map[string]*protocol.Event{}
		for _, e := range evs[:cut1] {
			seen[e.ID] = e
		}
		for i, e := range evs[cut1:cut2] {
			seen[e.ID] = e
			got.Add(int64(cut1+i+1), e, lookup)
		}
		got = saveResume(t, got, noLookup)
		compare("after the second resume", got, cut2)
		seen = map[string]*protocol.Event{}
		for _, e := range evs[:cut2] {
			seen[e.ID] = e
		}
		for i, e := range evs[cut2:] {
			seen[e.ID] = e
			got.Add(int64(cut2+i+1), e, lookup)
		}
		compare("at the end", got, len(evs))
	}
}
