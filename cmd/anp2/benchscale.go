package main

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/anp2net/relay/tasks/taskstest"
)

// scaleFigure is one row of the scale bench's table: a figure measured
// at every size.
type scaleFigure struct {
	name, unit string
}

// scaleFigures are the rows of the scale bench's table, in order.
var scaleFigures = []scaleFigure{
	{"ready, no saved state", "s"},
	{"ready after a clean stop", "s"},
	{"ready after kill -9", "s"},
	{"saved state written at stop", "s"},
	{"steady RSS after a GC", "MiB"},
	{"anonymous RSS after a GC", "MiB"},
	{"file-backed RSS after a GC", "MiB"},
	{"Go heap in use after a GC", "MiB"},
	{"publish rate", "/s"},
	{"half-load publish p99", "ms"},
	{"GET /events?t= p99", "ms"},
	{"GET /trust/{id} p99", "ms"},
	{"GET /feed/{id} p99", "ms"},
	{"GET /neighbors/{id} p99", "ms"},
}

// parseSizes reads --scale's comma-separated event counts.
func parseSizes(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("--scale %q: sizes are positive event counts separated by commas", s)
		}
		out = append(out, n)
	}
	sort.Ints(out)
	return out, nil
}

// benchScale measures, for each size of --scale, a relay serving a mixed
// log of that many events: the time to ready with no saved state, after a
// clean stop and after a kill -9; steady memory; publish rate and
// half-load p99; and read p99s. It prints one table with the slope per
// million events of each figure.
func (c *benchCmd) benchScale(ctx context.Context) error {
	sizes, err := parseSizes(c.scale)
	if err != nil {
		return err
	}
	corpora := c.corpus
	if corpora == "" {
		if corpora, err = os.MkdirTemp("", "anp2-scale-corpus-"); err != nil {
			return err
		}
		defer os.RemoveAll(corpora)
	} else if err := os.MkdirAll(corpora, 0o755); err != nil {
		return err
	}
	fmt.Fprintf(c.out, "machine: %d CPUs (GOMAXPROCS %d), %s/%s, load average %s\n", runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.GOOS, runtime.GOARCH, loadAverage())
	table := make([][]float64, len(sizes))
	for i, n := range sizes {
		path := filepath.Join(corpora, fmt.Sprintf("corpus-%d.jsonl", n))
		if err := c.ensureCorpus(path, n); err != nil {
			return err
		}
		row, err := c.scaleOne(ctx, path, n)
		if err != nil {
			return fmt.Errorf("size %d: %w", n, err)
		}
		table[i] = row
	}
	printScaleTable(c.out, sizes, table)
	return nil
}

