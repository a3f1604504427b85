package trust

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/anp2net/relay/protocol"
)

// stream is a random mix of posts, votes, flags, appeals and cosigned
// overrides among a few agents, with a subset marked for revocation.
type stream struct {
	events  []*protocol.Event
	revoked map[string]bool
	posts   []*protocol.Event
	agents  int
}

func randomStream(seed uint64) stream {
	r := rand.New(rand.NewPCG(seed, 7))
	s := stream{revoked: map[string]bool{}, agents: 9}
	// Few distinct timestamps, so that same-second ties are common.
	when := func() int64 { return t0 - int64(r.IntN(40))*86400/4 - int64(r.IntN(3))*1800 }
	for i := 0; i < 14; i++ {
		p := post(r.IntN(s.agents), when(), fmt.Sprint("post ", i))
		s.posts = append(s.posts, p)
		s.events = append(s.events, p)
	}
	scores := []float64{-1, -0.5, 0, 0.3, 1, 1}
	for i := 0; i < 70; i++ {
		var targets []int
		for n := 1 + r.IntN(3); n > 0; n-- {
			targets = append(targets, r.IntN(s.agents))
		}
		s.events = append(s.events, vote(r.IntN(s.agents), when(), scores[r.IntN(len(scores))], fmt.Sprint("v", i), targets...))
	}
	// Agent 0 is likely the top-ranked agent, so its overrides count.
	for v := 1; v < s.agents; v++ {
		s.events = append(s.events, vote(v, t0+10*86400, 1, "moderator", 0))
	}
	categories := []string{"spam", "spam", "disinfo", "override", "override", "appeal", "collusion"}
	overriders := map[string][]int{}
	for i := 0; i < 90; i++ {
		target := s.posts[r.IntN(len(s.posts))]
		from := r.IntN(s.agents)
		category := categories[r.IntN(len(categories))]
		if category == "override" {
			if r.IntN(3) == 0 {
				from = 0
			}
			if prev := overriders[target.ID]; len(prev) > 0 && r.IntN(2) == 0 {
				extra := cosign(prev...)
				overriders[target.ID] = append(prev, from)
				s.events = append(s.events, flag(from, target.CreatedAt+int64(r.IntN(8))*1200, category, target, extra...))
				continue
			}
			overriders[target.ID] = append(overriders[target.ID], from)
		}
		var extra [][]string
		switch r.IntN(5) {
		case 0:
			extra = append(extra, []string{"override", "true"})
		case 1:
			extra = append(extra, []string{"appeal", "true"})
		}
		if category == "override" || len(extra) > 0 && extra[0][0] == "override" || r.IntN(8) == 0 {
			extra = append(extra, cosign(r.IntN(s.agents), r.IntN(s.agents), r.IntN(s.agents))...)
		}
		s.events = append(s.events, flag(from, target.CreatedAt+int64(r.IntN(8))*1200, category, target, extra...))
	}
	for _, e := range s.events {
		if r.IntN(7) == 0 {
			s.revoked[e.ID] = true
		}
	}
	return s
}

// op is one Add or Remove.
type op struct {
	ev     *protocol.Event
	remove bool
}

