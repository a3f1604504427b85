package delivery_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anp2net/relay/client"
	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay"
	"github.com/anp2net/relay/relay/delivery"
	"github.com/anp2net/relay/relay/relaytest"
	"github.com/anp2net/relay/relay/ws"
	"github.com/anp2net/relay/tasks/taskstest"
	"github.com/coder/websocket"
)

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

// pushRun is one paced publishing run and what its receivers saw.
type pushRun struct {
	tag   string         // content prefix of this run's events
	start []atomic.Int64 // UnixNano each event's publish began
	mu    sync.Mutex
	ws    []time.Duration
	hooks []time.Duration
}

// index returns the event number in content "<tag><n>" found in frame,
// or -1: a receiver only scans for it, so the load generator's own cost
// stays small beside the relay's.
func (p *pushRun) index(frame []byte) int {
	i := bytes.Index(frame, []byte(`"content":"`+p.tag))
	if i < 0 {
		return -1
	}
	rest := frame[i+len(`"content":"`)+len(p.tag):]
	n := 0
	for j, c := range rest {
		if c < '0' || c > '9' {
			if j == 0 {
				return -1
			}
			break
		}
		n = n*10 + int(c-'0')
	}
	if n >= len(p.start) {
		return -1
	}
	return n
}

func (p *pushRun) since(i int, now time.Time) time.Duration {
	return now.Sub(time.Unix(0, p.start[i].Load()))
}

func pct(ds []time.Duration, q float64) float64 {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return float64(ds[min(len(ds)-1, int(q*float64(len(ds))))].Microseconds()) / 1000
}

// publishPaced publishes evs at rate per second, each started on
// schedule (a pool of 64 workers, so a slow answer does not slow the
// pace until 64 are in flight), and returns the publish latencies and the
// achieved rate (events / time from the first start to the last answer).
func publishPaced(b *testing.B, cl *client.Client, evs []*protocol.Event, run *pushRun, rate int) ([]time.Duration, float64) {
	pubs := make([]time.Duration, len(evs))
	work := make(chan int, len(evs))
	var wg sync.WaitGroup
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				t0 := time.Now()
				run.start[i].Store(t0.UnixNano())
				if _, err := cl.Publish(context.Background(), evs[i], false); err != nil {
					b.Error(err)
				}
				pubs[i] = time.Since(t0)
			}
		}()
	}
	t0 := time.Now()
	for i := range evs {
		if wait := time.Until(t0.Add(time.Duration(i) * time.Second / time.Duration(rate))); wait > 0 {
			time.Sleep(wait)
		}
		work <- i
	}
	close(work)
	wg.Wait()
	return pubs, float64(len(evs)) / time.Since(t0).Seconds()
}

