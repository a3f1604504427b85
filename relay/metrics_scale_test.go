package relay_test

import (
	"fmt"
	"regexp"
	"strconv"
	"testing"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/relaytest"
	"github.com/anp2net/relay/tasks/taskstest"
)

// metricValue returns the value of the sample named line (name with its
// labels, as written) in a /metrics body; false when absent.
func metricValue(body []byte, line string) (float64, bool) {
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(line) + ` (\S+)$`).FindSubmatch(body)
	if m == nil {
		return 0, false
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	return v, err == nil
}

// TestMetricsRuntimeAndFolds checks that GET /metrics on a real relay
// reports the Go runtime's figures and, per derived view, the entries and
// bytes it holds: moderation holds one entry per live event and trust one
// per vote.
func TestMetricsRuntimeAndFolds(t *testing.T) {
	r := relaytest.Start(t, nil)
	pool := taskstest.Pool(4)
	at := int64(relaytest.VectorTime - 600)
	var evs []*protocol.Event
	for i := range 12 {
		evs = append(evs, pool[i%4].Sign(protocol.KindPost, at+int64(i), fmt.Sprintf("post %d", i), []string{"t", "weather"}))
	}
	for i := range 3 {
		evs = append(evs, pool[i].Sign(protocol.KindTrustVote, at+20+int64(i), map[string]any{"score": 1, "reason": "good"}, []string{"p", pool[3].ID}))
	}
	r.PostAll(t, evs, 2)
	a := r.Do(t, "GET", "/metrics", "", nil)
	if a.Status != 200 {
		t.Fatalf("GET /metrics: %d %s", a.Status, a.Body)
	}
	for _, name := range []string{"anp2_go_heap_inuse_bytes", "anp2_go_runtime_mapped_bytes", "anp2_process_resident_bytes", "anp2_process_resident_anon_bytes", "anp2_process_resident_file_bytes", "anp2_go_goroutines"} {
		if v, ok := metricValue(a.Body, name); !ok || v <= 0 {
			t.Errorf("%s = %v, %v; want a positive figure in:\n%s", name, v, ok, a.Body)
		}
	}
	total, _ := metricValue(a.Body, "anp2_process_resident_bytes")
	anon, _ := metricValue(a.Body, "anp2_process_resident_anon_bytes")
	file, _ := metricValue(a.Body, "anp2_process_resident_file_bytes")
	if anon+file > total {
		t.Errorf("anonymous %v + file-backed %v resident bytes exceed the total %v", anon, file, total)
	}
	if _, ok := metricValue(a.Body, "anp2_go_heap_unreturned_bytes"); !ok {
		t.Errorf("no anp2_go_heap_unreturned_bytes")
	}
	if _, ok := metricValue(a.Body, "anp2_go_gc_cycles_total"); !ok {
		t.Errorf("no anp2_go_gc_cycles_total")
	}
	if _, ok := metricValue(a.Body, "anp2_go_gc_pause_seconds_total"); !ok {
		t.Errorf("no anp2_go_gc_pause_seconds_total")
	}
	want := map[string]float64{"moderation": float64(len(evs)), "trust": 3, "tasks": 0}
	for fold, n := range want {
		if v, ok := metricValue(a.Body, fmt.Sprintf("anp2_fold_entries{fold=%q}", fold)); !ok || v != n {
			t.Errorf("fold %s entries = %v, %v; want %v", fold, v, ok, n)
		}
		if v, ok := metricValue(a.Body, fmt.Sprintf("anp2_fold_bytes{fold=%q,where=\"memory\"}", fold)); !ok || (n > 0 && v <= 0) {
			t.Errorf("fold %s bytes = %v, %v", fold, v, ok)
		}
	}
}
