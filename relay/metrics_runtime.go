package relay

import (
	"fmt"
	"io"
	"os"

	"runtime/debug"
	rtmetrics "runtime/metrics"
	"strconv"
	"strings"
)

// runtimeSamples are the runtime/metrics figures /metrics reports.
var runtimeSamples = []string{
	"/memory/classes/heap/objects:bytes",
	"/memory/classes/total:bytes",
	"/gc/cycles/total:gc-cycles",
	"/sched/goroutines:goroutines",
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
	if rss, ok := residentBytes(); ok {
		gauge(w, "anp2_process_resident_bytes", "Resident set size of the process (/proc/self/statm).", float64(rss))
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

// residentBytes reads the process's resident set size from
// /proc/self/statm (pages × page size); false where there is no procfs.
func residentBytes() (int64, bool) {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0, false
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0, false
	}
	pages, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		return 0, false
	}
	return pages * int64(os.Getpagesize()), true
}
