package relay

import (
	"fmt"
	"io"
	"os"
	"runtime/debug"
	rtmetrics "runtime/metrics"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anp2net/relay/relay/eventlog"
	"github.com/anp2net/relay/relay/reconcile"

	"github.com/anp2net/relay/relay/state"
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

// runtimeSamples are the runtime/metrics figures /metrics reports.
var runtimeSamples = []string{
	"/memory/classes/heap/objects:bytes",
	"/memory/classes/total:bytes",
	"/gc/cycles/total:gc-cycles",
	"/sched/goroutines:goroutines",
	"/memory/classes/heap/free:bytes",
}

// writeRuntime appends the Go runtime's figures to w: live heap, memory
// the runtime mapped, resident set size, GC cycles and total GC pause, and
// goroutines. Reading them does not stop the world.
func writeRuntime(w io.Writer) {
	s := make([]rtmetrics.Sample, len(runtimeSamples))
	for i, n := range runtimeSamples {
		s[i].Name = n
	}
	rtmetrics.Read(s)
	val := func(i int) uint64 {
		if s[i].Value.Kind() == rtmetrics.KindUint64 {
			return s[i].Value.Uint64()
		}
		return 0
	}
	gauge(w, "anp2_go_heap_inuse_bytes", "Bytes of live and not yet collected heap objects.", float64(val(0)))
	gauge(w, "anp2_go_runtime_mapped_bytes", "Bytes of memory mapped by the Go runtime.", float64(val(1)))
	gauge(w, "anp2_go_heap_unreturned_bytes", "Bytes of free heap the Go runtime holds and has not returned to the OS.", float64(val(4)))
	if r, ok := residentBytes(); ok {
		gauge(w, "anp2_process_resident_bytes", "Resident set size of the process (/proc/self/status VmRSS).", float64(r.total))
		gauge(w, "anp2_process_resident_anon_bytes", "Anonymous resident memory: the Go heap, stacks and the runtime (RssAnon).", float64(r.anon))
		gauge(w, "anp2_process_resident_file_bytes", "File-backed resident memory: the binary and the log's memory-mapped pages, reclaimable (RssFile).", float64(r.file))
	}
	var gc debug.GCStats
	debug.ReadGCStats(&gc)
	fmt.Fprintf(w, "# HELP anp2_go_gc_cycles_total Completed GC cycles.\n# TYPE anp2_go_gc_cycles_total counter\nanp2_go_gc_cycles_total %d\n", val(2))
	fmt.Fprintf(w, "# HELP anp2_go_gc_pause_seconds_total Total stop-the-world GC pause.\n# TYPE anp2_go_gc_pause_seconds_total counter\nanp2_go_gc_pause_seconds_total %g\n", gc.PauseTotal.Seconds())
	gauge(w, "anp2_go_goroutines", "Live goroutines.", float64(val(3)))
}

// gauge writes one unlabelled Prometheus gauge.
func gauge(w io.Writer, name, help string, v float64) {
	fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s gauge\n%s %g\n", name, help, name, name, v)
}

// resident is the process's resident set size and its parts, in bytes.
type resident struct {
	total, anon, file int64
}

// residentBytes reads the process's resident set size and its anonymous
// and file-backed parts from /proc/self/status (VmRSS, RssAnon, RssFile);
// false where there is no procfs or the kernel does not report them.
func residentBytes() (resident, bool) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return resident{}, false
	}
	return parseStatusRSS(string(b))
}

