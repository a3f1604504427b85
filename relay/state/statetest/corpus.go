// Package statetest generates random, valid event streams that exercise
// every derived view — votes, flags, appeals, overrides with cosigners,
// revocations and task lifecycles — for order-independence tests.
package statetest

import (
	"fmt"
	"math/rand/v2"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/tasks/taskstest"
)

// Corpus returns a random stream of signed events created in
// [base, base+span), deterministic for seed. Every event passes the relay's
// per-event rules and every revoke names one of its author's own events, so
// the set a relay accepts does not depend on the order it receives them in.
func Corpus(seed uint64, agents, tasks int, base, span int64) []*protocol.Event {
	rng := rand.New(rand.NewPCG(seed, 7))
	pool := taskstest.Pool(agents)
	pick := func() taskstest.Agent { return pool[rng.IntN(len(pool))] }
	at := func() int64 { return base + rng.Int64N(span) }
	var out []*protocol.Event
	var posts []*protocol.Event
	for i := range agents * 3 {
		p := pick().Sign(protocol.KindPost, at(), fmt.Sprintf("post %d", i), []string{"t", "weather"})
		posts = append(posts, p)
		out = append(out, p)
	}
	scores := []float64{-1, -0.5, 0, 0.25, 0.5, 1, 1}
	for range agents * 6 {
		v, t := pick(), pick()
		out = append(out, v.Sign(protocol.KindTrustVote, at(),
			map[string]any{"score": scores[rng.IntN(len(scores))], "reason": "seen their work"}, []string{"p", t.ID}))
	}
	out = append(out, flags(rng, pool, posts, at)...)
	out = append(out, taskstest.Lifecycles(rng, pool, tasks, base)...)
	out = append(out, revokes(rng, out, pool, base+span)...)
	return valid(out)
}

// flags makes plain flags, appeals by the post's author, and overrides
// (some cosigned by other overriders) on a few posts, so some get hidden.
func flags(rng *rand.Rand, pool []taskstest.Agent, posts []*protocol.Event, at func() int64) []*protocol.Event {
	var out []*protocol.Event
	cats := []string{"spam", "disinfo", "harassment", "other"}
	byID := map[string]taskstest.Agent{}
	for _, a := range pool {
		byID[a.ID] = a
	}
	for _, p := range posts[:len(posts)/3] {
		for range rng.IntN(6) {
			f := pool[rng.IntN(len(pool))]
			out = append(out, f.Sign(protocol.KindFlag, at(),
				map[string]any{"category": cats[rng.IntN(len(cats))], "reason": "looks bad"},
				[]string{"e", p.ID}, []string{"p", p.AgentID}))
		}
		if rng.IntN(3) == 0 {
			out = append(out, byID[p.AgentID].Sign(protocol.KindFlag, at(),
				map[string]any{"category": "appeal", "reason": "context"},
				[]string{"e", p.ID}, []string{"p", p.AgentID}, []string{"appeal", "true"}))
		}
		if rng.IntN(3) == 0 {
			o, co := pool[rng.IntN(len(pool))], pool[rng.IntN(len(pool))]
			for _, a := range []taskstest.Agent{o, co} {
				out = append(out, a.Sign(protocol.KindFlag, at(),
					map[string]any{"category": "override", "reason": "brigade", "score": -1.0},
					[]string{"e", p.ID}, []string{"p", p.AgentID}, []string{"override", "true"}, []string{"cosign", o.ID}, []string{"cosign", co.ID}))
			}
		}
	}
	return out
}

// revokes has about one event in fifteen revoked by its own author, at a
// random time after it (sometimes a revoke of a revoke).
func revokes(rng *rand.Rand, evs []*protocol.Event, pool []taskstest.Agent, end int64) []*protocol.Event {
	byID := map[string]taskstest.Agent{}
	for _, a := range pool {
		byID[a.ID] = a
	}
	var out []*protocol.Event
	for _, e := range evs {
		a, ok := byID[e.AgentID]
		if !ok || rng.IntN(15) != 0 {
			continue
		}
		r := a.Sign(protocol.KindRevoke, e.CreatedAt+rng.Int64N(max(1, end-e.CreatedAt)), "", []string{"e", e.ID})
		out = append(out, r)
		if rng.IntN(10) == 0 {
			out = append(out, a.Sign(protocol.KindRevoke, r.CreatedAt, "", []string{"e", r.ID}))
		}
	}
	return out
}

// valid keeps the events that pass the per-event kind rules, as a relay
// would (taskstest deliberately makes some broken ones).
func valid(evs []*protocol.Event) []*protocol.Event {
	out := evs[:0]
	for _, e := range evs {
		if len(protocol.CheckKind(e)) == 0 {
			out = append(out, e)
		}
	}
	return out
}

// Agents returns the first n agents of the corpus pool.
func Agents(n int) []taskstest.Agent { return taskstest.Pool(n) }

// Agent returns the pool agent with id (searching the first 1000).
func Agent(id string) taskstest.Agent {
	for _, a := range taskstest.Pool(1000) {
		if a.ID == id {
			return a
		}
	}
	panic("statetest: unknown agent " + id)
}