// orders returns several operation sequences that all end with the same
// set: the events minus the revoked ones.
func (s stream) orders(seed uint64) map[string][]op {
	r := rand.New(rand.NewPCG(seed, 11))
	out := map[string][]op{}
	var inOrder []op
	for _, e := range s.events {
		inOrder = append(inOrder, op{ev: e})
	}
	for _, e := range s.events {
		if s.revoked[e.ID] {
			inOrder = append(inOrder, op{ev: e, remove: true})
		}
	}
	out["in order, then revocations"] = inOrder

	var kept []op
	for _, e := range s.events {
		if !s.revoked[e.ID] {
			kept = append(kept, op{ev: e})
		}
	}
	for i := 0; i < 3; i++ {
		sh := append([]op(nil), kept...)
		r.Shuffle(len(sh), func(a, b int) { sh[a], sh[b] = sh[b], sh[a] })
		out[fmt.Sprint("kept only, shuffle ", i)] = sh
	}
	rev := make([]op, len(kept))
	for i, o := range kept {
		rev[len(kept)-1-i] = o
	}
	out["kept only, reversed"] = rev

	for i := 0; i < 3; i++ {
		// Shuffled adds, each revocation at a random point after its add.
		perm := r.Perm(len(s.events))
		var seq []op
		for _, k := range perm {
			seq = append(seq, op{ev: s.events[k]})
		}
		for _, e := range s.events {
			if s.revoked[e.ID] {
				at := 1 + indexOf(seq, e) + r.IntN(len(seq)-indexOf(seq, e))
				seq = append(seq[:at], append([]op{{ev: e, remove: true}}, seq[at:]...)...)
			}
		}
		out[fmt.Sprint("interleaved revocations ", i)] = seq
	}
	return out
}

func indexOf(seq []op, e *protocol.Event) int {
	for i, o := range seq {
		if o.ev == e && !o.remove {
			return i
		}
	}
	return -1
}

// observe returns everything a client can read from the views at now.
func (s stream) observe(t *testing.T, v views, now int64) string {
	ts, ms := v.g.Compute(now), v.m.Compute(now)
	obs := map[string]any{
		"trust_digest":      fmt.Sprintf("%x", v.g.Digest(now)),
		"moderation_digest": fmt.Sprintf("%x", v.m.Digest(now)),
		"graph":             ts.TrustGraph(0, 0),
		"hidden":            ms.HiddenEvents(),
		"active":            ms.ActiveAgents,
		"iterations":        ts.Iterations,
	}
	for a := 0; a < s.agents; a++ {
		id := agent(a)
		obs["agent "+id] = ts.Agent(id, true)
		obs["received "+id] = v.g.TrustReceived(id, 0, -1, 0)
		obs["weight "+id] = ts.Weight(id)
		obs["top5 "+id] = ts.InTopPercent(id, 5)
		obs["notices "+id] = ms.HiddenBy(id)
	}
	for _, p := range s.posts {
		obs["flags "+p.ID] = ms.Event(p.ID)
		obs["hidden "+p.ID] = ms.Hidden(p.ID)
	}
	return mustJSON(t, obs)
}

// TestOrderIndependence folds random streams in several orders, with
// revocations, and requires identical digests and query results.
func TestOrderIndependence(t *testing.T) {
	hidden, transitions, pending, cosigned := 0, 0, 0, 0
	for seed := uint64(1); seed <= 8; seed++ {
		s := randomStream(seed)
		// Times between flags catch debounced changes still pending.
		nows := []int64{t0 - 86400, t0 + 3600, t0 + 4*86400}
		for _, p := range s.posts[:4] {
			nows = append(nows, p.CreatedAt+2400, p.CreatedAt+4800, p.CreatedAt+7200)
		}
		var want []string
		wantFrom := ""
		for name, seq := range s.orders(seed) {
			v := newViews()
			for _, o := range seq {
				if o.remove {
					v.remove(o.ev)
				} else {
					v.add(o.ev)
				}
			}
			var got []string
			for _, now := range nows {
				got = append(got, s.observe(t, v, now))
			}
			if want == nil {
				want, wantFrom = got, name
				for _, now := range nows {
					ms := v.m.Compute(now)
					hidden += len(ms.HiddenEvents())
					for _, em := range ms.events {
						transitions += len(em.History)
						if em.Pending != nil {
							pending++
						}
						for _, f := range em.Flags {
							if len(f.Cosigners) > 0 {
								cosigned++
							}
						}
					}
				}
				continue
			}
			for i := range nows {
				if got[i] != want[i] {
					t.Fatalf("seed %d at now %d: %q and %q disagree:\n%s\n%s", seed, nows[i], name, wantFrom, got[i], want[i])
				}
			}
		}
	}
	// The streams must exercise what they claim to.
	t.Logf("%d hidden, %d transitions, %d pending, %d cosigned overrides", hidden, transitions, pending, cosigned)
	if hidden == 0 || transitions <= hidden || pending == 0 || cosigned == 0 {
		t.Fatalf("random streams: %d hidden, %d transitions, %d pending, %d cosigned overrides: not a useful test",
			hidden, transitions, pending, cosigned)
	}
}

