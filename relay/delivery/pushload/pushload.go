// Package pushload is the load generator of SPEC §16's push target: real
// WebSocket clients (coder/websocket) with a REQ each, webhook triggers
// to a real receiver on loopback, and pre-signed events published at a
// fixed rate, with the publish rate measured first with nobody listening
// and then with the listeners, in the same run. BenchmarkPush (in
// process) and `anp2 bench --push` (against an anp2 serve process of its
// own) both drive it.
package pushload

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anp2net/relay/client"
	"github.com/anp2net/relay/protocol"
	"github.com/coder/websocket"
)

// Options say what load to put on the relay at Base.
type Options struct {
	Base        string
	Subscribers int // WebSocket connections, one REQ each
	Triggers    int // webhook triggers (50 per owning agent)
	Rate        int // events published per second
	Events      int // events per phase
	// Topics: subscriber and trigger i listen to topic i mod Topics, event
	// j carries topic j mod Topics (1: every event goes to everyone).
	Topics int
	// Now is the relay's clock (events and D4 headers are dated by it).
	Now func() time.Time
	// Progress, when set, is told how far each phase is.
	Progress func(phase string, done, total int)
	// RelayCPU, when set, reads the relay's CPU time.
	RelayCPU func() time.Duration
	// RelayWrites, when set, reads the bytes the relay has written to
	// storage (its files and their fsyncs: the log's and the queue's).
	RelayWrites func() int64
	// SelfCPU and MachineCPU, when set, read the load generator's CPU
	// time and the whole machine's (busy, and busy plus idle, over all
	// cores), so the relay's share of the loaded phase is told apart
	// from the generator's and from other work on the machine.
	SelfCPU    func() time.Duration
	MachineCPU func() (busy, all time.Duration)
}

// Result is what one run measured.
type Result struct {
	Opts                 Options
	RateIdle, RateLoaded float64
	PubIdle, PubLoaded   []time.Duration
	WS, Hooks            []time.Duration
	// WSEvent and HookEvent name the event of each receipt in WS and
	// Hooks (its index in the loaded phase); PubStart is each loaded
	// publish's start, as an offset from the phase's start.
	WSEvent, HookEvent         []int32
	PubStart                   []time.Duration
	PubT0                      time.Time // the loaded phase's first publish's start
	WantWS, WantHooks          int
	CPUIdle, CPULoaded         time.Duration
	ElapsedIdle, ElapsedLoaded time.Duration
	// WritesIdle and WritesLoaded are the relay's storage writes over
	// each phase, in bytes (0 when not measured).
	WritesIdle, WritesLoaded int64
	// Over the loaded phase: the generator's CPU, and the machine's busy
	// and total CPU time (0 when not measured).
	SelfLoaded, MachineBusy, MachineAll time.Duration
}

// phase is one paced publishing run and what the receivers saw of it.
type phase struct {
	tag   string
	start []atomic.Int64 // UnixNano each publish began
	mu    sync.Mutex
	ws    []time.Duration
	hooks []time.Duration
	// wsEv and hookEv are the events of ws and hooks, one each.
	wsEv, hookEv []int32
	wsN          atomic.Int64
}

// index returns n of the content "<tag><n>" found in a frame or body, or
// -1. Receivers only scan for it, so the generator's own cost stays small
// beside the relay's.
func (p *phase) index(b []byte) int {
	key := `"content":"` + p.tag
	i := bytes.Index(b, []byte(key))
	if i < 0 {
		return -1
	}
	n, digits := 0, 0
	for _, c := range b[i+len(key):] {
		if c < '0' || c > '9' {
			break
		}
		n, digits = n*10+int(c-'0'), digits+1
	}
	if digits == 0 || n >= len(p.start) {
		return -1
	}
	return n
}

func (p *phase) since(i int) time.Duration {
	return time.Since(time.Unix(0, p.start[i].Load()))
}

