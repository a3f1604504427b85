package main

import (
	"context"
	"crypto/ed25519"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anp2net/relay/client"
	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/protocol/sigverify"
	"github.com/anp2net/relay/relay/eventlog"
)

// benchCmd measures a relay: single-event publish throughput and latency
// with N concurrent clients, latency at half that rate, and query latency,
// beside the machine's raw Ed25519 verification rate measured in the same
// run. Without --relay it starts a relay in-process on a temporary database
// with rate limits off.
type benchCmd struct {
	out         io.Writer
	progress    *progress
	relayURL    string
	events      int
	agents      int
	concurrency int
	queries     int
	paceFor     time.Duration
	fill        int
	queryConc   int
	replay      int
	corpus      string
	viewsFill   int
	loadRate    int
	mirrorToo   bool
	// catchUpInProcess runs the --catch-up mirror inside the bench.
	catchUpInProcess bool
	// inProcess runs the publish bench's relay inside the bench's own
	// process (the default is an anp2 serve process of its own); batch is
	// the POST /events/batch size of the batch run (0: no batch run).
	inProcess bool
	batch     int
	// genProcs is the GOMAXPROCS of the load generator while it sends.
	genProcs int
	// relayBin is the anp2 binary the relay process runs ("": this one).
	relayBin string
	// backends and pg: see benchBackends.
	backends int
	pg       string
	// scale is --scale's list of log sizes (see benchScale).
	scale string
	// push and its sizes: see benchPush.
	push                                                     bool
	pushSubs, pushTriggers, pushRate, pushEvents, pushTopics int
}

func (c *benchCmd) ParseFlags(args []string) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.StringVar(&c.relayURL, "relay", "", "relay base URL (default: start one in-process on a temp database)")
	fs.IntVar(&c.events, "events", 20000, "events to publish in the throughput run")
	fs.IntVar(&c.agents, "agents", 2000, "distinct signing agents")
	fs.IntVar(&c.concurrency, "concurrency", 32, "concurrent publishing clients")
	fs.IntVar(&c.queries, "queries", 2000, "queries per query benchmark")
	fs.DurationVar(&c.paceFor, "pace-for", 5*time.Second, "duration of the half-rate latency run")
	fs.IntVar(&c.fill, "fill", 0, "preload this many signed events into the in-process relay's log before measuring queries")
	fs.IntVar(&c.queryConc, "query-concurrency", 4, "concurrent query clients")
	fs.IntVar(&c.replay, "replay", 0, "instead, measure the auditor's replay of a mixed log of this many events")
	fs.IntVar(&c.viewsFill, "views", 0, "instead, load a mixed log of this many events and measure /trust and /credit under publishing")
	fs.BoolVar(&c.mirrorToo, "catch-up", false, "with --views: then serve the loaded log from an anp2 serve process, mirror it into an empty one (an anp2 mirror process) and time that")
	fs.BoolVar(&c.catchUpInProcess, "catch-up-in-process", false, "with --catch-up: run the loaded relay and the mirror inside the bench's process instead of an anp2 serve and an anp2 mirror process")
	fs.IntVar(&c.loadRate, "load-rate", 200, "with --views: background publishes per second")
	fs.BoolVar(&c.inProcess, "in-process", false, "run the relay inside the bench's process instead of an anp2 serve process of its own (implied by --fill)")
	fs.StringVar(&c.relayBin, "relay-bin", "", "run the relay process from this anp2 binary instead of this one (A/B against another build)")
	fs.IntVar(&c.genProcs, "generator-procs", 0, "GOMAXPROCS of this process while it sends the publish load (0: leave it); 1 spends less of the relay's CPU but may delay the reading of an answer behind the generator's own work, which then counts in its latency")
	fs.IntVar(&c.batch, "batch", 100, "events per POST /events/batch in the batch run (0: skip it)")
	fs.IntVar(&c.backends, "backends", 0, "instead, fill a log of this many events and compare SQLite, PostgreSQL with one relay process and with two (needs --pg), and time its migration")
	fs.StringVar(&c.pg, "pg", "", "with --backends: a postgres:// URL of a database on the server to create the bench's databases on (they are dropped after)")
	fs.StringVar(&c.corpus, "corpus", "", "with --replay: corpus file to reuse, or to create when missing (default: a temporary file); with --backends: the SQLite log to reuse or fill; with --scale: a directory of corpus-N.jsonl files, one per size, reused or created")
	fs.StringVar(&c.scale, "scale", "", "instead, for each of these comma-separated log sizes (e.g. 1000000,3000000,10000000) import a mixed corpus into a fresh log and measure the relay process on it: time to ready with no saved state, after a clean stop and after kill -9, RSS (total, anonymous, file-backed) and Go heap, publish rate and half-load p99, read p99s; then print a table with the slope per million events (--corpus DIR keeps one corpus-N.jsonl per size for later runs)")
	fs.BoolVar(&c.push, "push", false, "instead, measure push delivery (SPEC §16): WebSocket subscribers and webhook triggers while events are published at --push-rate")
	fs.IntVar(&c.pushSubs, "push-subscribers", 1000, "with --push: WebSocket clients, one REQ each")
	fs.IntVar(&c.pushTriggers, "push-triggers", 1000, "with --push: webhook triggers")
	fs.IntVar(&c.pushRate, "push-rate", 500, "with --push: events published per second")
	fs.IntVar(&c.pushEvents, "push-events", 5000, "with --push: events per phase (one with nobody listening, one with the listeners)")
	fs.IntVar(&c.pushTopics, "push-topics", 1000, "with --push: subscriber and trigger i listen to topic i mod this, event j carries topic j mod this (1: every event to everyone)")
	return parse(fs, args)
}

