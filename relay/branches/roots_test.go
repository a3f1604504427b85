package branches_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/branches"
	"github.com/anp2net/relay/tasks/taskstest"
)

// TestForkInheritsRootHistory checks the rule of SPEC §17.3 on a small
// log without rollbacks: a fork rooted at an event holds the events that
// tag it, its root, and the main events before the root, not the later
// ones nor events only in another fork; a fork whose prefix no event has
// holds its tagged events only.
func TestForkInheritsRootHistory(t *testing.T) {
	a := taskstest.NewAgent("forker")
	base := int64(1_800_000_000)
	var posts []*protocol.Event
	for i := range 5 {
		posts = append(posts, a.Sign(1, base+int64(i*60), fmt.Sprintf("post %d", i)))
	}
	root := posts[2]
	fork := "b-" + root.ID[:8]
	elsewhere := a.Sign(1, base+30, "only on another fork", []string{"branch", "b-00000000"})
	tagged := a.Sign(1, base+600, "on the fork", []string{"branch", fork})
	f := branches.NewFold()
	for _, e := range append(posts, elsewhere, tagged) {
		f.Add(e)
	}
	v := f.Evaluate(base + 3600)
	want := map[string][]string{
		posts[0].ID: {"main", fork}, posts[1].ID: {"main", fork}, root.ID: {"main", fork},
		posts[3].ID: {"main"}, posts[4].ID: {"main"},
		elsewhere.ID: {"b-00000000"}, tagged.ID: {fork},
	}
	for _, e := range append(posts, elsewhere, tagged) {
		if got := v.Members(e); !slices.Equal(got, want[e.ID]) {
			t.Errorf("%s: %v, want %v", e.Content, got, want[e.ID])
		}
	}
	for _, b := range v.Branches {
		if b.ID == fork && (b.Root != root.ID || b.RootAt != root.CreatedAt) {
			t.Errorf("fork %+v, root %s", b, root.ID)
		}
		if b.ID == "b-00000000" && b.Root != "" {
			t.Errorf("a fork no event roots: %+v", b)
		}
	}
}

// TestForkRootsOrderIndependent: with forks rooted at random events of a
// random corpus (rollbacks included), at a 9-hex prefix and at no event,
// every event's branches and the digest are the same whatever the order
// the events are added in, and after extra events are added and removed.
func TestForkRootsOrderIndependent(t *testing.T) {
	for seed := uint64(1); seed <= 3; seed++ {
		rng := rand.New(rand.NewPCG(seed, 11))
		evs := corpus(rng, 6, 1_800_000_000)
		a := taskstest.NewAgent("forker")
		for i := range 6 {
			r := evs[rng.IntN(len(evs))]
			n := 8 + i%2 // 8 or 9 hex
			evs = append(evs, a.Sign(1, r.CreatedAt+int64(rng.IntN(3000)), "fork", []string{"branch", "b-" + r.ID[:n]}))
		}
		evs = append(evs, a.Sign(1, evs[0].CreatedAt, "no root", []string{"branch", "b-ffffffff0"}))
		at := evs[len(evs)-1].CreatedAt + 86400
		members := func(f *branches.Fold) map[string][]string {
			v := f.Evaluate(at)
			out := map[string][]string{}
			for _, e := range evs {
				out[e.ID] = v.Members(e)
				for _, b := range v.Branches { // In is Members for one branch
					if v.In(e, b.ID) != slices.Contains(out[e.ID], b.ID) {
						t.Fatalf("In(%s, %s) = %v, members %v", e.ID, b.ID, v.In(e, b.ID), out[e.ID])
					}
				}
			}
			return out
		}
		ref := branches.NewFold()
		for _, e := range evs {
			ref.Add(e)
		}
		want, wantDigest := members(ref), ref.Digest(at)
		inherited := 0
		for _, e := range evs {
			for _, b := range want[e.ID] {
				if len(b) > 2 && b[:2] == "b-" && !slices.Contains(e.TagValues("branch"), b) {
					inherited++
				}
			}
		}
		t.Logf("seed %d: %d events, %d inherited fork memberships", seed, len(evs), inherited)
		if inherited == 0 {
			t.Fatal("the corpus should root forks at earlier events")
		}
		extra := corpus(rand.New(rand.NewPCG(seed, 98)), 6, 1_800_000_000)
		for round := range 3 {
			order := append(append([]*protocol.Event{}, evs...), extra...)
			rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
			f := branches.NewFold()
			for i, e := range order {
				f.Add(e)
				if i == len(order)/2 {
					f.Evaluate(at) // resolve roots half way: later events must correct them
				}
			}
			for _, e := range extra {
				f.Remove(e)
			}
			if got := members(f); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("seed %d round %d: memberships differ", seed, round)
			}
			if f.Digest(at) != wantDigest {
				t.Fatalf("seed %d round %d: digest differs", seed, round)
			}
		}
	}
}