// Run puts the load on the relay and measures it.
func Run(ctx context.Context, o Options) (*Result, error) {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.RelayCPU == nil {
		o.RelayCPU = func() time.Duration { return 0 }
	}
	if o.RelayWrites == nil {
		o.RelayWrites = func() int64 { return 0 }
	}
	if o.SelfCPU == nil {
		o.SelfCPU = func() time.Duration { return 0 }
	}
	if o.MachineCPU == nil {
		o.MachineCPU = func() (time.Duration, time.Duration) { return 0, 0 }
	}
	if o.Progress == nil {
		o.Progress = func(string, int, int) {}
	}
	o.Topics = max(o.Topics, 1)
	res := &Result{Opts: o}
	keys := make([]ed25519.PrivateKey, 16)
	for i := range keys {
		seed := make([]byte, 32)
		seed[0], seed[1] = byte(i), 0x9b
		keys[i] = ed25519.NewKeyFromSeed(seed)
	}
	now := o.Now().Unix()
	sign := func(tag string) []*protocol.Event {
		evs := make([]*protocol.Event, o.Events)
		for i := range evs {
			o.Progress("signing "+tag, i, o.Events)
			e := &protocol.Event{CreatedAt: now - int64(i%50), Kind: protocol.KindPost, Content: tag + strconv.Itoa(i),
				Tags: [][]string{{"t", "topic" + strconv.Itoa(i%o.Topics)}}}
			e.Sign(keys[i%len(keys)])
			evs[i] = e
		}
		return evs
	}
	idle, loaded := sign("A"), sign("B")
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost, tr.MaxConnsPerHost = 64, 64
	cl := &client.Client{Base: o.Base, HTTP: &http.Client{Transport: tr, Timeout: time.Minute}}

	a := &phase{tag: "A", start: make([]atomic.Int64, o.Events)}
	cpu0, t0, w0 := o.RelayCPU(), time.Now(), o.RelayWrites()
	res.PubIdle, res.RateIdle = publish(ctx, cl, idle, a, o)
	res.CPUIdle, res.ElapsedIdle = o.RelayCPU()-cpu0, time.Since(t0)
	res.WritesIdle = o.RelayWrites() - w0

	b := &phase{tag: "B", start: make([]atomic.Int64, o.Events)}
	stopHook, hookURL, err := receiver(b)
	if err != nil {
		return nil, err
	}
	defer stopHook()
	if err := triggers(ctx, o, hookURL); err != nil {
		return nil, err
	}
	conns, wait, err := subscribe(ctx, o, b)
	defer func() {
		for _, c := range conns {
			c.CloseNow()
		}
		wait()
	}()
	if err != nil {
		return nil, err
	}
	for j := range o.Events {
		for i := range max(o.Subscribers, o.Triggers) {
			if i%o.Topics == j%o.Topics {
				if i < o.Subscribers {
					res.WantWS++
				}
				if i < o.Triggers {
					res.WantHooks++
				}
			}
		}
	}
	cpu0, t0, w0 = o.RelayCPU(), time.Now(), o.RelayWrites()
	self0 := o.SelfCPU()
	busy0, all0 := o.MachineCPU()
	res.PubLoaded, res.RateLoaded = publish(ctx, cl, loaded, b, o)
	hooks := func() int { b.mu.Lock(); defer b.mu.Unlock(); return len(b.hooks) }
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline) && (int(b.wsN.Load()) < res.WantWS || hooks() < res.WantHooks); {
		o.Progress("waiting for deliveries", int(b.wsN.Load())+hooks(), res.WantWS+res.WantHooks)
		time.Sleep(20 * time.Millisecond)
	}
	res.CPULoaded, res.ElapsedLoaded = o.RelayCPU()-cpu0, time.Since(t0)
	res.WritesLoaded = o.RelayWrites() - w0
	res.SelfLoaded = o.SelfCPU() - self0
	busy1, all1 := o.MachineCPU()
	res.MachineBusy, res.MachineAll = busy1-busy0, all1-all0
	for _, c := range conns {
		c.CloseNow()
	}
	wait()
	conns = nil
	b.mu.Lock()
	res.WS, res.Hooks, res.WSEvent, res.HookEvent = b.ws, b.hooks, b.wsEv, b.hookEv
	b.mu.Unlock()
	res.PubT0 = time.Unix(0, b.start[0].Load())
	res.PubStart = make([]time.Duration, len(b.start))
	for i := range b.start {
		res.PubStart[i] = time.Duration(b.start[i].Load() - b.start[0].Load())
	}
	return res, nil
}

