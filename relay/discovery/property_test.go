package discovery_test

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/discovery"
	"github.com/anp2net/relay/relay/state"
	"github.com/anp2net/relay/tasks/taskstest"
)

// corpus is a random discovery stream: profiles (some topic_only),
// capabilities, posts and replies on shared topics, claims deriving from
// posts, follows and withdrawals, beacons, DMs and revocations of the
// author's own events.
func corpus(seed uint64, agents int, base int64) []*protocol.Event {
	rng := rand.New(rand.NewPCG(seed, 11))
	pool := taskstest.Pool(agents)
	pick := func() taskstest.Agent { return pool[rng.IntN(len(pool))] }
	at := func() int64 { return base + rng.Int64N(3*86400) }
	topics := []string{"climate", "market", "weather", "translate"}
	words := []string{"coastal", "rain", "price", "yen", "bitcoin", "tide", "storm", "contract", "japanese", "forecast"}
	text := func() string {
		s := ""
		for range 6 {
			s += words[rng.IntN(len(words))] + " "
		}
		return s
	}
	var out, posts []*protocol.Event
	for i, a := range pool {
		disc := []string{"public", "public", "topic_only"}[i%3]
		out = append(out, a.Sign(protocol.KindProfile, at(), map[string]any{"name": a.Name, "discoverability": disc}),
			a.Sign(protocol.KindCapability, at(), map[string]any{}, []string{"cap", topics[rng.IntN(4)]}))
	}
	for range agents * 8 {
		a, t := pick(), []string{"t", topics[rng.IntN(len(topics))]}
		var e *protocol.Event
		switch rng.IntN(4) {
		case 0, 1:
			e = a.Sign(protocol.KindPost, at(), text(), t)
		case 2:
			if len(posts) == 0 {
				continue
			}
			root := posts[rng.IntN(len(posts))]
			e = a.Sign(protocol.KindReply, at(), text(), []string{"e", root.ID, "root"}, t)
		case 3:
			if len(posts) == 0 {
				continue
			}
			src := posts[rng.IntN(len(posts))]
			e = a.Sign(protocol.KindKnowledge, at(), map[string]any{"claim": text(), "derived_from": []string{src.ID}}, []string{"e", src.ID, "derived"}, t)
		}
		posts = append(posts, e)
		out = append(out, e)
	}
	for range agents * 3 {
		a, b := pick(), pick()
		content := map[string]any{"reason": "good"}
		if rng.IntN(3) == 0 {
			content = map[string]any{"withdraw": true}
		}
		out = append(out, a.Sign(protocol.KindSubscribe, at(), content, []string{"p", b.ID}, []string{"t", topics[rng.IntN(4)]}),
			sealedDM(a, pool[(rng.IntN(len(pool)-1)+idx(pool, a.ID)+1)%len(pool)].ID, at(), []string{"t", topics[rng.IntN(4)]}))
	}
	for range agents {
		out = append(out, pick().Sign(protocol.KindBeacon, at(), map[string]any{"intent": "seek", "about": text(), "ttl_sec": 3600 + rng.IntN(86400)},
			[]string{"cap_wanted", topics[rng.IntN(4)]}))
	}
	for range agents {
		victim := out[rng.IntN(len(out))]
		out = append(out, statetestAgent(pool, victim.AgentID).Sign(protocol.KindRevoke, at(), "", []string{"e", victim.ID}))
	}
	return out
}

func statetestAgent(pool []taskstest.Agent, id string) taskstest.Agent {
	for _, a := range pool {
		if a.ID == id {
			return a
		}
	}
	panic("unknown agent")
}

// views is everything the fold answers, for comparison.
func views(f *discovery.Fold, agents []taskstest.Agent, now int64) string {
	out := fmt.Sprintf("digest %x\n", f.Digest(now))
	for _, a := range agents {
		b, _ := f.Active(discovery.BeaconQuery{Author: a.ID}, now)
		var recent []string // the feed's candidates
		for _, e := range f.Recent([]string{a.ID}, []string{"climate", "market"}, now-7*86400, now, 50) {
			recent = append(recent, e.ID)
		}
		out += fmt.Sprintf("%s %v %v %v %v %v %v\n", a.Name, f.Following(a.ID, true), f.Followers(discovery.TargetAgent, a.ID, true),
			f.Copresence(a.ID, now, 7*86400, 100), f.Neighbors(a.ID, 10), b, recent)
	}
	return out
}

// TestViewsIndependentOfOrder: the live path (events in arrival order,
// revocations withdrawn through a lookup) and a shuffled path (revocations
// preloaded) give the same digest and the same answers.
func TestViewsIndependentOfOrder(t *testing.T) {
	const base = 1763800000
	for seed := range uint64(4) {
		evs := corpus(seed, 12, base)
		byID := map[string]*protocol.Event{}
		for _, e := range evs {
			byID[e.ID] = e
		}
		live := discovery.New()
		s1 := state.New(state.Options{Folds: []state.NamedFold{{Name: "discovery", Fold: live}}})
		for i, e := range evs {
			s1.Add(int64(i+1), e, func(id string) *protocol.Event { return byID[id] })
		}
		shuffled := append([]*protocol.Event(nil), evs...)
		rand.New(rand.NewPCG(seed, 99)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		replay := discovery.New()
		s2 := state.New(state.Options{Folds: []state.NamedFold{{Name: "discovery", Fold: replay}}})
		for _, e := range shuffled {
			s2.Preload(e)
		}
		for i, e := range shuffled {
			s2.Add(int64(i+1), e, nil)
		}
		now := int64(base + 2*86400)
		a, b := views(live, taskstest.Pool(12), now), views(replay, taskstest.Pool(12), now)
		if a != b {
			t.Fatalf("seed %d: views differ by order:\n%s\nvs\n%s", seed, a, b)
		}
		if reflect.DeepEqual(live.Digest(now), discovery.New().Digest(now)) {
			t.Fatalf("seed %d: digest of a full fold equals the empty one", seed)
		}
	}
}

// replayed folds evs through a state with revocations known first, as a
// replay does.
func replayed(evs []*protocol.Event) *discovery.Fold {
	f := discovery.New()
	s := state.New(state.Options{Folds: []state.NamedFold{{Name: "discovery", Fold: f}}})
	for _, e := range evs {
		s.Preload(e)
	}
	for i, e := range evs {
		s.Add(int64(i+1), e, nil)
	}
	return f
}
