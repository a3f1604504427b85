package stream

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/eventlog"
)

// TestLoad is the target run: STREAM_LOAD_SUBS (1000) concurrent
// HTTP subscribers on loopback with mixed filters while the real store
// commits STREAM_LOAD_RATE (1000) events/s for STREAM_LOAD_SECONDS (10).
// It asserts that every subscriber receives exactly the events its filter
// matches (resuming, as a client would, if it is ever dropped), and logs
// publish-to-receive latency, memory per idle subscriber and CPU use. No
// timing is asserted.
func TestLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("load test: run without -short")
	}
	if raceEnabled {
		t.Skip("load figures mean nothing under -race")
	}
	subs, rate, secs := envInt("STREAM_LOAD_SUBS", 1000), envInt("STREAM_LOAD_RATE", 1000), envInt("STREAM_LOAD_SECONDS", 10)
	r := newRig(t, Options{MaxSubscribers: subs + 16})
	t.Logf("machine: %d CPUs, GOMAXPROCS %d, %s", runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.Version())

	idleMemory(t, r, subs)
	pub := newPublishLog(rate*secs + 1000)
	r.mu.Lock()
	r.onPublish = pub.record
	r.mu.Unlock()

	base := runLoad(t, r, pub, 1, 100, 2) // the ceiling: one subscriber, light load
	t.Logf("baseline, 1 subscriber at 100 events/s: p50 %s, p99 %s", base.pct(50), base.pct(99))
	res := runLoad(t, r, pub, subs, rate, secs)
	t.Logf("%d subscribers, %d events at %.0f events/s for %s: %d frames delivered (%.0f/s), %d drops+resumes",
		subs, res.events, float64(res.events)/res.elapsed.Seconds(), res.elapsed.Round(time.Millisecond),
		res.frames, float64(res.frames)/res.elapsed.Seconds(), res.drops)
	t.Logf("publish-to-receive latency: p50 %s, p90 %s, p99 %s, p99.9 %s, max %s",
		res.pct(50), res.pct(90), res.pct(99), res.pct(99.9), res.pct(100))
	t.Logf("process CPU during the run: %.2f cores of %d; load average %s", res.cpu.Seconds()/res.elapsed.Seconds(), runtime.NumCPU(), loadAvg())
}

// loadAvg returns the 1-minute load average: other work on a shared
// machine shows up in the latency figures.
func loadAvg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := bytes.Fields(b)
	if len(f) == 0 {
		return "unknown"
	}
	return string(f[0])
}

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

// idleMemory logs the heap, stack and goroutines each idle stream costs:
// first the hub alone, then whole HTTP streams held by bare TCP clients
// (whose own share is a few hundred bytes of socket state).
func idleMemory(t *testing.T, r *rig, n int) {
	before := memNow()
	hub := NewHub(Options{Backlog: r.backlog})
	f, _ := ParseFilter(mustQuery(t, "kinds=1&t=weather"))
	held := make([]*subscriber, n)
	for i := range held {
		held[i], _ = hub.register(f, "", nil)
	}
	after := memNow()
	t.Logf("idle subscriber, hub only: %.0f B heap each", float64(after.heap-before.heap)/float64(n))
	hub.Close()
	runtime.KeepAlive(held)

	before = memNow()
	conns := make([]net.Conn, n)
	for i := range conns {
		c, err := net.Dial("tcp", r.srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "GET /stream?kinds=%d HTTP/1.1\r\nHost: relay\r\n\r\n", 1_000_000+i)
		conns[i] = c
	}
	waitFor(t, func() bool { return r.hub.Stats().Subscribers == n })
	time.Sleep(200 * time.Millisecond) // let every handler reach its idle wait
	after = memNow()
	t.Logf("idle subscriber over HTTP (net/http conn + hub): %.1f kB heap + %.1f kB stack, %.2f goroutines each",
		float64(after.heap-before.heap)/float64(n)/1024, float64(after.stack-before.stack)/float64(n)/1024,
		float64(after.goroutines-before.goroutines)/float64(n))
	for _, c := range conns {
		c.Close()
	}
	waitFor(t, func() bool { return r.hub.Stats().Subscribers == 0 })
}

type memSample struct{ heap, stack, goroutines int64 }

func memNow() memSample {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return memSample{int64(m.HeapAlloc), int64(m.StackInuse), int64(runtime.NumGoroutine())}
}

// publishLog records, per sequence, when the hub got it and the event.
type publishLog struct {
	at []atomic.Int64
	ev []atomic.Pointer[protocol.Event]
}

