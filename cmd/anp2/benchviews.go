package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/anp2net/relay/client"
	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/federation"
	"github.com/anp2net/relay/relay/offline"
	"github.com/anp2net/relay/relay/sqlite"
	"github.com/anp2net/relay/tasks/taskstest"
)

// benchViews loads a mixed corpus into a fresh log, starts the relay on it
// (timing the rebuild of every view and reporting memory), then measures
// GET /trust/{id} and GET /agents/{id}/credit while publishing at a steady
// rate.
func (c *benchCmd) benchViews(ctx context.Context) error {
	if err := c.ensureCorpus(c.corpus, c.viewsFill); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "anp2-benchviews-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	db := filepath.Join(dir, "views.db")
	if err := c.importFile(ctx, db, c.corpus); err != nil {
		return err
	}
	srv := newServe(c.out, os.Stderr)
	if err := srv.ParseFlags([]string{"--addr", "127.0.0.1:0", "--db", db, "--rate-agent", "0", "--rate-ip", "0"}); err != nil {
		return err
	}
	t0 := time.Now()
	if err := srv.Start(); err != nil {
		return err
	}
	defer srv.Close()
	fmt.Fprintf(c.out, "relay start with every view rebuilt: %s; process RSS %s\n", time.Since(t0).Round(time.Millisecond), rss())
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	served := make(chan error, 1)
	go func() { served <- srv.srv.Serve(sctx, srv.ln) }()
	base := "http://" + srv.Addr()
	cl := benchClient(base, 16)

	// A steady publisher in the background.
	pool := taskstest.Pool(200)
	var published, pubErrs atomic.Int64
	lctx, stopLoad := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(time.Second / time.Duration(c.loadRate))
		defer tick.Stop()
		for i := 0; lctx.Err() == nil; i++ {
			select {
			case <-lctx.Done():
				return
			case <-tick.C:
			}
			a, to := pool[i%len(pool)], pool[(i*7+3)%len(pool)]
			var e *protocol.Event
			if i%4 == 0 {
				e = a.Sign(protocol.KindTrustVote, time.Now().Unix(), map[string]any{"score": 0.5}, []string{"p", to.ID})
			} else {
				e = a.Sign(protocol.KindPost, time.Now().Unix(), fmt.Sprint("load ", i), []string{"t", "load"})
			}
			go func() {
				if _, err := cl.Publish(lctx, e, false); err != nil && lctx.Err() == nil {
					pubErrs.Add(1)
				}
				published.Add(1)
			}()
		}
	}()
	agents := taskstest.Pool(2000)
	type query struct {
		name string
		path func(i int) string
	}
	eventQueries := []query{
		{"GET /events?t=<topic>&limit=100", func(i int) string { return fmt.Sprintf("/events?t=topic%d&limit=100", i%200) }},
		{"GET /events?authors=<agent>&limit=100", func(i int) string { return "/events?limit=100&authors=" + agents[(i*31)%len(agents)].ID }},
		{"GET /events?kinds=6&p=<agent>&limit=100", func(i int) string { return "/events?kinds=6&limit=100&p=" + agents[(i*7)%len(agents)].ID }},
	}
	for _, q := range append([]query{
		{"GET /trust/{agent_id}", func(i int) string { return "/trust/" + agents[(i*13)%len(agents)].ID }},
		{"GET /agents/{agent_id}/credit", func(i int) string { return "/agents/" + agents[(i*17)%300].ID + "/credit" }},
		{"GET /tasks?limit=1", func(i int) string { return "/tasks?limit=1" }},
	}, eventQueries...) {
		lat := c.getAll(ctx, cl, q.path, c.queryConc)
		printLatency(c.out, q.name+fmt.Sprintf(" under %d publishes/s", c.loadRate), lat)
	}
	stopLoad()
	wg.Wait()
	// The query target, with no publishing beside it, from one
	// client and from several.
	for _, conc := range []int{1, c.queryConc} {
		for _, q := range eventQueries {
			printLatency(c.out, q.name+fmt.Sprintf(", %d client(s), no publishing", conc), c.getAll(ctx, cl, q.path, conc))
		}
	}
	runtime.GC()
	fmt.Fprintf(c.out, "background publishes: %d (%d errors); process RSS after: %s\n", published.Load(), pubErrs.Load(), rss())
	if !c.mirrorToo {
		return nil
	}
	if c.catchUpInProcess {
		return c.benchCatchUp(ctx, dir, base, cpuTime)
	}
	// The existing relay a new mirror copies is a relay process like any
	// other, not this one with its load generator: serve the loaded log
	// from its own anp2 serve process.
	cancel()
	<-served
	if err := srv.Close(); err != nil {
		return err
	}
	return c.catchUpFromProcess(ctx, dir, db)
}