// TestIncrementalMatchesNaive compares the graph with a direct
// transcription of the trust.v1 rules over random streams.
func TestIncrementalMatchesNaive(t *testing.T) {
	for seed := uint64(1); seed <= 8; seed++ {
		s := randomStream(seed)
		v := newViews()
		var kept []*protocol.Event
		for _, e := range s.events {
			v.add(e)
		}
		for _, e := range s.events {
			if s.revoked[e.ID] {
				v.remove(e)
			} else {
				kept = append(kept, e)
			}
		}
		now := int64(t0 + 7200)
		snap := v.g.Compute(now)
		want, iterations := naiveTrust(kept, EvalTime(now))
		if snap.Iterations != iterations {
			t.Fatalf("seed %d: %d iterations, naive %d", seed, snap.Iterations, iterations)
		}
		for a := 0; a < s.agents; a++ {
			id := agent(a)
			if got := snap.WeightedScore(id); !near(got, want[id]) {
				t.Fatalf("seed %d agent %d: weighted %v, naive %v", seed, a, got, want[id])
			}
		}
	}
}

// naiveTrust is trust.v1 written out plainly: latest vote per pair by
// (created_at, id), zero scores and self-votes dropped, math.Exp decay,
// the new-agent penalty from each voter's earliest kind 0 or counted vote.
func naiveTrust(events []*protocol.Event, now int64) (map[string]float64, int) {
	type pair struct{ from, to string }
	latest := map[pair]*protocol.Event{}
	first := map[string]int64{}
	for _, e := range events {
		counted := e.Kind == protocol.KindProfile
		if e.Kind == protocol.KindTrustVote {
			_, _, err := protocol.ParseVote(e.Content)
			for _, to := range e.TagValues("p") {
				counted = counted || err == nil && protocol.IsHex64(to) && to != e.AgentID
			}
		}
		if f, ok := first[e.AgentID]; counted && (!ok || e.CreatedAt < f) {
			first[e.AgentID] = e.CreatedAt
		}
	}
	for _, e := range events {
		if e.Kind != protocol.KindTrustVote {
			continue
		}
		for _, to := range e.TagValues("p") {
			k := pair{e.AgentID, to}
			if to != e.AgentID && (latest[k] == nil || protocol.Less(latest[k], e)) {
				latest[k] = e
			}
		}
	}
	c := map[pair]float64{}
	targets := map[string]float64{}
	for k, e := range latest {
		score, _, _ := protocol.ParseVote(e.Content)
		if score == 0 {
			continue
		}
		age := float64(max(0, now-e.CreatedAt)) / 86400
		c[k] = score * math.Exp(-0.6931471805599453*age/30)
		targets[k.from]++
	}
	trust := map[string]float64{}
	for it := 1; it <= MaxIterations; it++ {
		next := map[string]float64{}
		for k, ck := range c {
			penalty := 0.5 + 0.5*min(1, float64(max(0, now-first[k.from]))/(14*86400))
			next[k.to] += math.Sqrt(max(0, trust[k.from]+1)) * min(1, targets[k.from]/3) * penalty * ck
		}
		delta := 0.0
		for a := range next {
			delta = max(delta, math.Abs(next[a]-trust[a]))
		}
		for a := range trust {
			delta = max(delta, math.Abs(next[a]-trust[a]))
		}
		trust = next
		if delta < Tolerance {
			return trust, it
		}
	}
	return trust, MaxIterations
}
