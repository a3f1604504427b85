package sqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/internal/pipeload"
)

// BenchmarkAppendBatch measures the writer alone: pre-signed events in
// batches of 64 (what 64 concurrent publishers produce), durable commits.
func BenchmarkAppendBatch(b *testing.B) {
	s, err := Open(filepath.Join(b.TempDir(), "bench.db"), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	recs := benchRecords(b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i += 64 {
		if _, err := s.AppendBatch(context.Background(), recs[i:min(i+64, b.N)]); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkAppendBulk measures a bulk load of b.N events into an empty log
// in batches of 8192, index rebuild included; compare its events/s with
// BenchmarkAppendBatch at the same -benchtime (e.g. -benchtime 200000x).
func BenchmarkAppendBulk(b *testing.B) {
	s, err := Open(filepath.Join(b.TempDir(), "bench.db"), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	recs := benchRecords(b.N)
	ctx := context.Background()
	b.ResetTimer()
	if err := s.BeginBulk(ctx); err != nil {
		b.Fatal(err)
	}
	for i := 0; i < b.N; i += 8192 {
		if _, err := s.AppendBatch(ctx, recs[i:min(i+8192, b.N)]); err != nil {
			b.Fatal(err)
		}
	}
	rebuild := time.Now()
	if err := s.EndBulk(nil); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(time.Since(rebuild).Seconds(), "rebuild-s")
}

// benchRecords signs n events by 100 agents, with t and p tags.
func benchRecords(n int) []Record {
	recs := make([]Record, n)
	for i := range recs {
		e := &protocol.Event{CreatedAt: int64(1e9 + i), Kind: 1, Content: fmt.Sprint("event ", i), Tags: [][]string{{"t", fmt.Sprint("t", i%50)}, {"p", protocol.AgentIDOf(key(i % 100))}}}
		e.Sign(key(i % 100))
		recs[i] = Record{Event: e}
	}
	return recs
}

// burstRecords is benchRecords at a publish rate of 5,000 events a
// second from 2,000 agents: events share their created_at 5,000 at a
// time, as under anp2 bench.
func burstRecords(n int) []Record {
	recs := make([]Record, n)
	for i := range recs {
		e := &protocol.Event{CreatedAt: int64(1e9 + i/5000), Kind: 1, Content: fmt.Sprint("event ", i), Tags: [][]string{{"t", fmt.Sprint("t", i%50)}}}
		e.Sign(key(i % 2000))
		recs[i] = Record{Event: e}
	}
	return recs
}

// BenchmarkAppendGroup measures durable appends in groups of n (what n
// concurrent publishers give one transaction) into a log of 20,000
// events, reporting this process's CPU per event beside wall time: one
// event a second (spread) and 5,000 a second (burst).
func BenchmarkAppendGroup(b *testing.B) {
	for _, shape := range []struct {
		name    string
		records func(int) []Record
	}{{"spread", benchRecords}, {"burst", burstRecords}} {
		for _, n := range []int{1, 8, 32, 128} {
			b.Run(fmt.Sprint(shape.name, "/", n), func(b *testing.B) { benchAppendGroup(b, n, shape.records) })
		}
	}
}

func benchAppendGroup(b *testing.B, n int, records func(int) []Record) {
	benchAppendShaped(b, n, records, nil)
}

// benchAppendShaped is benchAppendGroup on a log that shape, when set,
// changes first, with records it may change too.
func benchAppendShaped(b *testing.B, n int, records func(int) []Record, shape func(*Store, []Record)) {
	s, err := Open(filepath.Join(b.TempDir(), "bench.db"), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	const fill = 20000
	recs := records(fill + b.N)
	if shape != nil {
		shape(s, recs)
	}
	if _, err := s.AppendBatch(ctx, recs[:fill]); err != nil {
		b.Fatal(err)
	}
	recs = recs[fill:]
	cpu0 := pipeload.ProcessCPU()
	b.ResetTimer()
	for i := 0; i < b.N; i += n {
		if _, err := s.AppendBatch(ctx, recs[i:min(i+n, b.N)]); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(pipeload.ProcessCPU()-cpu0)/float64(b.N)/1e3, "cpu-µs/event")
}

// BenchmarkAppendFloor measures what SQLite alone costs per durable event
// in groups of 8 and 32, into a log of 20,000 events shaped as under anp2
// bench (burstRecords): the log as it is ("log"), without its secondary
// indexes ("table+tags"), and the events table alone, with no tag rows
// ("table"): the floor of any log kept in SQLite's B-trees with a commit
// per group.
func BenchmarkAppendFloor(b *testing.B) {
	for _, shape := range []string{"log", "table+tags", "table"} {
		for _, n := range []int{8, 32} {
			b.Run(fmt.Sprint(shape, "/", n), func(b *testing.B) {
				benchAppendShaped(b, n, burstRecords, func(s *Store, recs []Record) {
					if shape == "log" {
						return
					}
					for _, ddl := range secondaryIndexes {
						if _, err := s.write.Exec("DROP INDEX " + indexName(ddl)); err != nil {
							b.Fatal(err)
						}
					}
					if shape == "table" {
						for _, r := range recs {
							r.Event.Tags = nil // the store checks no signature
						}
					}
				})
			})
		}
	}
}