func newPublishLog(n int) *publishLog {
	return &publishLog{at: make([]atomic.Int64, n), ev: make([]atomic.Pointer[protocol.Event], n)}
}

func (p *publishLog) record(items []Item) {
	now := time.Now().UnixNano()
	for _, it := range items {
		if it.Seq < int64(len(p.at)) {
			p.at[it.Seq].Store(now)
			p.ev[it.Seq].Store(it.Event)
		}
	}
}

type loadResult struct {
	events, frames, drops int
	elapsed, cpu          time.Duration
	lat                   []time.Duration
}

func (l *loadResult) pct(p float64) time.Duration {
	if len(l.lat) == 0 {
		return 0
	}
	i := int(float64(len(l.lat)-1) * p / 100)
	return l.lat[i].Round(10 * time.Microsecond)
}

// runLoad connects subs live subscribers, commits rate events/s for secs
// seconds through the store, checks what each subscriber received and
// returns the figures.
func runLoad(t *testing.T, r *rig, pub *publishLog, subs, rate, secs int) *loadResult {
	events := genEvents(rate*secs, uint64(subs))
	clients := make([]*loadClient, subs)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 32)
	for i := range clients {
		clients[i] = &loadClient{r: r, pub: pub, query: loadFilter(i, subs)}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			clients[i].connect(t, "")
		}()
	}
	wg.Wait()
	for _, c := range clients {
		go c.run(t)
	}
	cpu0 := cpuTime()
	start := time.Now()
	first := publishPaced(t, r, events, rate)
	elapsed := time.Since(start)
	cpu := cpuTime() - cpu0

	res := &loadResult{events: len(events), elapsed: elapsed, cpu: cpu}
	last := first + int64(len(events)) - 1
	deadline := time.Now().Add(60 * time.Second)
	for _, c := range clients {
		f, _ := ParseFilter(mustQuery(t, c.query))
		var want []int64
		for seq := first; seq <= last; seq++ {
			if f.Match(pub.ev[seq].Load()) {
				want = append(want, seq)
			}
		}
		got := c.wait(len(want), deadline)
		if !slices.Equal(got, want) {
			t.Errorf("subscriber %q received %d events, want %d (first difference at %d)", c.query, len(got), len(want), firstDiff(got, want))
		}
		c.stop()
		res.frames += len(got)
		res.drops += int(c.drops.Load())
		res.lat = append(res.lat, c.lat...)
	}
	slices.Sort(res.lat)
	return res
}