func (c *benchCmd) Run(ctx context.Context) error {
	if c.push {
		return c.benchPush(ctx)
	}
	if c.scale != "" {
		return c.benchScale(ctx)
	}
	if c.replay > 0 {
		return c.benchReplay(ctx)
	}
	if c.backends > 0 {
		return c.benchBackends(ctx)
	}
	if c.viewsFill > 0 {
		if c.corpus == "" {
			return fmt.Errorf("--views needs --corpus FILE (created when missing)")
		}
		return c.benchViews(ctx)
	}
	base := c.relayURL
	// relayCPU reads the relay process's CPU time (0 when it is not ours).
	relayCPU := func() time.Duration { return 0 }
	// genCPU reads the load generator's CPU time (0 when the relay runs in
	// this process too).
	genCPU := ownCPU
	if base == "" {
		dir, err := os.MkdirTemp("", "anp2-bench-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		db := filepath.Join(dir, "bench.db")
		if c.inProcess || c.fill > 0 {
			genCPU = func() time.Duration { return 0 }
			srv := newServe(io.Discard, io.Discard)
			if err := srv.ParseFlags([]string{"--addr", "127.0.0.1:0", "--db", db, "--rate-agent", "0", "--rate-ip", "0"}); err != nil {
				return err
			}
			sctx, cancel := context.WithCancel(ctx)
			defer cancel()
			if err := srv.Start(); err != nil {
				return err
			}
			go srv.srv.Serve(sctx, srv.ln)
			defer srv.Close()
			base = "http://" + srv.Addr()
			if c.fill > 0 {
				if err := c.fillLog(ctx, srv.store); err != nil {
					return err
				}
			}
		} else {
			b, pid, stop, err := serveProcessOf(ctx, c.relayBin, db)
			if err != nil {
				return err
			}
			defer stop()
			base, relayCPU = b, func() time.Duration { return procCPU(pid) }
			bin := c.relayBin
			if bin == "" {
				bin = "this binary"
			}
			fmt.Fprintf(c.out, "relay: its own anp2 serve process (%s, pid %d); this process only generates load\n", bin, pid)
		}
	} else if c.fill > 0 {
		return fmt.Errorf("--fill needs the in-process relay (no --relay)")
	}
	fmt.Fprintf(c.out, "machine: %d CPUs (GOMAXPROCS %d), %s/%s\n", runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.GOOS, runtime.GOARCH)
	one, all := verifyCeiling(time.Second)
	fmt.Fprintf(c.out, "ceiling: raw Ed25519 verify %.0f/s on 1 core, %.0f/s on %d cores\n", one, all, runtime.GOMAXPROCS(0))

	keys := make([]ed25519.PrivateKey, c.agents)
	for i := range keys {
		seed := make([]byte, 32)
		seed[0], seed[1], seed[2] = byte(i), byte(i>>8), 0xbe
		keys[i] = ed25519.NewKeyFromSeed(seed)
	}
	// Every event is signed before any is sent: the clock of a run counts
	// publishing only.
	evs := c.makeEvents(keys, c.events, time.Now().Unix(), "publish")
	target, err := newLoadTarget(base)
	if err != nil {
		return err
	}
	reqs := target.publishRequests(evs)
	cpu0, gen0 := relayCPU(), genCPU()
	lat, elapsed, errs := c.sendAll(ctx, target, reqs, c.concurrency, 0, len(evs))
	rate := float64(len(evs)-errs) / elapsed.Seconds()
	fmt.Fprintf(c.out, "publish (%d clients): %d events in %s = %.0f accepted/s (%.1f%% of the %d-core verify ceiling), %d errors%s\n",
		c.concurrency, len(evs), elapsed.Round(time.Millisecond), rate, 100*rate/all, runtime.GOMAXPROCS(0), errs,
		cpuPerEvent(relayCPU()-cpu0, genCPU()-gen0, len(evs)-errs, one))
	printLatency(c.out, "  publish latency", lat)
	if c.batch > 0 {
		bevs := c.makeEvents(keys, c.events, time.Now().Unix()+2, "batch")
		breqs := target.batchRequests(bevs, c.batch)
		cpu0, gen0 = relayCPU(), genCPU()
		blat, belapsed, berrs := c.sendAll(ctx, target, breqs, c.concurrency/4+1, 0, len(bevs))
		brate := float64(len(bevs)-berrs) / belapsed.Seconds()
		fmt.Fprintf(c.out, "batch publish (POST /events/batch of %d, %d clients): %d events in %s = %.0f accepted/s (%.1f%% of the %d-core verify ceiling), %d errors%s\n",
			c.batch, c.concurrency/4+1, len(bevs), belapsed.Round(time.Millisecond), brate, 100*brate/all, runtime.GOMAXPROCS(0), berrs,
			cpuPerEvent(relayCPU()-cpu0, genCPU()-gen0, len(bevs)-berrs, one))
		printLatency(c.out, "  batch latency", blat)
	}

	n := int(rate / 2 * c.paceFor.Seconds())
	paced := target.publishRequests(c.makeEvents(keys, n, time.Now().Unix()+1, "paced"))
	cpu0, gen0 = relayCPU(), genCPU()
	lat, elapsed, errs = c.sendAll(ctx, target, paced, c.concurrency, rate/2, n)
	fmt.Fprintf(c.out, "publish paced at %.0f/s (half the measured rate): %d events in %s, %d errors%s\n", rate/2, n, elapsed.Round(time.Millisecond), errs,
		cpuPerEvent(relayCPU()-cpu0, genCPU()-gen0, n-errs, one))
	printLatency(c.out, "  paced latency", lat)

	cl := benchClient(base, c.concurrency)
	for _, q := range []struct {
		name string
		mk   func(i int) url.Values
	}{
		{"GET /events?t=<topic>&limit=100", func(i int) url.Values { return url.Values{"t": {fmt.Sprint("topic", i%50)}, "limit": {"100"}} }},
		{"GET /events?authors=<agent>&limit=100", func(i int) url.Values {
			return url.Values{"authors": {protocol.AgentIDOf(keys[i%len(keys)])}, "limit": {"100"}}
		}},
	} {
		lat := c.queryAll(ctx, cl, q.mk)
		printLatency(c.out, q.name, lat)
	}
	return nil
}

func benchClient(base string, conns int) *client.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = conns * 2
	tr.MaxConnsPerHost = conns * 2
	return &client.Client{Base: base, HTTP: &http.Client{Transport: tr, Timeout: 30 * time.Second}}
}

