package tasks

import (
	"bytes"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/anp2net/relay/protocol"
	tt "github.com/anp2net/relay/tasks/taskstest"
)

const benchTasks = 10000

var (
	corpusOnce sync.Once
	corpus     []*protocol.Event
)

func benchCorpus() []*protocol.Event {
	corpusOnce.Do(func() { corpus = tt.Corpus(1, benchTasks, t0) })
	return corpus
}

func benchFold(b *testing.B) (*Fold, []string) {
	b.Helper()
	evs := benchCorpus()
	f := New(tt.Weight)
	var ids []string
	for _, e := range evs {
		f.Add(e)
		if e.Kind == protocol.KindTaskRequest {
			ids = append(ids, e.ID)
		}
	}
	b.Logf("%d tasks, %d events, GOMAXPROCS %d", f.Len(), len(evs), runtime.GOMAXPROCS(0))
	return f, ids
}

// BenchmarkAdd folds the whole corpus (about 6 events per task) per op.
func BenchmarkAdd(b *testing.B) {
	evs := benchCorpus()
	b.ResetTimer()
	for range b.N {
		f := New(nil)
		for _, e := range evs {
			f.Add(e)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(evs)), "ns/event")
}

// BenchmarkTask is GET /task/{id} over 10k tasks, reporting p99 too.
func BenchmarkTask(b *testing.B) {
	f, ids := benchFold(b)
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		start := time.Now()
		if _, ok := f.Task(ids[(i*7919)%len(ids)], t0+3600, tt.Weight); !ok {
			b.Fatal("missing")
		}
		lat = append(lat, time.Since(start))
	}
	reportP99(b, lat)
}

// reportP99 reports the 99th percentile of lat as "p99-ns".
func reportP99(b *testing.B, lat []time.Duration) {
	slices.Sort(lat)
	if len(lat) > 0 {
		b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "p99-ns")
	}
}

// BenchmarkTaskCold drops the derivation cache before every read.
func BenchmarkTaskCold(b *testing.B) {
	f, ids := benchFold(b)
	b.ResetTimer()
	for i := range b.N {
		id := ids[(i*7919)%len(ids)]
		t := f.lookup(id)
		t.cache.Store(nil)
		f.Task(id, t0+3600, tt.Weight)
	}
}

// BenchmarkListByStatus scans all 10k tasks for one status, 50 results.
func BenchmarkListByStatus(b *testing.B) {
	f, _ := benchFold(b)
	f.List(Filter{}, t0, tt.Weight) // warm caches
	b.ResetTimer()
	for range b.N {
		f.List(Filter{Status: StatusTimedOut, Limit: 50}, t0+1e6, tt.Weight)
	}
}

// BenchmarkDigest hashes the canonical state of all 10k tasks.
func BenchmarkDigest(b *testing.B) {
	f, _ := benchFold(b)
	b.ResetTimer()
	for range b.N {
		f.Digest(t0 + 3600)
	}
}

// BenchmarkRestore restores the 10k-task corpus: "saved" decodes the
// saved form (tasks.state/3); "refold" adds the parsed events again, which
// is what restoring the former ids-only form cost once every event had been
// read back from the log (that reading not counted).
func BenchmarkRestore(b *testing.B) {
	f, _ := benchFold(b)
	var buf bytes.Buffer
	if err := f.Snapshot(&buf); err != nil {
		b.Fatal(err)
	}
	evs := benchCorpus()
	b.Run("saved", func(b *testing.B) {
		for range b.N {
			g := New(nil)
			if err := g.Restore(bytes.NewReader(buf.Bytes()), nil); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(evs)), "ns/event")
		b.ReportMetric(float64(buf.Len())/float64(len(evs)), "saved-B/event")
	})
	b.Run("refold", func(b *testing.B) {
		for range b.N {
			g := New(nil)
			for _, e := range evs {
				g.Add(e)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(evs)), "ns/event")
	})
}
