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

// TestParseStatusRSS: the resident set size and its anonymous and
// file-backed parts come from /proc/self/status in bytes; a status
// without one of them, or with a figure that is not "N kB", gives none.
func TestParseStatusRSS(t *testing.T) {
	full := "Name:\tanp2\nVmRSS:\t  4000 kB\nRssAnon:\t  3000 kB\nRssFile:\t   900 kB\nRssShmem:\t 100 kB\n"
	r, ok := parseStatusRSS(full)
	if !ok || r.total != 4000<<10 || r.anon != 3000<<10 || r.file != 900<<10 {
		t.Fatalf("parseStatusRSS = %+v, %v", r, ok)
	}
	for _, bad := range []string{
		"VmRSS:\t4000 kB\nRssAnon:\t3000 kB\n",
		"VmRSS:\t4000 kB\nRssAnon:\t3000 kB\nRssFile:\t9x kB\n",
		"VmRSS:\t4000 MB\nRssAnon:\t3000 kB\nRssFile:\t900 kB\n",
		"VmRSS:\t-1 kB\nRssAnon:\t3000 kB\nRssFile:\t900 kB\n",
	} {
		if r, ok := parseStatusRSS(bad); ok {
			t.Errorf("parseStatusRSS(%q) = %+v, true; want false", bad, r)
		}
	}
	if r, ok := residentBytes(); ok && (r.total <= 0 || r.anon <= 0 || r.anon+r.file > r.total) {
		t.Errorf("this process's resident bytes: %+v", r)
	}
}
