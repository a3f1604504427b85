package delivery_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/anp2net/relay/relay"
	"github.com/anp2net/relay/relay/delivery"
	"github.com/anp2net/relay/relay/delivery/pushload"
	"github.com/anp2net/relay/relay/relaytest"
	"github.com/anp2net/relay/relay/ws"
)

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n >= 0 {
		return n
	}
	return def
}

func loadavg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "?"
}

// BenchmarkPush is SPEC §16's target, in process: ANP2_BENCH_SUBSCRIBERS
// (default 1000) WebSocket clients with one REQ each and
// ANP2_BENCH_TRIGGERS (default 1000) webhook triggers to a loopback
// receiver on one relay (a real SQLite log on loopback HTTP), b.N
// pre-signed events published at ANP2_BENCH_RATE per second (default 500)
// with nobody listening and then with the listeners; ANP2_BENCH_TOPICS
// (default 1000: each event goes to one subscriber and one trigger; 1:
// every event to everyone) spreads them (see pushload.Options). The load
// generator shares the relay's process and scheduler here; `anp2 bench
// --push` runs the relay in a process of its own.
func BenchmarkPush(b *testing.B) {
	o := pushload.Options{
		Subscribers: envInt("ANP2_BENCH_SUBSCRIBERS", 1000), Triggers: envInt("ANP2_BENCH_TRIGGERS", 1000),
		Rate: max(1, envInt("ANP2_BENCH_RATE", 500)), Topics: max(1, envInt("ANP2_BENCH_TOPICS", 1000)), Events: b.N,
	}
	wm := ws.NewModule(ws.Options{})
	dm := delivery.NewModule(delivery.Options{AllowPrivate: true})
	r := relaytest.Start(b, []relay.Module{wm, dm}, func(c *relay.Config) {
		c.MaxSubscribers, c.RelayKey = o.Subscribers+10, relayKey
	})
	o.Base, o.Now = r.URL, r.Clock.Now
	before := loadavg()
	b.ResetTimer()
	res, err := pushload.Run(context.Background(), o)
	if err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	// On stdout: go test keeps only the first lines of a benchmark's log.
	fmt.Printf("machine: %d CPUs, GOMAXPROCS %d, load average %s before, %s after; %d WebSocket subscriptions dropped as too slow\n",
		runtime.NumCPU(), runtime.GOMAXPROCS(0), before, loadavg(), wm.Stats().Dropped)
	res.Print(os.Stdout)
	b.ReportMetric(res.RateIdle, "pub/s_idle")
	b.ReportMetric(res.RateLoaded, "pub/s_loaded")
	b.ReportMetric(pushload.Pct(res.WS, .99), "ws_p99_ms")
	b.ReportMetric(pushload.Pct(res.Hooks, .99), "hook_p99_ms")
}

// TestPushLoadSmall runs the load generator small (5 subscribers, 6
// triggers over 3 topics, 30 events), so BenchmarkPush's counting is
// checked: every frame and delivery the topics call for arrives, none
// more, and the publishes all succeed.
func TestPushLoadSmall(t *testing.T) {
	wm := ws.NewModule(ws.Options{})
	dm := delivery.NewModule(delivery.Options{AllowPrivate: true, Poll: 10 * time.Millisecond})
	r := relaytest.Start(t, []relay.Module{wm, dm}, func(c *relay.Config) { c.RelayKey = relayKey })
	res, err := pushload.Run(context.Background(), pushload.Options{Base: r.URL, Now: r.Clock.Now,
		Subscribers: 5, Triggers: 6, Rate: 300, Events: 30, Topics: 3})
	if err != nil {
		t.Fatal(err)
	}
	// Event j goes to the subscribers i ≡ j (mod 3): 2, 2, 1 of them for
	// j mod 3 = 0, 1, 2, and to 2 triggers each.
	if res.WantWS != 50 || res.WantHooks != 60 || len(res.WS) != res.WantWS || len(res.Hooks) != res.WantHooks {
		t.Fatalf("want %d frames and %d deliveries, got %d and %d", res.WantWS, res.WantHooks, len(res.WS), len(res.Hooks))
	}
	for _, d := range append(res.PubIdle, res.PubLoaded...) {
		if d < 0 {
			t.Fatal("a publish failed")
		}
	}
}