// parseStatusRSS reads VmRSS, RssAnon and RssFile (kB) from the text of
// /proc/self/status; false unless all three are there.
func parseStatusRSS(status string) (resident, bool) {
	var r resident
	seen := 0
	for _, line := range strings.Split(status, "\n") {
		name, rest, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		var dst *int64
		switch name {
		case "VmRSS":
			dst = &r.total
		case "RssAnon":
			dst = &r.anon
		case "RssFile":
			dst = &r.file
		default:
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return resident{}, false
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil || kb < 0 {
			return resident{}, false
		}
		*dst = kb << 10
		seen++
	}
	return r, seen == 3
}

// writeFolds appends a gauge per derived view of its entries and bytes in
// memory (views that report them, state.Sizer) and, for views with saved
// state, the bytes of their snapshot on disk (disk: view name → bytes)
// plus those of their own store files (state.DiskSizer).
func writeFolds(w io.Writer, sizes []state.FoldSize, disk map[string]int64, resumed int64) {
	if resumed != noStateDir {
		gauge(w, "anp2_state_resumed_seq", "Log position the derived state resumed from at start (-1: folded the whole log).", float64(resumed))
	}
	fmt.Fprintf(w, "# HELP anp2_fold_entries Records a derived view holds in memory.\n# TYPE anp2_fold_entries gauge\n")
	for _, z := range sizes {
		if z.Sized {
			fmt.Fprintf(w, "anp2_fold_entries{fold=%q} %d\n", z.Name, z.Entries)
		}
	}
	fmt.Fprintf(w, "# HELP anp2_fold_bytes Estimated bytes of a derived view, in memory (heap) or on disk (its saved snapshot and its own store files).\n# TYPE anp2_fold_bytes gauge\n")
	for _, z := range sizes {
		if z.Sized {
			fmt.Fprintf(w, "anp2_fold_bytes{fold=%q,where=\"memory\"} %d\n", z.Name, z.Bytes)
		}
		if b, ok := disk[z.Name]; ok || z.Disk > 0 {
			fmt.Fprintf(w, "anp2_fold_bytes{fold=%q,where=\"disk\"} %d\n", z.Name, b+z.Disk)
		}
	}
}

// noStateDir is writeFolds' resumed figure for a relay without saved state.
const noStateDir = -2

// writeLogIndexes appends the log's in-memory indexes (the ids and
// authors of a log that keeps them, eventlog.IndexSizer, and the
// reconciliation index of every stored event) to w: entries and
// estimated heap each, the size of the log's index file, and where the
// log's indexes were loaded from at start.
func writeLogIndexes(w io.Writer, log eventlog.Log, index *reconcile.Index) {
	sizes := []eventlog.IndexSize{{Name: "reconcile", Entries: int64(index.Len()), Bytes: index.Bytes()}}
	rep := eventlog.IndexReport{FileBytes: -1, LoadedFrom: -1}
	if z, ok := log.(eventlog.IndexSizer); ok {
		rep = z.IndexReport()
		sizes = append(rep.Indexes, sizes...)
	}
	fmt.Fprintf(w, "# HELP anp2_log_index_entries Events each in-memory index of the log holds.\n# TYPE anp2_log_index_entries gauge\n")
	for _, z := range sizes {
		fmt.Fprintf(w, "anp2_log_index_entries{index=%q} %d\n", z.Name, z.Entries)
	}
	fmt.Fprintf(w, "# HELP anp2_log_index_bytes Estimated heap of each in-memory index of the log.\n# TYPE anp2_log_index_bytes gauge\n")
	for _, z := range sizes {
		fmt.Fprintf(w, "anp2_log_index_bytes{index=%q} %d\n", z.Name, z.Bytes)
	}
	if rep.FileBytes >= 0 {
		gauge(w, "anp2_log_index_file_bytes", "Size of the log's index file (<db>.idx), the id and author indexes saved.", float64(rep.FileBytes))
	}
	if rep.LoadedFrom >= 0 {
		gauge(w, "anp2_log_index_loaded_from_seq", "Log position the log's indexes were loaded from at start (0: the whole log was read).", float64(rep.LoadedFrom))
		gauge(w, "anp2_log_index_rows_read", "Events read from the log at start to fill the log's indexes (those after the index file's position).", float64(rep.RowsRead))
	}
}