func loadavg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// BenchmarkPush is SPEC §16's target: ANP2_BENCH_SUBSCRIBERS (default
// 1000) WebSocket connections with one REQ each and ANP2_BENCH_TRIGGERS
// (default 1000) webhook triggers to a real loopback receiver, on one
// relay (a real SQLite log on loopback HTTP), b.N pre-signed events
// published at ANP2_BENCH_RATE per second (default 500). Subscriber and
// trigger i listen to topic i mod ANP2_BENCH_TOPICS; event j carries topic
// j mod ANP2_BENCH_TOPICS: with 1 topic (the default) every event goes to
// every subscriber and every trigger, with 1000 each event to one of
// each. The same run first publishes b.N events with nobody listening,
// so the publish rate with and without the listeners is measured side by
// side. The load generator (clients, receiver) shares the relay's process
// and cores.
func BenchmarkPush(b *testing.B) {
	subs, trigs := envInt("ANP2_BENCH_SUBSCRIBERS", 1000), envInt("ANP2_BENCH_TRIGGERS", 1000)
	rate, topics := envInt("ANP2_BENCH_RATE", 500), envInt("ANP2_BENCH_TOPICS", 1)
	if os.Getenv("ANP2_BENCH_TRIGGERS") == "0" {
		trigs = 0
	}
	if os.Getenv("ANP2_BENCH_SUBSCRIBERS") == "0" {
		subs = 0
	}
	b.Logf("machine: %d CPUs, GOMAXPROCS %d, load average %s", runtime.NumCPU(), runtime.GOMAXPROCS(0), loadavg())
	n := b.N
	agents := taskstest.Pool(16)
	sign := func(tag string) []*protocol.Event {
		evs := make([]*protocol.Event, n)
		for i := range evs {
			evs[i] = agents[i%len(agents)].Sign(protocol.KindPost, relaytest.VectorTime-int64(i%50), tag+strconv.Itoa(i),
				[]string{"t", "topic" + strconv.Itoa(i%topics)})
		}
		return evs
	}
	idle, loaded := sign("A"), sign("B")
	wm := ws.NewModule(ws.Options{})
	dm := delivery.NewModule(delivery.Options{AllowPrivate: true, MaxTriggersPerOwner: max(trigs, 1)})
	r := relaytest.Start(b, []relay.Module{wm, dm}, func(c *relay.Config) {
		c.MaxStreamsPerIP, c.MaxSubscribers, c.RelayKey = -1, subs+10, relayKey
	})
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost, tr.MaxConnsPerHost = 64, 64
	cl := &client.Client{Base: r.URL, HTTP: &http.Client{Transport: tr, Timeout: time.Minute}}
	b.ResetTimer()

	// Phase 1: nobody listens.
	base := &pushRun{tag: "A", start: make([]atomic.Int64, n)}
	pubIdle, rateIdle := publishPaced(b, cl, idle, base, rate)

	// Phase 2: the listeners.
	run := &pushRun{tag: "B", start: make([]atomic.Int64, n)}
	rc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		if i := run.index(body); i >= 0 {
			d := run.since(i, time.Now())
			run.mu.Lock()
			run.hooks = append(run.hooks, d)
			run.mu.Unlock()
		}
	}))
	defer rc.Close()
	owner := taskstest.Pool(1)[0]
	for i := range trigs {
		body := `{"match":{"kinds":[1],"tags":{"t":["topic` + strconv.Itoa(i%topics) + `"]}},"target":{"type":"webhook","url":"` + rc.URL + `"}}`
		if a := r.Do(b, "POST", "/triggers", "application/json", []byte(body), "Authorization", r.Auth(owner.Key, "POST", "/triggers", relaytest.VectorTime)); a.Status != 201 {
			b.Fatalf("trigger: %d %s", a.Status, a.Body)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	url := "ws" + strings.TrimPrefix(r.URL, "http") + "/ws"
	ready := make(chan struct{}, subs)
	var wsGot atomic.Int64
	var readers sync.WaitGroup
	var conns []*websocket.Conn
	for i := range subs {
		c, _, err := websocket.Dial(ctx, url, nil)
		if err != nil {
			b.Fatal(err)
		}
		c.SetReadLimit(1 << 20)
		req := `["REQ","s",{"kinds":[1],"#t":["topic` + strconv.Itoa(i%topics) + `"],"limit":1}]`
		if err := c.Write(ctx, websocket.MessageText, []byte(req)); err != nil {
			b.Fatal(err)
		}
		conns = append(conns, c)
		readers.Add(1)
		go func() {
			defer readers.Done()
			defer c.CloseNow()
			var got []time.Duration
			defer func() {
				run.mu.Lock()
				run.ws = append(run.ws, got...)
				run.mu.Unlock()
			}()
			var buf bytes.Buffer
			for {
				// No context to watch per read (that costs the load
				// generator a timer each): CloseNow below ends it.
				_, rd, err := c.Reader(context.Background())
				if err != nil {
					return
				}
				buf.Reset()
				if _, err := buf.ReadFrom(rd); err != nil {
					return
				}
				frame := buf.Bytes()
				if bytes.HasPrefix(frame, []byte(`["EOSE"`)) {
					ready <- struct{}{}
					continue
				}
				if i := run.index(frame); i >= 0 {
					got = append(got, run.since(i, time.Now()))
					wsGot.Add(1)
				}
			}
		}()
	}
	for range subs {
		<-ready
	}
	wantWS, wantHooks := 0, 0
	for j := range n {
		for i := range max(subs, trigs) {
			if i%topics == j%topics {
				if i < subs {
					wantWS++
				}
				if i < trigs {
					wantHooks++
				}
			}
		}
	}
	pubLoaded, rateLoaded := publishPaced(b, cl, loaded, run, rate)
	hooksGot := func() int { run.mu.Lock(); defer run.mu.Unlock(); return len(run.hooks) }
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline) && (int(wsGot.Load()) < wantWS || hooksGot() < wantHooks); {
		time.Sleep(10 * time.Millisecond)
	}
	b.StopTimer()
	cancel()
	for _, c := range conns {
		c.CloseNow()
	}
	readers.Wait()
	st := wm.Stats()
	b.ReportMetric(rateIdle, "pub/s_idle")
	b.ReportMetric(rateLoaded, "pub/s_loaded")
	b.ReportMetric(pct(run.ws, 0.99), "ws_p99_ms")
	b.ReportMetric(pct(run.hooks, 0.99), "hook_p99_ms")
	b.Logf("%d events at %d/s, %d topics; %d WS subscribers, %d webhook triggers; load average after %s", n, rate, topics, subs, trigs, loadavg())
	b.Logf("publish rate: %.0f/s with nobody listening, %.0f/s with the listeners (publish p50/p99 %.1f/%.1f ms idle, %.1f/%.1f ms loaded)",
		rateIdle, rateLoaded, pct(pubIdle, 0.5), pct(pubIdle, 0.99), pct(pubLoaded, 0.5), pct(pubLoaded, 0.99))
	b.Logf("WebSocket: %d/%d frames, publish-to-receipt p50 %.1f ms p99 %.1f ms; %d subscriptions dropped as too slow",
		len(run.ws), wantWS, pct(run.ws, 0.5), pct(run.ws, 0.99), st.Dropped)
	b.Logf("webhooks: %d/%d deliveries, publish-to-receipt p50 %.1f ms p99 %.1f ms",
		len(run.hooks), wantHooks, pct(run.hooks, 0.5), pct(run.hooks, 0.99))
}
