package delivery_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
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

// latencies collects publish-to-receipt times.
type latencies struct {
	mu    sync.Mutex
	start []time.Time
	got   []time.Duration
}

func (l *latencies) add(content string) {
	i, err := strconv.Atoi(content)
	if err != nil || i < 0 || i >= len(l.start) {
		return
	}
	d := time.Since(l.start[i])
	l.mu.Lock()
	l.got = append(l.got, d)
	l.mu.Unlock()
}

func (l *latencies) count() int { l.mu.Lock(); defer l.mu.Unlock(); return len(l.got) }

func pct(ds []time.Duration, p float64) float64 {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return float64(ds[min(len(ds)-1, int(p*float64(len(ds))))].Microseconds()) / 1000
}

// publishPaced publishes n kind 1 events at rate per second from 8
// clients, recording each event's start time; it returns the publish
// latencies and the achieved rate.
func publishPaced(b *testing.B, base string, l *latencies, n, rate int) ([]time.Duration, float64) {
	agents := taskstest.Pool(8)
	cl := client.New(base)
	l.start = make([]time.Time, n)
	pubs := make([]time.Duration, n)
	var wg sync.WaitGroup
	work := make(chan int, n)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				e := agents[w].Sign(protocol.KindPost, relaytest.VectorTime-int64(i%50), strconv.Itoa(i))
				l.mu.Lock()
				l.start[i] = time.Now()
				l.mu.Unlock()
				if _, err := cl.Publish(context.Background(), e, false); err != nil {
					b.Error(err)
				}
				pubs[i] = time.Since(l.start[i])
			}
		}()
	}
	t0 := time.Now()
	for i := range n {
		if wait := time.Until(t0.Add(time.Duration(i) * time.Second / time.Duration(rate))); wait > 0 {
			time.Sleep(wait)
		}
		work <- i
	}
	close(work)
	wg.Wait()
	return pubs, float64(n) / time.Since(t0).Seconds()
}

func waitAll(b *testing.B, l *latencies, want int) {
	deadline := time.Now().Add(2 * time.Minute)
	for l.count() < want && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
}

func report(b *testing.B, what string, l *latencies, want int, pubs []time.Duration, rate float64) {
	l.mu.Lock()
	got := append([]time.Duration(nil), l.got...)
	l.mu.Unlock()
	b.ReportMetric(pct(got, 0.50), "p50_ms")
	b.ReportMetric(pct(got, 0.99), "p99_ms")
	b.ReportMetric(float64(want-len(got)), "missing")
	b.ReportMetric(rate, "published/s")
	b.ReportMetric(pct(pubs, 0.99), "publish_p99_ms")
	b.Logf("%s: %d/%d received, publish-to-receipt p50 %.1f ms p99 %.1f ms; publish rate %.0f/s, publish p99 %.1f ms (GOMAXPROCS %d)",
		what, len(got), want, pct(got, 0.5), pct(got, 0.99), rate, pct(pubs, 0.99), runtime.GOMAXPROCS(0))
}

// BenchmarkPushWebSocket: ANP2_BENCH_SUBSCRIBERS (default 1000) WebSocket
// subscribers of kind 1 on one relay, b.N events published at
// ANP2_BENCH_RATE per second (default 500). The clients run in the same
// process and share its cores with the relay.
func BenchmarkPushWebSocket(b *testing.B) {
	subs, rate := envInt("ANP2_BENCH_SUBSCRIBERS", 1000), envInt("ANP2_BENCH_RATE", 500)
	r := relaytest.Start(b, []relay.Module{ws.NewModule(ws.Options{Buffer: 1 << 16})}, func(c *relay.Config) {
		c.MaxStreamsPerIP, c.MaxSubscribers = -1, subs+10
	})
	l := &latencies{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	url := "ws" + strings.TrimPrefix(r.URL, "http") + "/ws"
	ready := make(chan struct{}, subs)
	for range subs {
		c, _, err := websocket.Dial(ctx, url, nil)
		if err != nil {
			b.Fatal(err)
		}
		c.SetReadLimit(1 << 20)
		go func() {
			defer c.CloseNow()
			_ = c.Write(ctx, websocket.MessageText, []byte(`["REQ","s",{"kinds":[1]}]`))
			for {
				_, msg, err := c.Read(ctx)
				if err != nil {
					return
				}
				var f []json.RawMessage
				if json.Unmarshal(msg, &f) != nil || len(f) < 3 {
					if len(f) == 3 && string(f[0]) == `"EOSE"` {
						ready <- struct{}{}
					}
					continue
				}
				if string(f[0]) == `"EOSE"` {
					ready <- struct{}{}
					continue
				}
				var e struct{ Content string }
				_ = json.Unmarshal(f[2], &e)
				l.add(e.Content)
			}
		}()
	}
	for range subs {
		<-ready
	}
	b.ResetTimer()
	pubs, achieved := publishPaced(b, r.URL, l, b.N, rate)
	waitAll(b, l, subs*b.N)
	b.StopTimer()
	report(b, fmt.Sprintf("%d WebSocket subscribers", subs), l, subs*b.N, pubs, achieved)
}

// BenchmarkPushWebhook: ANP2_BENCH_TRIGGERS (default 1000) webhook
// triggers on kind 1 pointing at one loopback receiver, b.N events
// published at ANP2_BENCH_RATE per second (default 500).
func BenchmarkPushWebhook(b *testing.B) {
	trigs, rate := envInt("ANP2_BENCH_TRIGGERS", 1000), envInt("ANP2_BENCH_RATE", 500)
	l := &latencies{}
	rc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var p delivery.Payload
		var e struct{ Content string }
		_ = json.Unmarshal(body, &p)
		_ = json.Unmarshal(p.Event, &e)
		l.add(e.Content)
	}))
	defer rc.Close()
	m := delivery.NewModule(delivery.Options{AllowPrivate: true, Poll: 20 * time.Millisecond, Workers: 64, MaxTriggersPerOwner: trigs})
	r := relaytest.Start(b, []relay.Module{m}, func(c *relay.Config) { c.RelayKey = relayKey })
	owner := taskstest.Pool(1)[0]
	for range trigs {
		body := `{"match":{"kinds":[1]},"target":{"type":"webhook","url":"` + rc.URL + `"}}`
		if a := r.Do(b, "POST", "/triggers", "application/json", []byte(body), "Authorization", r.Auth(owner.Key, "POST", "/triggers", relaytest.VectorTime)); a.Status != 201 {
			b.Fatalf("trigger: %d %s", a.Status, a.Body)
		}
	}
	b.ResetTimer()
	pubs, achieved := publishPaced(b, r.URL, l, b.N, rate)
	waitAll(b, l, trigs*b.N)
	b.StopTimer()
	report(b, fmt.Sprintf("%d webhook triggers", trigs), l, trigs*b.N, pubs, achieved)
}