// scaleOne imports the corpus at path into a fresh log and measures a
// relay process on it; the figures are in scaleFigures' order.
func (c *benchCmd) scaleOne(ctx context.Context, path string, n int) ([]float64, error) {
	dir, err := os.MkdirTemp("", "anp2-scale-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	db := filepath.Join(dir, "scale.db")
	if err := c.importFile(ctx, db, path); err != nil {
		return nil, err
	}
	label := fmt.Sprintf("%d events", n)
	row := make([]float64, len(scaleFigures))
	// 1. No saved state: the whole log is folded; a clean stop saves it.
	p, err := c.startScaleProc(ctx, db, label+", no saved state")
	if err != nil {
		return nil, err
	}
	row[0] = p.ready.Seconds()
	stopped, err := p.stop(c.progress, label+": clean stop, saving derived state")
	if err != nil {
		return nil, err
	}
	row[3] = stopped.Seconds()
	// 2. Resumed from the state saved at the clean stop.
	if p, err = c.startScaleProc(ctx, db, label+", after a clean stop"); err != nil {
		return nil, err
	}
	defer func() { p.kill() }()
	row[1] = p.ready.Seconds()
	rate, p99, err := c.scalePublish(ctx, p.base)
	if err != nil {
		return nil, err
	}
	row[8], row[9] = rate, p99
	for i, q := range scaleQueries() {
		c.progress.step(scaleFigures[10+i].name, "%s: timing %s", label, scaleFigures[10+i].name)
		row[10+i] = p99ms(c.getAll(ctx, benchClient(p.base, c.queryConc), q, c.queryConc))
	}
	c.progress.done()
	mem, err := steadyMemory(ctx, p.base, p.debug)
	if err != nil {
		return nil, err
	}
	for i, v := range mem {
		row[4+i] = v / (1 << 20)
	}
	// 3. kill -9 with the events published since the last save unsaved:
	// the restart resumes from that save and folds the tail.
	p.kill()
	if p, err = c.startScaleProc(ctx, db, label+", after kill -9"); err != nil {
		return nil, err
	}
	row[2] = p.ready.Seconds()
	if _, err := p.stop(c.progress, label+": clean stop"); err != nil {
		return nil, err
	}
	fmt.Fprintf(c.out, "%d events: ready %.1f s cold, %.1f s after a clean stop, %.1f s after kill -9; RSS %.0f MiB (anonymous %.0f, file-mapped %.0f), heap %.0f MiB; publish %.0f/s, half-load p99 %.1f ms\n",
		n, row[0], row[1], row[2], row[4], row[5], row[6], row[7], row[8], row[9])
	return row, nil
}

// scalePublish measures the publish rate from c.concurrency clients, then
// the p99 at half that rate for c.paceFor.
func (c *benchCmd) scalePublish(ctx context.Context, base string) (rate, p99 float64, err error) {
	keys := benchKeys(c.agents, 0xbe)
	target, err := newLoadTarget(base)
	if err != nil {
		return 0, 0, err
	}
	evs := c.makeEvents(keys, c.events, time.Now().Unix(), "scale publish")
	_, elapsed, errs := c.sendAll(ctx, target, target.publishRequests(evs), c.concurrency, 0, len(evs))
	if errs > 0 {
		return 0, 0, fmt.Errorf("publish: %d of %d events not accepted", errs, len(evs))
	}
	rate = float64(len(evs)) / elapsed.Seconds()
	half := max(1, int(rate/2*c.paceFor.Seconds()))
	paced := target.publishRequests(c.makeEvents(keys, half, time.Now().Unix()+1, "scale paced"))
	lat, _, errs := c.sendAll(ctx, target, paced, c.concurrency, rate/2, half)
	if errs > 0 {
		return 0, 0, fmt.Errorf("paced publish: %d of %d events not accepted", errs, half)
	}
	return rate, p99ms(lat), nil
}

// scaleQueries are the read routes the scale bench times, in
// scaleFigures' order, over the corpus's agents and topics.
func scaleQueries() []func(i int) string {
	agents := taskstest.Pool(2000)
	agent := func(i int) string { return agents[(i*31)%len(agents)].ID }
	return []func(i int) string{
		func(i int) string { return fmt.Sprintf("/events?t=topic%d&limit=100", i%200) },
		func(i int) string { return "/trust/" + agent(i) },
		func(i int) string { return "/feed/" + agent(i) },
		func(i int) string { return "/neighbors/" + agent(i) },
	}
}

// benchKeys returns n signing keys whose seeds are (i, tag).
func benchKeys(n int, tag byte) []ed25519.PrivateKey {
	keys := make([]ed25519.PrivateKey, n)
	for i := range keys {
		seed := make([]byte, 32)
		seed[0], seed[1], seed[2] = byte(i), byte(i>>8), tag
		keys[i] = ed25519.NewKeyFromSeed(seed)
	}
	return keys
}

// p99ms returns the 99th percentile of lat in milliseconds.
func p99ms(lat []time.Duration) float64 {
	if len(lat) == 0 {
		return 0
	}
	return float64(quantiles(lat)(0.99)) / float64(time.Millisecond)
}

// steadyMemoryMetrics are the /metrics samples steadyMemory reads, in
// scaleFigures' order from "steady RSS after a GC".
var steadyMemoryMetrics = []string{
	"anp2_process_resident_bytes",
	"anp2_process_resident_anon_bytes",
	"anp2_process_resident_file_bytes",
	"anp2_go_heap_inuse_bytes",
}

// steadyMemory reads the relay's RSS, its anonymous and file-mapped
// parts, and the Go heap in use from /metrics three times a second apart,
// each after a garbage collection (a heap profile with gc=1 from the
// profiling listener at debug, when there is one), and returns the
// medians in steadyMemoryMetrics' order, in bytes.
func steadyMemory(ctx context.Context, base, debug string) ([]float64, error) {
	samples := make([][]float64, len(steadyMemoryMetrics))
	for i := range 3 {
		if i > 0 {
			time.Sleep(time.Second)
		}
		if debug != "" {
			if resp, err := http.Get(debug + "/debug/pprof/heap?gc=1"); err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}
		m, err := readMetrics(ctx, base)
		if err != nil {
			return nil, err
		}
		for k, name := range steadyMemoryMetrics {
			v, ok := m[name]
			if !ok {
				return nil, fmt.Errorf("/metrics lacks %s", name)
			}
			samples[k] = append(samples[k], v)
		}
	}
	out := make([]float64, len(samples))
	for k, s := range samples {
		sort.Float64s(s)
		out[k] = s[1]
	}
	return out, nil
}

// readMetrics returns the unlabelled samples of GET /metrics by name.
func readMetrics(ctx context.Context, base string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("/metrics: %w", err)
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		name, val, ok := strings.Cut(sc.Text(), " ")
		if !ok || strings.HasPrefix(name, "#") || strings.Contains(name, "{") {
			continue
		}
		if v, err := strconv.ParseFloat(strings.TrimSpace(val), 64); err == nil {
			out[name] = v
		}
	}
	return out, sc.Err()
}

// debugListenerRe finds the address in anp2 serve's "profiling listener"
// log line.
var debugListenerRe = regexp.MustCompile(`profiling listener"? debug_addr=(\S+)`)

