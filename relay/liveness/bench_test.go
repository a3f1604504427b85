package liveness

import (
	"crypto/sha256"
	"encoding/hex"
	"runtime"
	"strconv"
	"testing"

	"github.com/anp2net/relay/protocol"
)

// Benchmarks use unsigned beats with synthetic ids (the fold never checks
// signatures): 10k agents beating every 5 minutes, 100 beats each, in
// arrival order.

const (
	benchAgents = 10_000
	benchBeats  = 100
	benchStart  = now - benchBeats*BucketSeconds
)

var benchIDs = func() []string {
	ids := make([]string, benchAgents)
	for i := range ids {
		sum := sha256.Sum256([]byte("bench-agent-" + strconv.Itoa(i)))
		ids[i] = hex.EncodeToString(sum[:])
	}
	return ids
}()

// beater builds the n-th beat of the benchmark stream in one reused event.
type beater struct {
	ev  protocol.Event
	buf [64]byte
}

// next sets b.ev to beat n (agent n mod 10k, at benchStart + 300 × (n /
// 10k)) and returns its receipt time.
func (b *beater) next(n int) int64 {
	id := strconv.AppendUint(b.buf[:0], uint64(n)+1<<60, 16) // 16 hex digits: distinct idKeys
	for len(id) < 64 {
		id = append(id, '0')
	}
	at := benchStart + int64(n/benchAgents)*BucketSeconds
	b.ev = protocol.Event{ID: string(id), AgentID: benchIDs[n%benchAgents], CreatedAt: at, Kind: protocol.KindHealth,
		Content: `{"status":"ok","latency_ms":180}`}
	return at
}

func benchFold() *Fold {
	f := New(Options{})
	var b beater
	for n := range benchAgents * benchBeats {
		f.Add(&b.ev, b.next(n))
	}
	return f
}

// BenchmarkAdd is one beat folded into a window already holding 10k agents
// × 100 beats (content parsing included).
func BenchmarkAdd(b *testing.B) {
	f := benchFold()
	var bt beater
	n := benchAgents * benchBeats
	b.ReportAllocs()
	for b.Loop() {
		f.Add(&bt.ev, bt.next(n))
		n++
	}
	b.ReportMetric(float64(runtime.GOMAXPROCS(0)), "procs")
}

// BenchmarkAgent is GET /agents/{id}/health at 10k agents × 100 beats.
func BenchmarkAgent(b *testing.B) {
	f := benchFold()
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		f.Agent(benchIDs[i%benchAgents], now)
		i++
	}
}

// BenchmarkSummary is one GET /agents row at 10k agents × 100 beats.
func BenchmarkSummary(b *testing.B) {
	f := benchFold()
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		f.Summary(benchIDs[i%benchAgents], now)
		i++
	}
}

// BenchmarkMemoryPerAgent reports the heap the window keeps per agent and
// per beat at 10k agents × 100 beats.
func BenchmarkMemoryPerAgent(b *testing.B) {
	for b.Loop() {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		f := benchFold()
		runtime.GC()
		runtime.ReadMemStats(&after)
		used := float64(after.HeapAlloc - before.HeapAlloc)
		b.ReportMetric(used/benchAgents, "B/agent")
		b.ReportMetric(used/(benchAgents*benchBeats), "B/beat")
		runtime.KeepAlive(f)
	}
}
