package sqlite

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"testing"
)

// BenchmarkWALFrames counts the WAL frames (a 4 KiB page and its header)
// appends in groups of n write per event into a log of 20,000 events: the
// checkpointer is kept from running, so the WAL only grows, and its growth
// over the run is every frame the run's commits wrote (use a small
// -benchtime, e.g. 3000x: each event adds some 20–40 KiB to the WAL).
func BenchmarkWALFrames(b *testing.B) {
	for _, n := range []int{1, 8, 32} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			s, err := Open(filepath.Join(b.TempDir(), "bench.db"), nil)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			s.ckptEvery.Store(math.MaxInt64)
			ctx := context.Background()
			const fill = 20000
			recs := benchRecords(fill + b.N)
			if _, err := s.AppendBatch(ctx, recs[:fill]); err != nil {
				b.Fatal(err)
			}
			recs = recs[fill:]
			if err := s.control(ctx, func() error {
				_, err := s.write.Exec("PRAGMA wal_checkpoint(TRUNCATE)")
				return err
			}); err != nil {
				b.Fatal(err)
			}
			w0 := s.walSize()
			b.ResetTimer()
			for i := 0; i < b.N; i += n {
				if _, err := s.AppendBatch(ctx, recs[i:min(i+n, b.N)]); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(s.walSize()-w0)/float64(s.frameSize)/float64(b.N), "frames/event")
		})
	}
}