// publish publishes evs at o.Rate per second, each started on schedule
// (64 workers, so a slow answer does not slow the pace until 64 are in
// flight), and returns the publish latencies and the achieved rate
// (events over the time from the first start to the last answer).
func publish(ctx context.Context, cl *client.Client, evs []*protocol.Event, p *phase, o Options) ([]time.Duration, float64) {
	lat := make([]time.Duration, len(evs))
	work := make(chan int, len(evs))
	var wg sync.WaitGroup
	var done atomic.Int64
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				t := time.Now()
				p.start[i].Store(t.UnixNano())
				if _, err := cl.Publish(ctx, evs[i], false); err != nil {
					lat[i] = -1
					continue
				}
				lat[i] = time.Since(t)
				done.Add(1)
			}
		}()
	}
	t0 := time.Now()
	for i := range evs {
		if wait := time.Until(t0.Add(time.Duration(i) * time.Second / time.Duration(o.Rate))); wait > 0 {
			time.Sleep(wait)
		}
		o.Progress("publishing "+p.tag, int(done.Load()), len(evs))
		work <- i
	}
	close(work)
	wg.Wait()
	return lat, float64(done.Load()) / time.Since(t0).Seconds()
}

// receiver is the webhook receiver: it records each delivery's
// publish-to-receipt time.
func receiver(p *phase) (func(), string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", err
	}
	// It does the least it can (the relay shares the machine with it): a
	// pooled buffer, a byte scan for the content tag, one append.
	bufs := sync.Pool{New: func() any { return new(bytes.Buffer) }}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		buf := bufs.Get().(*bytes.Buffer)
		defer bufs.Put(buf)
		buf.Reset()
		_, _ = buf.ReadFrom(r.Body)
		if i := p.index(buf.Bytes()); i >= 0 {
			d := p.since(i)
			p.mu.Lock()
			p.hooks = append(p.hooks, d)
			p.hookEv = append(p.hookEv, int32(i))
			p.mu.Unlock()
		}
	})}
	go srv.Serve(ln)
	return func() { srv.Close() }, "http://" + ln.Addr().String() + "/hook", nil
}

// triggers registers o.Triggers webhook triggers, 50 per owner.
func triggers(ctx context.Context, o Options, hook string) error {
	var key ed25519.PrivateKey
	for i := range o.Triggers {
		if i%50 == 0 {
			seed := make([]byte, 32)
			seed[0], seed[1], seed[2] = byte(i/50), byte(i/50>>8), 0x7e
			key = ed25519.NewKeyFromSeed(seed)
		}
		o.Progress("registering triggers", i, o.Triggers)
		body := []byte(`{"match":{"kinds":[1],"tags":{"t":["topic` + strconv.Itoa(i%o.Topics) + `"]}},"target":{"type":"webhook","url":"` + hook + `"}}`)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, o.Base+"/triggers", bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", protocol.HTTPAuth(key, http.MethodPost, req.URL.String(), body, o.Now().Unix()))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return fmt.Errorf("trigger %d: %w", i, err)
		}
		ans, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			return fmt.Errorf("trigger %d: %d %s", i, resp.StatusCode, ans)
		}
	}
	return nil
}

