package relay

import (
	"strings"
	"testing"
	"time"
)

// TestIngestHistogramCumulative checks that the latency histogram, kept
// as one counter per interval, is written as Prometheus's cumulative
// buckets.
func TestIngestHistogramCumulative(t *testing.T) {
	m := newMetrics()
	for _, d := range []time.Duration{100 * time.Microsecond, 500 * time.Microsecond, 3 * time.Millisecond, 3 * time.Millisecond, 2 * time.Second} {
		m.observe(d)
	}
	var out strings.Builder
	m.write(&out, 0, 0)
	for _, want := range []string{
		`anp2_ingest_seconds_bucket{le="0.0005"} 2` + "\n",
		`anp2_ingest_seconds_bucket{le="0.001"} 2` + "\n",
		`anp2_ingest_seconds_bucket{le="0.0025"} 2` + "\n",
		`anp2_ingest_seconds_bucket{le="0.005"} 4` + "\n",
		`anp2_ingest_seconds_bucket{le="1"} 4` + "\n",
		`anp2_ingest_seconds_bucket{le="+Inf"} 5` + "\n",
		"anp2_ingest_seconds_count 5\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("missing %q in:\n%s", want, out.String())
		}
	}
}
