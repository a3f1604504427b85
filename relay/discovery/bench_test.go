package discovery_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/discovery"
)

// benchFold folds agents × posts unsigned events (the fold never checks
// signatures) over a Zipf vocabulary of 20,000 words and 200 topics, with
// replies to random earlier posts and one capability per agent.
func benchFold(tb testing.TB, agents, posts int) (*discovery.Fold, []string, int64) {
	rng := rand.New(rand.NewPCG(1, 2))
	zipf := rand.NewZipf(rand.New(rand.NewPCG(3, 4)), 1.1, 1, 19999)
	ids := make([]string, agents)
	for i := range ids {
		ids[i] = fmt.Sprintf("%064x", i+1)
	}
	f := benchNew(tb)
	const base = 1763800000
	var roots []string
	n := 0
	for p := range posts {
		for a, id := range ids {
			n++
			text := ""
			for range 12 {
				text += fmt.Sprintf("w%d ", zipf.Uint64())
			}
			e := &protocol.Event{ID: fmt.Sprintf("%064x", 1<<40+n), AgentID: id, Kind: protocol.KindPost,
				CreatedAt: base + int64(p*3600+a%3600), Content: text,
				Tags: [][]string{{"t", fmt.Sprintf("topic%d", rng.IntN(200))}}}
			if len(roots) > 0 && rng.IntN(3) == 0 {
				e.Kind = protocol.KindReply
				e.Tags = append(e.Tags, []string{"e", roots[rng.IntN(len(roots))], "root"})
			} else {
				roots = append(roots, e.ID)
			}
			f.Add(e)
		}
	}
	for i, id := range ids {
		f.Add(&protocol.Event{ID: fmt.Sprintf("%064x", 1<<50+i), AgentID: id, Kind: protocol.KindCapability,
			CreatedAt: base, Tags: [][]string{{"cap", fmt.Sprintf("cap%d", rng.IntN(500))}}})
	}
	return f, ids, base + int64(posts*3600)
}

// measure runs q b.N times over random agents and reports the p99 latency
// and the process's CPU time per query.
func measure(b *testing.B, ids []string, q func(id string)) {
	rng := rand.New(rand.NewPCG(5, 6))
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	cpu0 := cpuTime()
	for range b.N {
		id := ids[rng.IntN(len(ids))]
		t0 := time.Now()
		q(id)
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
}

var (
	benchOnce sync.Once
	bench     struct {
		f   *discovery.Fold
		ids []string
		now int64
	}
)

// shared is the 10,000-agent, 200,000-post fold every query benchmark reads.
func shared(tb testing.TB) (*discovery.Fold, []string, int64) {
	benchOnce.Do(func() { bench.f, bench.ids, bench.now = benchFold(tb, 10000, 20) })
	return bench.f, bench.ids, bench.now
}

func BenchmarkNeighbors10k(b *testing.B) {
	f, ids, _ := shared(b)
	measure(b, ids, func(id string) { f.Neighbors(id, 20) })
}

func BenchmarkCopresence10k(b *testing.B) {
	f, ids, now := shared(b)
	measure(b, ids, func(id string) { f.Copresence(id, now, 7*86400, 50) })
}

// BenchmarkFoldPost is the cost of folding one post into a fold that holds
// 1,000 agents' 20,000 posts.
func BenchmarkFoldPost(b *testing.B) {
	f, ids, now := benchFold(b, 1000, 20)
	evs := make([]*protocol.Event, b.N)
	for i := range evs {
		evs[i] = &protocol.Event{ID: fmt.Sprintf("%064x", 1<<60+i), AgentID: ids[i%len(ids)], Kind: protocol.KindPost,
			CreatedAt: now + int64(i), Content: "coastal harbor temperature w1 w2 w3 w17 w400", Tags: [][]string{{"t", "topic7"}}}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for _, e := range evs {
		f.Add(e)
	}
}