// subscribe opens the WebSocket clients, each with one REQ, and waits
// for their EOSE. Against a loopback relay they connect from 127.0.0.2
// upwards, 50 per address, as that many hosts would (a relay caps the
// connections of one address).
func subscribe(ctx context.Context, o Options, p *phase) ([]*websocket.Conn, func(), error) {
	u, err := url.Parse(o.Base)
	if err != nil {
		return nil, func() {}, err
	}
	loop := net.ParseIP(u.Hostname()).IsLoopback()
	wsURL := "ws" + strings.TrimPrefix(o.Base, "http") + "/ws"
	ready := make(chan struct{}, o.Subscribers)
	var wg sync.WaitGroup
	var conns []*websocket.Conn
	for i := range o.Subscribers {
		o.Progress("connecting WebSocket clients", i, o.Subscribers)
		d := &net.Dialer{Timeout: 10 * time.Second}
		if loop {
			d.LocalAddr = &net.TCPAddr{IP: net.IPv4(127, 0, byte(i/50/250), byte(2+i/50%250))}
		}
		hc := &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
		c, _, err := websocket.Dial(ctx, wsURL, &websocket.DialOptions{HTTPClient: hc})
		if err != nil {
			return conns, wg.Wait, fmt.Errorf("websocket %d: %w", i, err)
		}
		conns = append(conns, c)
		c.SetReadLimit(1 << 20)
		req := `["REQ","s",{"kinds":[1],"#t":["topic` + strconv.Itoa(i%o.Topics) + `"],"limit":1}]`
		if err := c.Write(ctx, websocket.MessageText, []byte(req)); err != nil {
			return conns, wg.Wait, err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			var got []time.Duration
			var evs []int32
			defer func() {
				p.mu.Lock()
				p.ws = append(p.ws, got...)
				p.wsEv = append(p.wsEv, evs...)
				p.mu.Unlock()
			}()
			var buf bytes.Buffer
			for {
				// No context per read (it costs the generator a timer
				// each): closing the connection ends the loop.
				_, rd, err := c.Reader(context.Background())
				if err != nil {
					return
				}
				buf.Reset()
				if _, err := buf.ReadFrom(rd); err != nil {
					return
				}
				if bytes.HasPrefix(buf.Bytes(), []byte(`["EOSE"`)) {
					ready <- struct{}{}
				} else if i := p.index(buf.Bytes()); i >= 0 {
					got = append(got, p.since(i))
					evs = append(evs, int32(i))
					p.wsN.Add(1)
				}
			}
		}()
	}
	for i := range o.Subscribers {
		o.Progress("waiting for EOSE", i, o.Subscribers)
		select {
		case <-ready:
		case <-ctx.Done():
			return conns, wg.Wait, ctx.Err()
		}
	}
	return conns, wg.Wait, nil
}

// Pct returns the q quantile of ds in milliseconds (ds is left as it is).
func Pct(ds []time.Duration, q float64) float64 {
	if len(ds) == 0 {
		return 0
	}
	ds = slices.Clone(ds)
	slices.Sort(ds)
	return float64(ds[min(len(ds)-1, int(q*float64(len(ds))))].Microseconds()) / 1000
}

// ok drops the failed publishes (-1) from lat.
func ok(lat []time.Duration) []time.Duration {
	out := make([]time.Duration, 0, len(lat))
	for _, d := range lat {
		if d >= 0 {
			out = append(out, d)
		}
	}
	return out
}

