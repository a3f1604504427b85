package state_test

import (
	"crypto/sha256"
	"encoding/binary"
	"slices"
	"testing"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/state"
	"github.com/anp2net/relay/relay/state/statetest"
)

// kindCount is a registered module's fold for the test: it counts live
// events per kind, and digests the counts.
type kindCount struct{ n map[int64]int }

func (k *kindCount) Add(e *protocol.Event)    { k.n[e.Kind]++ }
func (k *kindCount) Remove(e *protocol.Event) { k.n[e.Kind]-- }

type digestedCount struct{ kindCount }

func (k *digestedCount) Digest(at int64) [32]byte {
	kinds := make([]int64, 0, len(k.n))
	for kind := range k.n {
		kinds = append(kinds, kind)
	}
	slices.Sort(kinds)
	var b []byte
	for _, kind := range kinds {
		b = binary.BigEndian.AppendUint64(b, uint64(kind))
		b = binary.BigEndian.AppendUint64(b, uint64(k.n[kind]))
	}
	return sha256.Sum256(b)
}

// TestRegisteredFolds: a module's fold sees exactly the events the
// built-in views see (revoked ones withdrawn, whichever of event and
// revocation comes first), in the live and the replay path alike; a fold
// that does not digest leaves /state's digest as it was, and one that does
// joins /state under its module's name, in canonical order.
func TestRegisteredFolds(t *testing.T) {
	evs := statetest.Corpus(5, 20, 30, base, 600)
	plain := state.New(state.Options{})
	counted := &kindCount{n: map[int64]int{}}
	digested := &digestedCount{kindCount{n: map[int64]int{}}}
	withFolds := state.New(state.Options{Folds: []state.NamedFold{{Name: "counts", Fold: counted}, {Name: "a_digested", Fold: digested}}})
	onlyPlain := state.New(state.Options{Folds: []state.NamedFold{{Name: "counts", Fold: &kindCount{n: map[int64]int{}}}}})
	seen := map[string]*protocol.Event{}
	lookup := func(id string) *protocol.Event { return seen[id] }
	for i, e := range shuffled(evs, 9) {
		seen[e.ID] = e
		for _, s := range []*state.State{plain, withFolds, onlyPlain} {
			s.Add(int64(i+1), e, lookup)
		}
	}
	want := map[int64]int{}
	for _, e := range evs {
		if !plain.Revoked(e.ID) {
			want[e.Kind]++
		}
	}
	for kind, n := range want {
		if counted.n[kind] != n || digested.n[kind] != n {
			t.Fatalf("kind %d: fold counts %d and %d, want %d (revoked events must be withdrawn)", kind, counted.n[kind], digested.n[kind], n)
		}
	}
	at := int64(base + 3600)
	p, w, o := plain.Digest(at), withFolds.Digest(at), onlyPlain.Digest(at)
	if o.Digest != p.Digest || len(o.Views) != len(p.Views) {
		t.Fatal("a fold that does not digest changed /state")
	}
	if w.Digest == p.Digest || w.Views["a_digested"] == "" || state.FirstDifference(w, p) != "a_digested" {
		t.Fatalf("a digested fold is not part of /state: %v", w.Views)
	}
	// The replay path (revocations preloaded, no lookups) agrees.
	rc := &digestedCount{kindCount{n: map[int64]int{}}}
	r := state.New(state.Options{Folds: []state.NamedFold{{Name: "a_digested", Fold: rc}}})
	for _, e := range evs {
		r.Preload(e)
	}
	for i, e := range evs {
		r.Add(int64(i+1), e, nil)
	}
	if rd := r.Digest(at); rd.Views["a_digested"] != w.Views["a_digested"] || rd.Digest != w.Digest {
		t.Fatal("replay and live folds disagree")
	}
}
