package branches_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay"
	"github.com/anp2net/relay/relay/branches"
	"github.com/anp2net/relay/relay/state"
	"github.com/anp2net/relay/tasks/taskstest"
)

// corpus returns random votes, posts, checkpoints, proposals, bans and
// branch-tagged events among n agents from base on, with random subsets
// of cosigners (some forged).
func corpus(rng *rand.Rand, n int, base int64) []*protocol.Event {
	agents := make([]taskstest.Agent, n)
	for i := range agents {
		agents[i] = taskstest.NewAgent(fmt.Sprintf("agent-%d", i))
	}
	pick := func() taskstest.Agent { return agents[rng.IntN(n)] }
	var evs []*protocol.Event
	at := base
	for i := 0; i < 120; i++ {
		at += int64(rng.IntN(600))
		a := pick()
		switch rng.IntN(8) {
		case 0, 1, 2:
			evs = append(evs, a.Sign(6, at, fmt.Sprintf(`{"score":%.1f}`, rng.Float64()*2-0.5), []string{"p", pick().ID}, []string{"p", pick().ID}, []string{"p", pick().ID}))
		case 3:
			tags := [][]string{}
			if rng.IntN(2) == 0 {
				tags = append(tags, []string{"branch", fmt.Sprintf("b-%08x", rng.IntN(4))})
			}
			evs = append(evs, a.Sign(1, at, "post", tags...))
		case 4:
			c := fmt.Sprintf(`{"checkpoint_id":"cp-%d","state_hash":"%064x","event_count":%d,"as_of":%d}`, rng.IntN(3), rng.IntN(5), i, at-int64(rng.IntN(1200)))
			evs = append(evs, a.Sign(12, at, c, cosignTags(rng, 12, c, agents)...))
		case 5, 6:
			c := fmt.Sprintf(`{"target_checkpoint":"cp-%d","reason":"r%d"}`, rng.IntN(3), rng.IntN(2))
			evs = append(evs, a.Sign(13, at, c, cosignTags(rng, 13, c, agents)...))
		case 7:
			c := fmt.Sprintf(`{"agent_id":%q,"reason":"spam"}`, pick().ID)
			evs = append(evs, a.Sign(14, at, c, cosignTags(rng, 14, c, agents)...))
		}
	}
	return evs
}

func cosignTags(rng *rand.Rand, kind int64, content string, agents []taskstest.Agent) [][]string {
	var out [][]string
	for _, a := range agents {
		if rng.IntN(2) == 0 {
			tag, _ := protocol.Cosign(a.Key, kind, content)
			if rng.IntN(10) == 0 {
				tag[2] = tag[2][:127] + "0" // forged
			}
			out = append(out, tag)
		}
	}
	return out
}

// TestFoldOrderIndependent checks that the fold's view and digest depend
// only on the set of events: every shuffled order, and an order with
// extra events added then removed, gives the same digest at every time.
func TestFoldOrderIndependent(t *testing.T) {
	for seed := uint64(1); seed <= 4; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		evs := corpus(rng, 6, 1_800_000_000)
		last := evs[len(evs)-1].CreatedAt
		times := []int64{evs[0].CreatedAt, (evs[0].CreatedAt + last) / 2, last, last + 86400}
		ref := branches.NewFold()
		for _, e := range evs {
			ref.Add(e)
		}
		activated := 0
		for _, r := range ref.Evaluate(last).Rollbacks {
			if r.State == "activated" {
				activated++
			}
		}
		t.Logf("seed %d: %d events, %d activated rollbacks", seed, len(evs), activated)
		extra := corpus(rand.New(rand.NewPCG(seed, 99)), 6, 1_800_000_000)
		for round := 0; round < 3; round++ {
			f := branches.NewFold()
			order := append(append([]*protocol.Event{}, evs...), extra...)
			rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
			for _, e := range order {
				f.Add(e)
			}
			for _, e := range extra {
				f.Remove(e)
			}
			for _, at := range times {
				if f.Digest(at) != ref.Digest(at) {
					t.Fatalf("seed %d round %d: digest at %d differs", seed, round, at)
				}
			}
		}
	}
}

// TestStateWithBansOrderIndependent checks the whole state (trust,
// moderation, tasks and credit with banned agents excluded, and the
// branches view) against shuffled orders: the same digest every time.
func TestStateWithBansOrderIndependent(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	evs := corpus(rng, 5, 1_800_000_000)
	last := evs[len(evs)-1].CreatedAt + 120
	digest := func(order []*protocol.Event) string {
		st := state.New(state.Options{Folds: relay.Folds([]relay.Module{branches.NewModule(branches.Options{})})})
		for i, e := range order {
			st.Add(int64(i+1), e, nil)
		}
		return st.Digest(last).Digest
	}
	ref := digest(evs)
	var banned int
	f := branches.NewFold()
	for _, e := range evs {
		f.Add(e)
	}
	banned = len(f.Excluded(last))
	t.Logf("%d events, %d agents banned", len(evs), banned)
	if banned == 0 {
		t.Fatal("the corpus should ban someone")
	}
	for round := 0; round < 4; round++ {
		order := append([]*protocol.Event{}, evs...)
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		if d := digest(order); d != ref {
			t.Fatalf("round %d: digest %s, want %s", round, d, ref)
		}
	}
}