// makeEvents signs n kind-1 posts spread over keys and 50 topics.
// makeEvents signs n kind 1 events of the given phase: the phase is in the
// content, so two phases never sign the same event even when their
// created_at falls on the same second (the paced run after a batch run of
// about a second once re-sent the batch's events, and measured duplicates).
func (c *benchCmd) makeEvents(keys []ed25519.PrivateKey, n int, createdAt int64, phase string) []*protocol.Event {
	evs := make([]*protocol.Event, n)
	var wg sync.WaitGroup
	workers := runtime.GOMAXPROCS(0)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := w; i < n; i += workers {
				e := &protocol.Event{CreatedAt: createdAt, Kind: 1, Content: fmt.Sprintf("bench %s event %d at %d", phase, i, createdAt),
					Tags: [][]string{{"t", fmt.Sprint("topic", i%50)}}}
				e.Sign(keys[i%len(keys)])
				evs[i] = e
			}
		}(w)
	}
	wg.Wait()
	return evs
}

// publishAll posts evs with conc workers, optionally paced to rate events/s
// overall, and returns per-event latencies, wall time and the error count
// (failed requests and answers that do not accept their event). Each
// request is serialized before the clock starts and sent by the lean
// generator of benchload.go.
func (c *benchCmd) publishAll(ctx context.Context, base string, evs []*protocol.Event, conc int, rate float64) ([]time.Duration, time.Duration, int, error) {
	t, err := newLoadTarget(base)
	if err != nil {
		return nil, 0, 0, err
	}
	reqs := t.publishRequests(evs)
	lat, elapsed, errs := c.sendAll(ctx, t, reqs, conc, rate, len(evs))
	return lat, elapsed, errs, nil
}