// publishPaced appends events through the store in 10 ms batches at rate
// events/s and returns the first sequence. Batches are not held up by the
// commit of the one before (the store groups whatever is queued), so a
// slow fsync delays events but does not lower the rate.
func publishPaced(t *testing.T, r *rig, events []*protocol.Event, rate int) int64 {
	per := max(rate/100, 1)
	start := time.Now()
	var wg sync.WaitGroup
	var mu sync.Mutex
	first := int64(math.MaxInt64)
	for i, n := 0, 0; i < len(events); i, n = i+per, n+1 {
		time.Sleep(time.Until(start.Add(time.Duration(n) * 10 * time.Millisecond)))
		batch := events[i:min(i+per, len(events))]
		recs := make([]eventlog.Record, len(batch))
		for j, e := range batch {
			recs[j] = eventlog.Record{Event: e, ReceivedAt: e.CreatedAt}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := r.store.AppendBatch(context.Background(), recs)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			for _, x := range res {
				first = min(first, x.Seq)
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	return first
}

var loadKeys = sync.OnceValue(func() []ed25519.PrivateKey {
	keys := make([]ed25519.PrivateKey, 50)
	for i := range keys {
		keys[i] = key(1000 + i)
	}
	return keys
})

func loadAuthor(i int) string { return protocol.AgentIDOf(loadKeys()[i%50]) }

// genEvents makes n distinct signed events: kinds 1 (55%), 6 (25%), 7
// (10%), 50 (10%, with a cap tag); one of 20 topics each; a p tag on 30%.
func genEvents(n int, seed uint64) []*protocol.Event {
	rng := rand.New(rand.NewPCG(seed, uint64(n)))
	keys := loadKeys()
	out := make([]*protocol.Event, n)
	for i := range out {
		tags := [][]string{{"t", fmt.Sprintf("topic-%d", rng.IntN(20))}}
		var kind int64
		switch x := rng.IntN(100); {
		case x < 55:
			kind = 1
		case x < 80:
			kind = 6
		case x < 90:
			kind = 7
		default:
			kind = 50
			tags = append(tags, []string{"cap", fmt.Sprintf("cap-%d", rng.IntN(5))})
		}
		if rng.IntN(10) < 3 {
			tags = append(tags, []string{"p", loadAuthor(rng.IntN(50))})
		}
		content := fmt.Sprintf(`{"n":%d,"seed":%d,"text":"load test event with a body of ordinary size"}`, i, seed)
		out[i] = mk(keys[rng.IntN(50)], 1_800_000_000+int64(i), kind, content, tags...)
	}
	return out
}

// loadFilter spreads subscribers over the filter shapes.
func loadFilter(i, n int) string {
	topic, capName := fmt.Sprintf("topic-%d", i%20), fmt.Sprintf("cap-%d", i%5)
	switch i % 10 {
	case 0:
		if i%50 == 0 || n == 1 {
			return ""
		}
		return "kinds=7"
	case 1:
		return "kinds=7"
	case 2, 3:
		return "t=" + topic
	case 4:
		return "authors=" + loadAuthor(i)
	case 5:
		return "filter=kind:1,t:" + topic
	case 6:
		return "cap=" + capName
	case 7:
		return "p=" + loadAuthor(i)
	case 8:
		return "filter=author:" + loadAuthor(i) + ",kind:1"
	default:
		return "kinds=50&filter=cap:" + capName
	}
}

// loadClient is a lean SSE client that records each event's sequence and
// its publish-to-receive latency, and resumes when dropped.
type loadClient struct {
	r     *rig
	pub   *publishLog
	query string

	resp   *http.Response
	body   io.ReadCloser // resp.Body past the opening frames
	cancel context.CancelFunc
	lastID string
	drops  atomic.Int32

	mu   sync.Mutex
	seqs []int64
	lat  []time.Duration
	done bool
	cond *sync.Cond
}

func (c *loadClient) connect(t *testing.T, lastID string) {
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, c.r.srv.URL+"/stream?"+c.query, nil)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := c.r.srv.Client().Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		cancel()
		t.Errorf("connect %q: %v %v", c.query, err, resp)
		return
	}
	c.mu.Lock()
	c.resp, c.cancel = resp, cancel
	if c.cond == nil {
		c.cond = sync.NewCond(&c.mu)
	}
	c.mu.Unlock()
	// Wait for the live marker so publishing starts after registration.
	br := bufio.NewReaderSize(resp.Body, 16<<10)
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			t.Errorf("connect %q: %v", c.query, err)
			return
		}
		if bytes.HasPrefix(line, []byte("id: ")) {
			c.lastID = string(bytes.TrimSpace(line[4:]))
		}
		if bytes.Equal(line, []byte(": live\n")) {
			break
		}
	}
	c.body = struct {
		io.Reader
		io.Closer
	}{br, resp.Body}
}

// run reads frames until stopped, resuming after a drop.
func (c *loadClient) run(t *testing.T) {
	for {
		slow := c.read()
		c.mu.Lock()
		done := c.done
		c.mu.Unlock()
		if done || !slow {
			return
		}
		c.drops.Add(1)
		c.connect(t, c.lastID)
	}
}

// read consumes one connection; it reports whether it ended with a
// "too slow" comment.
func (c *loadClient) read() (slow bool) {
	br := bufio.NewReaderSize(c.body, 16<<10)
	var seq int64 = -1
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return false
		}
		switch {
		case bytes.HasPrefix(line, []byte("id: ")):
			c.lastID = string(bytes.TrimSpace(line[4:]))
			seq, _ = strconv.ParseInt(c.lastID, 10, 64)
		case bytes.HasPrefix(line, []byte("data: ")) && seq >= 0:
			now := time.Now().UnixNano()
			c.mu.Lock()
			c.seqs = append(c.seqs, seq)
			if seq < int64(len(c.pub.at)) {
				c.lat = append(c.lat, time.Duration(now-c.pub.at[seq].Load()))
			}
			c.cond.Broadcast()
			c.mu.Unlock()
			seq = -1
		case bytes.HasPrefix(line, []byte(": too slow")):
			return true
		case len(line) == 1:
			seq = -1
		}
	}
}

// wait returns the received sequences once n arrived or at deadline.
func (c *loadClient) wait(n int, deadline time.Time) []int64 {
	timer := time.AfterFunc(time.Until(deadline), func() { c.mu.Lock(); c.cond.Broadcast(); c.mu.Unlock() })
	defer timer.Stop()
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.seqs) < n && time.Now().Before(deadline) {
		c.cond.Wait()
	}
	return slices.Clone(c.seqs)
}

func (c *loadClient) stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.done = true
	if c.cancel != nil {
		c.cancel()
		c.resp.Body.Close()
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
