package relay

import (
	"fmt"
	"io"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// metrics are the relay's Prometheus counters, written by hand in the text
// exposition format (a client library would add nothing we use).
type metrics struct {
	accepted   atomic.Int64
	duplicates atomic.Int64
	mu         sync.Mutex
	rejects    map[string]int64
	// ingest latency histogram (seconds): buckets[i] counts the
	// observations in (bounds[i-1], bounds[i]], one add per observation;
	// write sums them into Prometheus's cumulative buckets.
	bounds  []float64
	buckets []atomic.Int64
	sum     atomic.Int64 // nanoseconds
	count   atomic.Int64
}

func newMetrics() *metrics {
	b := []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1}
	return &metrics{rejects: map[string]int64{}, bounds: b, buckets: make([]atomic.Int64, len(b))}
}

func (m *metrics) rejected(code string) {
	m.mu.Lock()
	m.rejects[code]++
	m.mu.Unlock()
}

func (m *metrics) observe(d time.Duration) {
	s := d.Seconds()
	for i, b := range m.bounds {
		if s <= b {
			m.buckets[i].Add(1)
			break
		}
	}
	m.sum.Add(int64(d))
	m.count.Add(1)
}

func (m *metrics) write(w io.Writer, events, dbBytes int64) {
	fmt.Fprintf(w, "# HELP anp2_events_accepted_total Events newly stored.\n# TYPE anp2_events_accepted_total counter\nanp2_events_accepted_total %d\n", m.accepted.Load())
	fmt.Fprintf(w, "# HELP anp2_events_duplicate_total Copies of already stored events.\n# TYPE anp2_events_duplicate_total counter\nanp2_events_duplicate_total %d\n", m.duplicates.Load())
	fmt.Fprintf(w, "# HELP anp2_events_rejected_total Events rejected, by error code.\n# TYPE anp2_events_rejected_total counter\n")
	m.mu.Lock()
	codes := make([]string, 0, len(m.rejects))
	for c := range m.rejects {
		codes = append(codes, c)
	}
	sort.Strings(codes)
	for _, c := range codes {
		fmt.Fprintf(w, "anp2_events_rejected_total{code=%q} %d\n", c, m.rejects[c])
	}
	m.mu.Unlock()
	fmt.Fprintf(w, "# HELP anp2_ingest_seconds Time from request to committed answer.\n# TYPE anp2_ingest_seconds histogram\n")
	var below int64
	for i, b := range m.bounds {
		below += m.buckets[i].Load()
		fmt.Fprintf(w, "anp2_ingest_seconds_bucket{le=\"%g\"} %d\n", b, below)
	}
	fmt.Fprintf(w, "anp2_ingest_seconds_bucket{le=\"+Inf\"} %d\n", m.count.Load())
	fmt.Fprintf(w, "anp2_ingest_seconds_sum %g\nanp2_ingest_seconds_count %d\n", time.Duration(m.sum.Load()).Seconds(), m.count.Load())
	fmt.Fprintf(w, "# HELP anp2_store_events Events in the log.\n# TYPE anp2_store_events gauge\nanp2_store_events %d\n", events)
	fmt.Fprintf(w, "# HELP anp2_store_bytes Size of the SQLite database.\n# TYPE anp2_store_bytes gauge\nanp2_store_bytes %d\n", dbBytes)
}