// sendAll sends reqs from conc workers, each on a keep-alive connection of
// its own, optionally paced to rate requests/s overall, and returns each
// request's latency (from writing the request to reading the complete
// answer), the wall time and how many events were not accepted.
func (c *benchCmd) sendAll(ctx context.Context, t loadTarget, reqs []loadRequest, conc int, rate float64, events int) ([]time.Duration, time.Duration, int) {
	if c.genProcs > 0 {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(c.genProcs))
	}
	lat := make([]time.Duration, len(reqs))
	var next, done, errs atomic.Int64
	var firstErr atomic.Pointer[error]
	start := time.Now()
	var wg sync.WaitGroup
	for w := 0; w < conc; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lc := &loadConn{t: t}
			defer lc.close()
			lc.dial() // a failure is the first request's error
			for {
				i := int(next.Add(1) - 1)
				if i >= len(reqs) || ctx.Err() != nil {
					return
				}
				if rate > 0 {
					due := start.Add(time.Duration(float64(i) / rate * float64(time.Second)))
					time.Sleep(time.Until(due))
				}
				r := &reqs[i]
				t0 := time.Now()
				status, body, err := lc.roundTrip(r.wire)
				lat[i] = time.Since(t0)
				bad := len(r.ids)
				switch {
				case err != nil:
					firstErr.CompareAndSwap(nil, &err)
				case status != 200:
				case !r.batch:
					if publishAccepted(body, r.ids[0]) {
						bad = 0
					}
				default:
					bad = batchNotAccepted(body, r.ids)
				}
				if bad > 0 {
					errs.Add(int64(bad))
					if err == nil {
						err = fmt.Errorf("status %d: %.200s", status, body)
						firstErr.CompareAndSwap(nil, &err)
					}
				}
				if d := done.Add(int64(len(r.ids))); d%500 < int64(len(r.ids)) {
					c.progress.update("published %d/%d", d, events)
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	c.progress.done()
	if e := firstErr.Load(); e != nil {
		fmt.Fprintf(c.out, "  first error: %v\n", *e)
	}
	return lat, elapsed, int(errs.Load())
}

func (c *benchCmd) queryAll(ctx context.Context, cl *client.Client, mk func(int) url.Values) []time.Duration {
	return c.timeAll(c.queryConc, func(i int) error {
		_, err := cl.Events(ctx, mk(i))
		return err
	})
}

// timeAll runs do(0..c.queries-1) from conc workers and returns each
// call's latency; errors are printed and timed like answers.
func (c *benchCmd) timeAll(conc int, do func(i int) error) []time.Duration {
	lat := make([]time.Duration, c.queries)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= c.queries {
					return
				}
				t0 := time.Now()
				if err := do(i); err != nil {
					fmt.Fprintln(c.out, "query error:", err)
				}
				lat[i] = time.Since(t0)
			}
		}()
	}
	wg.Wait()
	return lat
}

// fillLog signs c.fill kind-1 events from c.agents agents over 50 topics,
// spread over the last six days, and appends them in large group commits.
func (c *benchCmd) fillLog(ctx context.Context, st eventlog.Log) error {
	keys := make([]ed25519.PrivateKey, c.agents)
	for i := range keys {
		seed := make([]byte, 32)
		seed[0], seed[1], seed[2] = byte(i), byte(i>>8), 0xbe
		keys[i] = ed25519.NewKeyFromSeed(seed)
	}
	start, now := time.Now(), time.Now().Unix()
	const chunk = 20000
	for done := 0; done < c.fill; done += chunk {
		n := min(chunk, c.fill-done)
		recs := make([]eventlog.Record, n)
		var wg sync.WaitGroup
		for w := 0; w < runtime.GOMAXPROCS(0); w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				for i := w; i < n; i += runtime.GOMAXPROCS(0) {
					j := done + i
					e := &protocol.Event{CreatedAt: now - int64(j%(6*86400)), Kind: int64(1 + j%3), Content: fmt.Sprint("fill ", j),
						Tags: [][]string{{"t", fmt.Sprint("topic", j%50)}, {"p", protocol.AgentIDOf(keys[(j+1)%len(keys)])}}}
					e.Sign(keys[j%len(keys)])
					recs[i] = eventlog.Record{Event: e, ReceivedAt: now}
				}
			}(w)
		}
		wg.Wait()
		if _, err := st.AppendBatch(ctx, recs); err != nil {
			return err
		}
		c.progress.update("filled %d/%d events (%.0f/s)", done+n, c.fill, float64(done+n)/time.Since(start).Seconds())
	}
	c.progress.done()
	fmt.Fprintf(c.out, "filled the log with %d events in %s\n", c.fill, time.Since(start).Round(time.Second))
	return nil
}

