package trust

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/anp2net/relay/protocol"
)

// Benchmarks use unsigned events with synthetic ids: the views never check
// signatures, and signing 100k events would dominate the setup.

const (
	benchAgents = 20_000
	benchVotes  = 100_000
)

func benchVote(r *rand.Rand, i int, now int64) *protocol.Event {
	voter := r.IntN(benchAgents)
	target := (voter + 1 + r.IntN(benchAgents-1)) % benchAgents
	score := []string{"1", "0.5", "-1", "0.8", "1", "0"}[r.IntN(6)]
	return &protocol.Event{ID: fakeID("vote", i), AgentID: fakeID("agent", voter), Kind: protocol.KindTrustVote,
		CreatedAt: now - int64(r.IntN(90*86400)), Content: `{"score":` + score + `,"reason":"benchmark"}`,
		Tags: [][]string{{"p", fakeID("agent", target)}}}
}

var (
	benchOnce   sync.Once
	benchEvents []*protocol.Event
)

func benchVoteEvents() []*protocol.Event {
	benchOnce.Do(func() {
		r := rand.New(rand.NewPCG(1, 2))
		for i := 0; i < benchVotes; i++ {
			benchEvents = append(benchEvents, benchVote(r, i, t0))
		}
	})
	return benchEvents
}

func benchGraph() *Graph {
	g := NewGraph(Options{})
	for _, e := range benchVoteEvents() {
		g.Add(e)
	}
	return g
}

// BenchmarkTrustCompute is one full trust.v1 computation at 100k votes among
// 20k agents: the cost of each snapshot refresh.
func BenchmarkTrustCompute(b *testing.B) {
	g := benchGraph()
	b.ReportAllocs()
	for b.Loop() {
		g.Compute(t0)
	}
	s := g.Compute(t0)
	b.ReportMetric(float64(s.Iterations), "passes")
	b.ReportMetric(float64(runtime.GOMAXPROCS(0)), "procs")
}

// BenchmarkTrustDigest is Digest at 100k votes (compute + JCS + SHA-256).
func BenchmarkTrustDigest(b *testing.B) {
	g := benchGraph()
	for b.Loop() {
		g.Digest(t0)
	}
}

// BenchmarkGraphAdd is the cost of folding one vote into a graph that
// already holds 100k.
func BenchmarkGraphAdd(b *testing.B) {
	g := benchGraph()
	r := rand.New(rand.NewPCG(3, 4))
	evs := make([]*protocol.Event, b.N)
	for i := range evs {
		evs[i] = benchVote(r, benchVotes+i, t0)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for _, e := range evs {
		g.Add(e)
	}
}

// BenchmarkModerationAdd is the cost of folding one event (90% posts, 10%
// flags) into the moderation view.
func BenchmarkModerationAdd(b *testing.B) {
	m := NewModeration(NewGraph(Options{}), ModerationOptions{})
	evs := make([]*protocol.Event, b.N)
	for i := range evs {
		evs[i] = benchModEvent(i)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for _, e := range evs {
		m.Add(e)
	}
}

func benchModEvent(i int) *protocol.Event {
	e := &protocol.Event{ID: fakeID("ev", i), AgentID: fakeID("agent", i%benchAgents), Kind: protocol.KindPost,
		CreatedAt: t0 - int64(i%(60*86400)), Content: "hello"}
	if i%10 == 9 {
		e.Kind, e.Content = protocol.KindFlag, `{"category":"spam"}`
		e.Tags = [][]string{{"e", fakeID("ev", i/10)}}
	}
	return e
}

// BenchmarkModerationCompute derives visibility for 20k flags on 10k events
// among 200k events and 100k votes.
func BenchmarkModerationCompute(b *testing.B) {
	g := benchGraph()
	m := NewModeration(g, ModerationOptions{})
	for i := 0; i < 200_000; i++ {
		m.Add(benchModEvent(i))
	}
	ts := g.Compute(t0)
	for b.Loop() {
		m.compute(ts)
	}
	s := m.compute(ts)
	b.ReportMetric(float64(len(s.HiddenEvents())), "hidden")
}

// BenchmarkAgentQuery is the GET /trust/{id} read path under parallel load:
// an atomic load and a map lookup.
func BenchmarkAgentQuery(b *testing.B) {
	g := benchGraph()
	g.Refresh(t0)
	ids := make([]string, benchAgents)
	for i := range ids {
		ids[i] = fakeID("agent", i)
	}
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			s := g.Current(t0)
			_ = s.Agent(ids[i%benchAgents], false)
			i++
		}
	})
}

// BenchmarkMemoryPerEvent reports the heap the moderation view keeps per
// event (1M posts and flags by 20k agents) and the trust graph per vote.
func BenchmarkMemoryPerEvent(b *testing.B) {
	for b.Loop() {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		m := NewModeration(NewGraph(Options{}), ModerationOptions{})
		const n = 1_000_000
		for i := 0; i < n; i++ {
			m.Add(benchModEvent(i))
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "modB/event")
		runtime.KeepAlive(m)

		runtime.GC()
		runtime.ReadMemStats(&before)
		g := benchGraph()
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/benchVotes, "graphB/vote")
		runtime.KeepAlive(g)
	}
}

// TestConcurrentUse runs one writer against many readers; run with -race.
func TestConcurrentUse(t *testing.T) {
	g := NewGraph(Options{MinInterval: time.Millisecond})
	m := NewModeration(g, ModerationOptions{Options: Options{MinInterval: time.Millisecond}})
	r := rand.New(rand.NewPCG(5, 6))
	var evs []*protocol.Event
	for i := 0; i < 3000; i++ {
		if i%3 == 0 {
			evs = append(evs, benchVote(r, i, t0))
		} else {
			evs = append(evs, benchModEvent(i))
		}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	for k := 0; k < 4; k++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				default:
				}
				now := int64(t0 + (i%5)*60)
				id := fakeID("agent", i%50)
				_ = g.Current(now).Agent(id, true)
				_ = g.TrustReceived(id, 0, -1, 10)
				ms := m.Current(now)
				_ = ms.Event(fakeID("ev", i%300))
				_ = m.Hidden(fakeID("ev", i%300))
			}
		}()
	}
	for i, e := range evs {
		g.Add(e)
		m.Add(e)
		if i%7 == 0 {
			g.Remove(e)
			m.Remove(e)
		}
	}
	close(done)
	wg.Wait()
	if a, b := fmt.Sprintf("%x", m.Digest(t0)), fmt.Sprintf("%x", m.Compute(t0).Digest()); a != b {
		t.Fatal("digest unstable")
	}
}
