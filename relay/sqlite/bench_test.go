package sqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/anp2net/relay/protocol"
)

// BenchmarkAppendBatch measures the writer alone: pre-signed events in
// batches of 64 (what 64 concurrent publishers produce), durable commits.
func BenchmarkAppendBatch(b *testing.B) {
	s, err := Open(filepath.Join(b.TempDir(), "bench.db"), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	recs := make([]Record, b.N)
	for i := range recs {
		e := &protocol.Event{CreatedAt: int64(1e9 + i), Kind: 1, Content: fmt.Sprint("event ", i), Tags: [][]string{{"t", fmt.Sprint("t", i%50)}, {"p", protocol.AgentIDOf(key(i % 100))}}}
		e.Sign(key(i % 100))
		recs[i] = Record{Event: e}
	}
	b.ResetTimer()
	for i := 0; i < b.N; i += 64 {
		if _, err := s.AppendBatch(context.Background(), recs[i:min(i+64, b.N)]); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}