// verifyCeiling measures raw Ed25519 verifications per second
// (crypto/ed25519) on one core and on all cores.
func verifyCeiling(d time.Duration) (one, all float64) {
	seed := make([]byte, 32)
	key := ed25519.NewKeyFromSeed(seed)
	msg := make([]byte, 32)
	sig := ed25519.Sign(key, msg)
	pub := key.Public().(ed25519.PublicKey)
	verify := func() { ed25519.Verify(pub, msg, sig) }
	return countVerifies(d, 1, verify), countVerifies(d, runtime.GOMAXPROCS(0), verify)
}

// ownVerifyRate measures, on all cores, the relay's own verifier
// (protocol/sigverify) for a key it has seen before, the case of nearly
// every event in a catch-up or replay: the figure to read the ceiling's
// ratios against, since the relay is not bound by crypto/ed25519's rate.
func ownVerifyRate(d time.Duration) float64 {
	seed := make([]byte, 32)
	seed[0] = 1
	key := ed25519.NewKeyFromSeed(seed)
	msg := make([]byte, 32)
	sig := ed25519.Sign(key, msg)
	pub := key.Public().(ed25519.PublicKey)
	c := sigverify.New(sigverify.DefaultBytes)
	for range 3 {
		c.Verify(pub, msg, sig) // the second valid signature builds the table
	}
	return countVerifies(d, runtime.GOMAXPROCS(0), func() { c.Verify(pub, msg, sig) })
}

// countVerifies runs verify on workers goroutines for d and returns the
// calls per second.
func countVerifies(d time.Duration, workers int, verify func()) float64 {
	var n atomic.Int64
	var wg sync.WaitGroup
	stop := time.Now().Add(d)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(stop) {
				for i := 0; i < 64; i++ {
					verify()
				}
				n.Add(64)
			}
		}()
	}
	wg.Wait()
	return float64(n.Load()) / d.Seconds()
}

func printLatency(w io.Writer, name string, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	p := quantiles(lat)
	fmt.Fprintf(w, "%s: p50 %s  p90 %s  p99 %s  max %s  (n=%d)\n", name,
		p(0.50).Round(time.Microsecond), p(0.90).Round(time.Microsecond), p(0.99).Round(time.Microsecond), p(1).Round(time.Microsecond), len(lat))
}

// quantiles sorts a copy of lat (not empty) and returns its quantile
// function: q of 1 is the maximum.
func quantiles(lat []time.Duration) func(q float64) time.Duration {
	s := slices.Clone(lat)
	slices.Sort(s)
	return func(q float64) time.Duration { return s[min(len(s)-1, int(q*float64(len(s))))] }
}

// cpuPerEvent formats the relay process's CPU time per accepted event
// beside what one crypto/ed25519 verification costs on this machine (the
// reciprocal of the 1-core ceiling oneCore), and the load generator's own
// CPU time per accepted event (this process's rusage: on a machine of few
// cores it is taken from the relay); the relay's part is "" when the relay
// is not a process of ours.
func cpuPerEvent(cpu, gen time.Duration, n int, oneCore float64) string {
	if n <= 0 {
		return ""
	}
	s := ""
	if cpu > 0 {
		per := cpu / time.Duration(n)
		verify := time.Duration(float64(time.Second) / oneCore)
		s = fmt.Sprintf("; relay CPU %s per accepted event (%.1f× one signature check, %s here)", per.Round(100*time.Nanosecond), float64(per)/float64(verify), verify.Round(100*time.Nanosecond))
	}
	if gen > 0 {
		s += fmt.Sprintf("; load generator CPU %s per accepted event", (gen / time.Duration(n)).Round(100*time.Nanosecond))
	}
	return s
}