// catchUpFromProcess serves db from an anp2 serve process of this binary
// and times a new mirror's catch-up from it.
func (c *benchCmd) catchUpFromProcess(ctx context.Context, dir, db string) error {
	t0 := time.Now()
	base, pid, stop, err := serveProcess(ctx, db)
	if err != nil {
		return err
	}
	defer stop()
	fmt.Fprintf(c.out, "the loaded log served by its own anp2 serve process (ready in %s)\n", time.Since(t0).Round(time.Millisecond))
	return c.benchCatchUp(ctx, dir, base, func() time.Duration { return procCPU(pid) })
}

// serveProcess starts `anp2 serve` of this binary on db (loopback, rate
// limits off, extra flags appended) as its own process and returns its
// base URL, its pid (for procCPU) and a function that stops it.
func serveProcess(ctx context.Context, db string, extra ...string) (string, int, func(), error) {
	return serveProcessOf(ctx, "", db, extra...)
}

// serveProcessOf is serveProcess of the anp2 binary exe ("": this one),
// so that a bench can measure another build of the relay (an A/B run).
func serveProcessOf(ctx context.Context, exe, db string, extra ...string) (string, int, func(), error) {
	exe, err := relayExe(exe)
	if err != nil {
		return "", 0, nil, err
	}
	args := append([]string{"serve", "--addr", "127.0.0.1:0", "--db", db, "--rate-agent", "0", "--rate-ip", "0"}, extra...)
	cmd := exec.CommandContext(ctx, exe, args...)
	cmd.Env = childEnv("serve")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return "", 0, nil, err
	}
	if err := cmd.Start(); err != nil {
		return "", 0, nil, err
	}
	// stop asks for a graceful shutdown (so a CPU profile is written),
	// and kills the process if it has not exited within 10 s.
	stop := func() {
		cmd.Process.Signal(os.Interrupt)
		t := time.AfterFunc(10*time.Second, func() { cmd.Process.Kill() })
		cmd.Wait()
		t.Stop()
	}
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := listeningRe.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
				break
			}
		}
		io.Copy(io.Discard, stderr)
		close(found)
	}()
	addr, ok := <-found
	if !ok {
		stop()
		return "", 0, nil, fmt.Errorf("anp2 serve on %s did not start", db)
	}
	return "http://" + addr, cmd.Process.Pid, stop, nil
}

// clock ticks of 1/100 s), or 0.
// relayExe is the anp2 binary a bench runs as its relay: exe, else this
// one.
func relayExe(exe string) (string, error) {
	if exe != "" {
		return exe, nil
	}
	return os.Executable()
}

// listeningRe finds the address in anp2 serve's "relay listening" log line.
var listeningRe = regexp.MustCompile(`relay listening"? addr=(\S+)`)

// procCPU returns the CPU time process pid has used (Linux /proc, in
// clock ticks of 10 ms), 0 when it cannot be read.
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the command name, which ends at the last ')':
	// state is the first, utime and stime the 12th and 13th.
	i := bytes.LastIndexByte(b, ')')
	f := strings.Fields(string(b[i+1:]))
	if i < 0 || len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}

// benchCatchUp mirrors the relay at source (the loaded log) into an empty
// one, beside the verify ceilings measured just before; sourceCPU reports
// the CPU time the source has used. The new mirror runs as its own process
// (this binary's anp2 mirror), as it would in the field, and is timed
// whole, from start to exit; with --catch-up-in-process both relays run
// inside the bench's process.
func (c *benchCmd) benchCatchUp(ctx context.Context, dir, source string, sourceCPU func() time.Duration) error {
	one, all := verifyCeiling(2 * time.Second)
	own := ownVerifyRate(2 * time.Second)
	fmt.Fprintf(c.out, "ceiling: raw Ed25519 verify (crypto/ed25519) %.0f/s on 1 core, %.0f/s on %d cores; this relay's verifier, key seen before: %.0f/s on %d cores\n",
		one, all, runtime.GOMAXPROCS(0), own, runtime.GOMAXPROCS(0))
	db := filepath.Join(dir, "mirror.db")
	start, self := time.Now(), sourceCPU()
	var res federation.MirrorResult
	var how string
	var err error
	if c.catchUpInProcess {
		res, how, err = c.mirrorInProcess(ctx, db, source, start)
	} else {
		res, how, err = c.mirrorProcess(ctx, db, source)
	}
	if err != nil {
		return err
	}
	el := time.Since(start)
	if !c.catchUpInProcess {
		how += fmt.Sprintf("; the loaded relay serving it: %.1f CPU-s", (sourceCPU() - self).Seconds())
	}
	rate := float64(res.Accepted) / el.Seconds()
	fmt.Fprintf(c.out, "catch-up of a new mirror (%s): %d events in %s = %.0f events/s = %.0f%% of the %d-core verify ceiling, %.0f%% of this relay's own verifier's rate (%d round trips, %d KiB of sync messages)\n",
		how, res.Accepted, el.Round(time.Millisecond), rate, 100*rate/all, runtime.GOMAXPROCS(0), 100*rate/own, res.Rounds, (res.BytesSent+res.BytesRecv)>>10)
	return nil
}

