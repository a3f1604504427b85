package branches

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"runtime"
	"testing"

	"github.com/anp2net/relay/protocol"
)

// benchEvents returns n unsigned posts with distinct ids (the fold checks
// no signature of a post).
func benchEvents(n int) []*protocol.Event {
	evs := make([]*protocol.Event, n)
	for i := range evs {
		sum := sha256.Sum256(fmt.Appendf(nil, "ev-%d", i))
		evs[i] = &protocol.Event{ID: hex.EncodeToString(sum[:]), AgentID: "a", Kind: protocol.KindPost,
			CreatedAt: 1_780_000_000 + int64(i%86400)}
	}
	return evs
}

// BenchmarkIDIndex reports the heap bytes the fold keeps per folded event
// (its id index: every event's id and time, for the forks' roots), and the
// cost of restoring 1M events' saved form.
func BenchmarkIDIndex(b *testing.B) {
	const n = 1_000_000
	evs := benchEvents(n)
	b.Run("memory", func(b *testing.B) {
		for b.Loop() {
			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			f := NewFold()
			for _, e := range evs {
				f.Add(e)
			}
			runtime.GC()
			runtime.ReadMemStats(&after)
			b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "B/event")
			runtime.KeepAlive(f)
		}
	})
	f := NewFold()
	for _, e := range evs {
		f.Add(e)
	}
	var buf bytes.Buffer
	if err := f.Snapshot(&buf); err != nil {
		b.Fatal(err)
	}
	b.Run("restore", func(b *testing.B) {
		for b.Loop() {
			if err := NewFold().Restore(bytes.NewReader(buf.Bytes()), nil); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/event")
		b.ReportMetric(float64(buf.Len())/n, "saved-B/event")
	})
}