// scaleProc is an anp2 serve process of the scale bench.
type scaleProc struct {
	cmd   *exec.Cmd
	base  string
	debug string        // the profiling listener's base URL ("" if none)
	ready time.Duration // from start until /health answered 200
	done  chan struct{} // closed once the process is waited for
}

// startScaleProc starts anp2 serve (c.relayBin, else this binary) on db
// with its saved state beside it and waits until /health answers,
// showing the time so far on a terminal.
func (c *benchCmd) startScaleProc(ctx context.Context, db, label string) (*scaleProc, error) {
	exe, err := relayExe(c.relayBin)
	if err != nil {
		return nil, err
	}
	// No periodic save: the state a kill -9 restarts from is the one the
	// clean stop saved, whatever the run's length.
	// The profiling listener lets steadyMemory collect garbage first.
	cmd := exec.CommandContext(ctx, exe, "serve", "--addr", "127.0.0.1:0", "--db", db, "--rate-agent", "0", "--rate-ip", "0", "--state-every", "0",
		"--debug-addr", "127.0.0.1:0")
	cmd.Env = childEnv("serve")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &scaleProc{cmd: cmd, done: make(chan struct{})}
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := debugListenerRe.FindStringSubmatch(sc.Text()); m != nil {
				p.debug = "http://" + m[1]
			}
			if m := listeningRe.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
				break
			}
		}
		io.Copy(io.Discard, stderr)
		close(found)
		cmd.Wait()
		close(p.done)
	}()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for p.base == "" {
		select {
		case addr, ok := <-found:
			if !ok {
				return nil, fmt.Errorf("anp2 serve on %s exited before listening", db)
			}
			p.base = "http://" + addr
		case <-tick.C:
			c.progress.update("%s: starting, %s", label, time.Since(start).Round(time.Second))
		case <-ctx.Done():
			p.kill()
			return nil, ctx.Err()
		}
	}
	for {
		resp, err := http.Get(p.base + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		select {
		case <-time.After(20 * time.Millisecond):
		case <-ctx.Done():
			p.kill()
			return nil, ctx.Err()
		}
	}
	p.ready = time.Since(start)
	c.progress.done()
	return p, nil
}

// stop asks for a clean stop (SIGINT: the relay saves its derived state)
// and waits for the exit, showing the time so far; it returns how long
// the stop took.
func (p *scaleProc) stop(pr *progress, label string) (time.Duration, error) {
	start := time.Now()
	if err := p.cmd.Process.Signal(os.Interrupt); err != nil {
		return 0, err
	}
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-p.done:
			pr.done()
			if st := p.cmd.ProcessState; st != nil && !st.Success() {
				return 0, fmt.Errorf("anp2 serve exited with %s at a clean stop", st)
			}
			return time.Since(start), nil
		case <-tick.C:
			pr.update("%s, %s", label, time.Since(start).Round(time.Second))
		}
	}
}

// kill sends SIGKILL (no clean stop, no save) and waits for the exit.
func (p *scaleProc) kill() {
	select {
	case <-p.done:
		return
	default:
	}
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// printScaleTable prints one row per figure, one column per size, and
// the least-squares slope per million events.
func printScaleTable(w io.Writer, sizes []int, table [][]float64) {
	fmt.Fprintf(w, "\n| figure |")
	for _, n := range sizes {
		fmt.Fprintf(w, " %s events |", humanCount(n))
	}
	fmt.Fprintf(w, " slope per 1M events |\n|---|")
	for range sizes {
		fmt.Fprintf(w, "---:|")
	}
	fmt.Fprintf(w, "---:|\n")
	for f, fig := range scaleFigures {
		fmt.Fprintf(w, "| %s (%s) |", fig.name, fig.unit)
		ys := make([]float64, len(sizes))
		for i := range sizes {
			ys[i] = table[i][f]
			fmt.Fprintf(w, " %s |", fmtFigure(ys[i]))
		}
		if s, ok := slopePerMillion(sizes, ys); ok {
			fmt.Fprintf(w, " %+.3g |\n", s)
		} else {
			fmt.Fprintf(w, " n/a (one size) |\n")
		}
	}
}

// slopePerMillion fits y = a + b·(events/1e6) by least squares and
// returns b; false with fewer than two distinct sizes.
func slopePerMillion(sizes []int, ys []float64) (float64, bool) {
	var mx, my float64
	for i, n := range sizes {
		mx += float64(n) / 1e6
		my += ys[i]
	}
	mx, my = mx/float64(len(sizes)), my/float64(len(sizes))
	var sxy, sxx float64
	for i, n := range sizes {
		dx := float64(n)/1e6 - mx
		sxy += dx * (ys[i] - my)
		sxx += dx * dx
	}
	if sxx == 0 {
		return 0, false
	}
	return sxy / sxx, true
}

func fmtFigure(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

// humanCount writes n as 1M, 3M, 2k or n.
func humanCount(n int) string {
	switch {
	case n%1_000_000 == 0:
		return fmt.Sprintf("%dM", n/1_000_000)
	case n%1000 == 0:
		return fmt.Sprintf("%dk", n/1000)
	}
	return strconv.Itoa(n)
}
