package postgres

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/anp2net/relay/relay/eventlog"
	"github.com/anp2net/relay/relay/eventlog/logtest"
	"github.com/anp2net/relay/relay/postgres/pgtest"
)

// BenchmarkAppendParallel appends single events from many goroutines (the
// publish path: group commit under load).
func BenchmarkAppendParallel(b *testing.B) {
	s, err := Open(context.Background(), pgtest.DB(b), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	var n atomic.Int64
	b.SetParallelism(8)
	b.RunParallel(func(pb *testing.PB) {
		w := n.Add(1)
		for i := 0; pb.Next(); i++ {
			e := logtest.Ev(logtest.Key(int(w)), int64(i), 1, fmt.Sprint(i), []string{"t", "bench"})
			if _, err := s.Append(context.Background(), eventlog.Record{Event: e}); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