// cpuTime returns the CPU time this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// childEnv is this process's environment for a child bench process; a CPU
// profile asked of the bench goes to FILE.name for the child, so the two do
// not write over each other.
func childEnv(name string) []string {
	env := os.Environ()
	if path := os.Getenv("ANP2_CPUPROFILE"); path != "" {
		env = append(env, "ANP2_CPUPROFILE="+path+"."+name)
	}
	return env
}

// mirrorProcess runs anp2 mirror --db db --peer source as a child process
// (its progress goes to this process's stderr) and returns its result.
func (c *benchCmd) mirrorProcess(ctx context.Context, db, source string) (federation.MirrorResult, string, error) {
	var res federation.MirrorResult
	exe, err := os.Executable()
	if err != nil {
		return res, "", err
	}
	cmd := exec.CommandContext(ctx, exe, "mirror", "--db", db, "--peer", source)
	cmd.Env = childEnv("mirror")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, os.Stderr
	if err := cmd.Run(); err != nil {
		return res, "", fmt.Errorf("anp2 mirror: %w (%s)", err, out.Bytes())
	}
	// anp2 mirror prints one line per peer: {result} in <duration>.
	line, _, _ := bytes.Cut(out.Bytes(), []byte(" in "))
	if err := json.Unmarshal(line, &res); err != nil {
		return res, "", fmt.Errorf("anp2 mirror printed %q: %w", out.Bytes(), err)
	}
	how := fmt.Sprintf("own process, %.1f CPU-s", (cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()).Seconds())
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		how += fmt.Sprintf(", peak RSS %d MiB with the mapped log", ru.Maxrss>>10)
	}
	return res, how, nil
}

// mirrorInProcess starts an empty relay inside the bench and mirrors
// source into it.
func (c *benchCmd) mirrorInProcess(ctx context.Context, db, source string, start time.Time) (federation.MirrorResult, string, error) {
	m := newServe(c.out, os.Stderr)
	if err := m.ParseFlags([]string{"--addr", "127.0.0.1:0", "--db", db}); err != nil {
		return federation.MirrorResult{}, "", err
	}
	if err := m.Start(); err != nil {
		return federation.MirrorResult{}, "", err
	}
	defer m.Close()
	res, err := m.fed.MirrorOnce(ctx, source, func(r federation.MirrorResult) {
		c.progress.step(r.Phase, "catch-up: %d/%d events (%.0f/s) %s", r.Accepted, r.Need, float64(r.Accepted)/time.Since(start).Seconds(), r.Phase)
	})
	c.progress.done()
	return res, "in the bench's process", err
}

// importFile loads the corpus at path into db with the importer.
func (c *benchCmd) importFile(ctx context.Context, db, path string) error {
	st, err := sqlite.Open(db, nil)
	if err != nil {
		return err
	}
	defer st.Close()
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	start := time.Now()
	im := &offline.Importer{Store: st, Checker: protocol.DefaultChecker(), Now: time.Now().Unix(),
		OnProgress: func(s offline.ImportStats) {
			c.progress.update("import: %d events (%.0f/s)", s.Read, float64(s.Read)/time.Since(start).Seconds())
		},
		OnPhase: func(p string) { c.progress.step(p, "import: %s", p) }}
	res, err := im.Import(ctx, f)
	c.progress.done()
	fmt.Fprintf(c.out, "imported %d events (%d accepted) in %s\n", res.Read, res.Accepted, time.Since(start).Round(time.Second))
	return err
}

// getAll runs c.queries GETs from conc clients and returns their latencies.
// Answers are read as raw JSON: the load generator shares the machine, so
// it does not build them into maps.
func (c *benchCmd) getAll(ctx context.Context, cl *client.Client, path func(int) string, conc int) []time.Duration {
	return c.timeAll(conc, func(i int) error {
		var out json.RawMessage
		return cl.GetJSON(ctx, path(i), nil, &out)
	})
}