// Print writes the figures, the two publish rates side by side.
func (r *Result) Print(w io.Writer) {
	o := r.Opts
	pi, pl := ok(r.PubIdle), ok(r.PubLoaded)
	fmt.Fprintf(w, "push: %d events per phase at %d/s, %d topic(s); %d WebSocket subscribers, %d webhook triggers\n",
		o.Events, o.Rate, o.Topics, o.Subscribers, o.Triggers)
	fmt.Fprintf(w, "  publish rate: %.0f/s with nobody listening | %.0f/s with the listeners\n", r.RateIdle, r.RateLoaded)
	fmt.Fprintf(w, "  publish latency p50/p99: %.1f/%.1f ms | %.1f/%.1f ms; failed %d | %d\n",
		Pct(pi, .5), Pct(pi, .99), Pct(pl, .5), Pct(pl, .99), len(r.PubIdle)-len(pi), len(r.PubLoaded)-len(pl))
	if r.CPUIdle > 0 || r.CPULoaded > 0 {
		fmt.Fprintf(w, "  relay CPU: %.2f cores | %.2f cores; %.1f µs per event published | %.1f µs per event published and %.2f µs per frame or delivery\n",
			r.CPUIdle.Seconds()/r.ElapsedIdle.Seconds(), r.CPULoaded.Seconds()/r.ElapsedLoaded.Seconds(),
			float64(r.CPUIdle.Microseconds())/float64(o.Events), float64(r.CPULoaded.Microseconds())/float64(o.Events),
			float64(r.CPULoaded.Microseconds()-r.CPUIdle.Microseconds())/float64(max(1, len(r.WS)+len(r.Hooks))))
	}
	if r.WritesIdle > 0 || r.WritesLoaded > 0 {
		fmt.Fprintf(w, "  relay storage writes: %.1f KiB | %.1f KiB per event published\n",
			float64(r.WritesIdle)/1024/float64(o.Events), float64(r.WritesLoaded)/1024/float64(o.Events))
	}
	if r.MachineAll > 0 {
		el := r.ElapsedLoaded.Seconds()
		cores := float64(r.MachineAll) / float64(r.ElapsedLoaded) // the machine's cores
		relay, gen, busy := r.CPULoaded.Seconds()/el, r.SelfLoaded.Seconds()/el, r.MachineBusy.Seconds()/el
		fmt.Fprintf(w, "  CPU over the loaded phase: relay %.2f cores, load generator %.2f, everything else on the machine %.2f; machine busy %.2f of %.0f cores\n",
			relay, gen, max(0, busy-relay-gen), busy, cores)
	}
	fmt.Fprintf(w, "  WebSocket: %d/%d frames, publish-to-receipt p50 %.1f ms, p99 %.1f ms\n", len(r.WS), r.WantWS, Pct(r.WS, .5), Pct(r.WS, .99))
	fmt.Fprintf(w, "  webhooks:  %d/%d deliveries, publish-to-receipt p50 %.1f ms, p99 %.1f ms\n", len(r.Hooks), r.WantHooks, Pct(r.Hooks, .5), Pct(r.Hooks, .99))
	ws, hooks := r.afterAnswer(r.WS, r.WSEvent), r.afterAnswer(r.Hooks, r.HookEvent)
	fmt.Fprintf(w, "  receipt after the publish's own answer (negative: before it): WebSocket p50 %.1f ms, p99 %.1f ms; webhooks p50 %.1f ms, p99 %.1f ms\n",
		Pct(ws, .5), Pct(ws, .99), Pct(hooks, .5), Pct(hooks, .99))
}

// afterAnswer returns, for each receipt of ds (of the events evs), its
// time after its publish's answer: what the delivery path added beyond
// the publish path's own latency.
func (r *Result) afterAnswer(ds []time.Duration, evs []int32) []time.Duration {
	out := make([]time.Duration, 0, len(ds))
	for k, d := range ds {
		if k < len(evs) && int(evs[k]) < len(r.PubLoaded) && r.PubLoaded[evs[k]] >= 0 {
			out = append(out, d-r.PubLoaded[evs[k]])
		}
	}
	return out
}

// WriteTrace writes one line per receipt of the loaded phase: the
// channel (ws or hook), the event's index, its publish's start after the
// phase's (ms), its publish latency (ms, -1: failed) and the
// publish-to-receipt time (ms), to tell a stall (receipts late together)
// from a slow publish (late receipts of slow publishes) from the
// delivery path's own delay.
func (r *Result) WriteTrace(w io.Writer) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "# loaded phase's first publish at %d (unix ns)\n", r.PubT0.UnixNano())
	fmt.Fprintln(bw, "channel event start_ms publish_ms receipt_ms")
	for _, ch := range []struct {
		name string
		ds   []time.Duration
		evs  []int32
	}{{"ws", r.WS, r.WSEvent}, {"hook", r.Hooks, r.HookEvent}} {
		for k, d := range ch.ds {
			if k >= len(ch.evs) {
				break
			}
			i := ch.evs[k]
			pub := -1.0
			if r.PubLoaded[i] >= 0 {
				pub = ms(r.PubLoaded[i])
			}
			fmt.Fprintf(bw, "%s %d %.3f %.3f %.3f\n", ch.name, i, ms(r.PubStart[i]), pub, ms(d))
		}
	}
	return bw.Flush()
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
