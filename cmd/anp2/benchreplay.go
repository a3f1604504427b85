package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"sort"
	"strings"
	"time"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/offline"
	"github.com/anp2net/relay/relay/state/statetest"
)

// corpusBase dates bench corpora before PoW became mandatory (protocol
// PoW ActiveFrom), so the generator need not mine kind 50s; every other
// rule applies.
const corpusBase = 1779000000

// benchReplay measures the auditor's replay of a mixed log of n events
// beside the verify ceiling, the fold cost as the state grows, and memory.
func (c *benchCmd) benchReplay(ctx context.Context) error {
	path := c.corpus
	if path == "" {
		f, err := os.CreateTemp("", "anp2-corpus-*.jsonl")
		if err != nil {
			return err
		}
		f.Close()
		path = f.Name()
		defer os.Remove(path)
	}
	if err := c.ensureCorpus(path, c.replay); err != nil {
		return err
	}
	fmt.Fprintf(c.out, "machine: %d CPUs (GOMAXPROCS %d), %s/%s\n", runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.GOOS, runtime.GOARCH)
	one, all := verifyCeiling(2 * time.Second)
	own := ownVerifyRate(2 * time.Second)
	fmt.Fprintf(c.out, "ceiling: raw Ed25519 verify (crypto/ed25519) %.0f/s on 1 core, %.0f/s on %d cores; this relay's verifier, key seen before: %.0f/s on %d cores\n",
		one, all, runtime.GOMAXPROCS(0), own, runtime.GOMAXPROCS(0))
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	// The replay allocates briskly and keeps a modest live heap (about
	// 160 MiB at a million events): collect less often.
	defer debug.SetGCPercent(debug.SetGCPercent(400))
	start := time.Now()
	rp := &offline.Replayer{Checker: protocol.DefaultChecker(), Now: time.Now().Unix(),
		OnProgress: func(s offline.ReplayStats) {
			c.progress.update("replay: %d events (%.0f/s)", s.Read, float64(s.Read)/time.Since(start).Seconds())
		}}
	st, stats, err := rp.Replay(ctx, path)
	c.progress.done()
	if err != nil {
		return err
	}
	elapsed := time.Since(start)
	rate := float64(stats.Read) / elapsed.Seconds()
	fmt.Fprintf(c.out, "replay: %d events (%d valid, %d votes, %d task requests, %d revokes) verified and folded in %s = %.0f events/s = %.0f%% of the %d-core verify ceiling, %.0f%% of this relay's own verifier's rate\n",
		stats.Read, stats.Valid, stats.Kinds[protocol.KindTrustVote], stats.Kinds[protocol.KindTaskRequest], stats.Kinds[protocol.KindRevoke],
		elapsed.Round(time.Millisecond), rate, 100*rate/all, runtime.GOMAXPROCS(0), 100*rate/own)
	marks := make([]int, 0, len(stats.AddCost))
	for k := range stats.AddCost {
		marks = append(marks, k)
	}
	sort.Ints(marks)
	for _, k := range marks {
		fmt.Fprintf(c.out, "  fold cost per event at %d events: %s\n", k, stats.AddCost[k])
	}
	t0 := time.Now()
	d := st.Digest(time.Now().Unix())
	fmt.Fprintf(c.out, "state digest %s in %s (%d revoked)\n", d.Digest[:16], time.Since(t0).Round(time.Millisecond), d.Revoked)
	runtime.GC()
	debug.FreeOSMemory()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	fmt.Fprintf(c.out, "memory with every view at %d events: heap in use %.0f MiB, process RSS %s\n",
		stats.Valid, float64(after.HeapInuse)/(1<<20), rss())
	runtime.KeepAlive(st)
	return nil
}

// ensureCorpus writes a mixed corpus of n events to path unless it already
// holds one.
func (c *benchCmd) ensureCorpus(path string, n int) error {
	if fi, err := os.Stat(path); err == nil && fi.Size() > 0 {
		fmt.Fprintf(c.out, "corpus: reusing %s (%d MiB)\n", path, fi.Size()>>20)
		return nil
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	w := bufio.NewWriterSize(f, 1<<20)
	start, count := time.Now(), 0
	statetest.Mixed(1, n, 2000, corpusBase, 6*86400, func(e *protocol.Event) {
		w.Write(protocol.AppendJSON(nil, e))
		w.WriteByte('\n')
		if count++; count%8192 == 0 {
			c.progress.update("corpus: signed %d/%d events (%.0f/s)", count, n, float64(count)/time.Since(start).Seconds())
		}
	})
	c.progress.done()
	fmt.Fprintf(c.out, "corpus: %d events written to %s in %s\n", count, path, time.Since(start).Round(time.Second))
	return w.Flush()
}

// rss returns the process's resident set size from /proc, or "n/a".
func rss() string {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return "n/a"
	}
	// The log is memory-mapped, so its pages count as resident file memory
	// (once per connection's mapping); anonymous memory is the process's own.
	f := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			f[k] = strings.TrimSpace(v)
		}
	}
	if f["VmRSS"] == "" {
		return "n/a"
	}
	return fmt.Sprintf("%s (anonymous %s, mapped files %s)", f["VmRSS"], f["RssAnon"], f["RssFile"])
}
