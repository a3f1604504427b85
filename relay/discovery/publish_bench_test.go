package discovery_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"math"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/discovery"
)

// publishFold is the fold a relay under `anp2 bench` holds: 2,000 agents
// with a profile and a capability, and a fill of 40,000 events shaped as
// the bench's fillLog signs them (kinds 1–3 — the kind 3 DMs stay out of
// the fold — each with a t tag of 50 topics and a p tag), over six days
// before now.
func publishFold(tb testing.TB, agents int) (*discovery.Fold, []string, int64) {
	const now = 1763800000
	ids := make([]string, agents)
	for i := range ids {
		ids[i] = hexID("agent", i)
	}
	f := benchNew(tb)
	for i, id := range ids {
		f.Add(&protocol.Event{ID: hexID("profile", i), AgentID: id, Kind: protocol.KindProfile, CreatedAt: now - 7*86400,
			Content: fmt.Sprintf(`{"name":"agent %d","about":"bench agent number %d"}`, i, i)})
		f.Add(&protocol.Event{ID: hexID("capability", i), AgentID: id, Kind: protocol.KindCapability, CreatedAt: now - 7*86400,
			Content: "{}", Tags: [][]string{{"cap", fmt.Sprint("cap", i%40)}}})
	}
	for j := range 20 * agents {
		f.Add(&protocol.Event{ID: hexID("fill", j), AgentID: ids[j%agents], CreatedAt: now - int64(j%(6*86400)),
			Kind: int64(1 + j%3), Content: fmt.Sprint("fill ", j),
			Tags: [][]string{{"t", fmt.Sprint("topic", j%50)}, {"p", ids[(j+1)%agents]}}})
	}
	return f, ids, now
}

// BenchmarkFoldPublish is the fold's cost per event of `anp2 bench`'s
// publish phase: kind 1 posts, each with one t tag of 50 topics, by 2,000
// agents, created at the bench's clock: 5,000 a second, or all in one
// second as `anp2 bench` signs them (random ids tied on created_at). The
// store is "filling" (bulk mode, as in a relay that folded from empty and
// has not saved yet) or "saved" (after a save, as a relay serves from
// then on).
func BenchmarkFoldPublish(b *testing.B) {
	for _, mode := range []string{"filling", "saved"} {
		for _, perSecond := range []int{5000, 0} {
			benchFoldPublish(b, mode, perSecond)
		}
	}
}

func benchFoldPublish(b *testing.B, mode string, perSecond int) {
	name := fmt.Sprint(mode, "/", perSecond, "/s")
	if perSecond == 0 {
		name, perSecond = mode+"/one-second", math.MaxInt
	}
	b.Run(name, func(b *testing.B) {
		f, ids, now := publishFold(b, 2000)
		if mode == "saved" {
			f.PrepareSnapshot()
			f.CaptureSnapshot()
		}
		f.FlushStore() // the fill's rows are not the posts' cost
		evs := make([]*protocol.Event, b.N)
		for i := range evs {
			evs[i] = &protocol.Event{ID: hexID("post", i), AgentID: ids[i%len(ids)], Kind: protocol.KindPost,
				CreatedAt: now + int64(i/perSecond), Content: fmt.Sprintf("bench full event %d at %d", i, now),
				Tags: [][]string{{"t", fmt.Sprint("topic", i%50)}}}
		}
		foldAll(b, f, evs)
	})
}

// BenchmarkFoldProfile is the fold's cost per kind 0: agents publish new
// revisions of their profiles (the fold's 2,000 and new ones, about three
// revisions each), half of them stating their discoverability.
func BenchmarkFoldProfile(b *testing.B) {
	f, ids, now := publishFold(b, 2000)
	agents := max(len(ids), b.N/3)
	evs := make([]*protocol.Event, b.N)
	for i := range evs {
		a := i % agents
		id := hexID("agent", a) // ids[a] for the first 2,000
		content := fmt.Sprintf(`{"name":"agent %d","about":"bench agent revision %d"}`, a, i)
		if i%2 == 0 {
			content = fmt.Sprintf(`{"name":"agent %d","about":"bench agent revision %d","discoverability":"public"}`, a, i)
		}
		evs[i] = &protocol.Event{ID: hexID("revision", i), AgentID: id, Kind: protocol.KindProfile, CreatedAt: now + int64(i), Content: content}
	}
	foldAll(b, f, evs)
}

// foldAll folds evs as the measured loop, reporting allocations and the
// process's CPU time per event (every thread: the garbage collector's
// too), which a loaded machine does not inflate as it does the wall time.
func foldAll(b *testing.B, f *discovery.Fold, evs []*protocol.Event) {
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime()
	for _, e := range evs {
		f.Add(e)
	}
	f.FlushStore() // what the buffer holds is part of the cost
	b.StopTimer()
	b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(len(evs)), "cpu-ns/op")
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// hexID is a 64-hex id as random as a real one (ids and agent_ids that
// share long prefixes would make every comparison slower than it is).
func hexID(what string, i int) string {
	h := sha256.Sum256(fmt.Appendf(nil, "%s %d", what, i))
	return hex.EncodeToString(h[:])
}

// BenchmarkRecent10k is the feed's candidate read: an author's and two
// topics' newest 300 stubs in 7 days.
func BenchmarkRecent10k(b *testing.B) {
	f, ids, now := shared(b)
	measure(b, ids, func(id string) { f.Recent([]string{id}, []string{"topic7", "topic9"}, now-7*86400, now, 300) })
}

// BenchmarkFoldHeap reports the live heap of the 10,000-agent,
// 200,000-post fold the query benchmarks read (one build per run).
func BenchmarkFoldHeap(b *testing.B) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f, _, _ := benchFold(b, 10000, 20)
	runtime.GC()
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/(1<<20), "heap-MiB")
	f.Snapshot(io.Discard) // commits the store
	b.ReportMetric(float64(f.DiskSize())/(1<<20), "store-MiB")
	runtime.KeepAlive(f)
}
