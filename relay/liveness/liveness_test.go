package liveness

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/anp2net/relay/protocol"
)

// now is a fixed query time on a bucket boundary (2026-05-18 00:00:00 UTC).
const now = 1779062400

var (
	keyMu sync.Mutex
	keys  = map[string]ed25519.PrivateKey{}
)

// key returns the deterministic Ed25519 key of a named test agent.
func key(name string) ed25519.PrivateKey {
	keyMu.Lock()
	defer keyMu.Unlock()
	k, ok := keys[name]
	if !ok {
		seed := sha256.Sum256([]byte("liveness-test/" + name))
		k = ed25519.NewKeyFromSeed(seed[:])
		keys[name] = k
	}
	return k
}

func agentID(name string) string { return protocol.AgentIDOf(key(name)) }

// signedBeat returns a kind 11 by name created at createdAt with content.
func signedBeat(name string, createdAt int64, content string) *protocol.Event {
	e := &protocol.Event{CreatedAt: createdAt, Kind: protocol.KindHealth, Tags: [][]string{}, Content: content}
	e.Sign(key(name))
	return e
}

// unsigned returns a kind 11 with a synthetic id: the fold never checks
// signatures, and the larger tests would spend their time signing.
func unsigned(agent string, createdAt int64, content string) *protocol.Event {
	sum := sha256.Sum256(fmt.Appendf(nil, "%s/%d/%s", agent, createdAt, content))
	return &protocol.Event{ID: hex.EncodeToString(sum[:]), AgentID: agent, Kind: protocol.KindHealth, CreatedAt: createdAt, Content: content}
}

// okBeat returns meta.health.v1 content with status ok and a latency.
func okBeat(latency int) string { return fmt.Sprintf(`{"status":"ok","latency_ms":%d}`, latency) }

// received is a beat and the time the relay received it.
type received struct {
	ev *protocol.Event
	at int64
}

// every returns beats by name every step seconds in (from, to], each
// received when created, with content c.
func every(name string, from, to, step int64, c string) []received {
	var out []received
	for t := to; t > from; t -= step {
		out = append(out, received{signedBeat(name, t, c), t})
	}
	slices.Reverse(out)
	return out
}

func one(name string, createdAt, receivedAt int64, content string) []received {
	return []received{{signedBeat(name, createdAt, content), receivedAt}}
}

func feed(f *Fold, rs ...[]received) {
	for _, r := range rs {
		for _, b := range r {
			f.Add(b.ev, b.at)
		}
	}
}

func i64(v int64) *int64     { return &v }
func f64(v float64) *float64 { return &v }
func cat(rs ...[]received) []received {
	var out []received
	for _, r := range rs {
		out = append(out, r...)
	}
	return out
}

func TestAgentHealth(t *testing.T) {
	latencies := func() []received {
		var out []received
		for i := 1; i <= 20; i++ { // latencies 1..20 ms, one beat a minute
			at := now - int64(20-i)*60
			out = append(out, one("a", at, at, okBeat(i))...)
		}
		return out
	}
	cases := []struct {
		name  string
		beats []received
		want  Health
	}{
		{"one ok beat a minute ago", one("a", now-60, now-60, okBeat(180)),
			Health{LastSeenAt: i64(now - 60), IsHealthy: true, Uptime24hPct: 0.35, Uptime7dPct: 0.05, Beats24h: 1,
				P50LatencyMs: f64(180), P95LatencyMs: f64(180)}},
		{"latest beat exactly 5 minutes old", one("a", now-300, now-300, okBeat(5)),
			Health{LastSeenAt: i64(now - 300), Uptime24hPct: 0.35, Uptime7dPct: 0.05, Beats24h: 1,
				P50LatencyMs: f64(5), P95LatencyMs: f64(5)}},
		{"latest beat degraded, earlier ok", cat(one("a", now-200, now-200, okBeat(1)), one("a", now-100, now-100, `{"status":"degraded"}`)),
			Health{LastSeenAt: i64(now - 100), Uptime24hPct: 0.35, Uptime7dPct: 0.05, Beats24h: 2,
				P50LatencyMs: f64(1), P95LatencyMs: f64(1)}},
		{"malformed content counts as a beat without status", one("a", now-10, now-10, `not json`),
			Health{LastSeenAt: i64(now - 10), Uptime24hPct: 0.35, Uptime7dPct: 0.05, Beats24h: 1}},
		{"nearest-rank percentiles", latencies(),
			Health{LastSeenAt: i64(now), IsHealthy: true, Uptime24hPct: 1.39, Uptime7dPct: 0.2, Beats24h: 20,
				P50LatencyMs: f64(10), P95LatencyMs: f64(19)}},
		{"every 5 minutes for a day", every("a", now-86400, now, 300, okBeat(7)),
			Health{LastSeenAt: i64(now), IsHealthy: true, Uptime24hPct: 100, Uptime7dPct: 14.29, Beats24h: 288,
				P50LatencyMs: f64(7), P95LatencyMs: f64(7)}},
		{"every 10 minutes for a week", every("a", now-7*86400, now, 600, okBeat(7)),
			Health{LastSeenAt: i64(now), IsHealthy: true, Uptime24hPct: 50, Uptime7dPct: 50, Beats24h: 144,
				P50LatencyMs: f64(7), P95LatencyMs: f64(7)}},
		{"beats older than 24 h only count for 7 days", one("a", now-2*86400, now-2*86400, okBeat(7)),
			Health{LastSeenAt: i64(now - 2*86400), Uptime7dPct: 0.05}},
		{"a beat delivered 10 minutes late counts at its created_at", one("a", now-600, now-10, okBeat(3)),
			Health{LastSeenAt: i64(now - 600), Uptime24hPct: 0.35, Uptime7dPct: 0.05, Beats24h: 1,
				P50LatencyMs: f64(3), P95LatencyMs: f64(3)}},
		{"a beat dated ahead counts when received", one("a", now+200, now-30, okBeat(3)),
			Health{LastSeenAt: i64(now - 30), IsHealthy: true, Uptime24hPct: 0.35, Uptime7dPct: 0.05, Beats24h: 1,
				P50LatencyMs: f64(3), P95LatencyMs: f64(3)}},
		{"beats received after now are not seen yet", cat(one("a", now-400, now-400, okBeat(1)), one("a", now+60, now+60, okBeat(2))),
			Health{LastSeenAt: i64(now - 400), Uptime24hPct: 0.35, Uptime7dPct: 0.05, Beats24h: 1,
				P50LatencyMs: f64(1), P95LatencyMs: f64(1)}},
		{"buckets are relative to now", cat(one("a", now-301, now-301, okBeat(1)), one("a", now-299, now-299, okBeat(1))),
			Health{LastSeenAt: i64(now - 299), IsHealthy: true, Uptime24hPct: 0.69, Uptime7dPct: 0.1, Beats24h: 2,
				P50LatencyMs: f64(1), P95LatencyMs: f64(1)}},
		{"other agents' beats do not count", one("b", now-60, now-60, okBeat(1)),
			Health{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := New(Options{})
			feed(f, c.beats)
			got, ok := f.Agent(agentID("a"), now)
			c.want.AgentID = agentID("a")
			c.want.StatusNotes = []string{}
			if ok != (c.want.LastSeenAt != nil) {
				t.Errorf("ok = %v", ok)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("got  %s\nwant %s", mustJSON(t, got), mustJSON(t, c.want))
			}
			sum, sok := f.Summary(agentID("a"), now)
			wantSum := Summary{AgentID: got.AgentID, IsHealthy: got.IsHealthy, Uptime24hPct: got.Uptime24hPct, LastSeenAt: got.LastSeenAt}
			if sok != ok || !reflect.DeepEqual(sum, wantSum) {
				t.Errorf("summary %s, want %s", mustJSON(t, sum), mustJSON(t, wantSum))
			}
		})
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestJSONFields pins the field names of §5.5 and the unknown-agent body.
func TestJSONFields(t *testing.T) {
	f := New(Options{})
	h, ok := f.Agent(agentID("nobody"), now)
	want := `{"agent_id":"` + agentID("nobody") + `","last_seen_at":null,"is_healthy":false,"uptime_24h_pct":0,` +
		`"uptime_7d_pct":0,"beats_24h":0,"p50_latency_ms":null,"p95_latency_ms":null,"status_notes":[]}`
	if got := mustJSON(t, h); ok || got != want {
		t.Errorf("ok %v\ngot  %s\nwant %s", ok, got, want)
	}
	s, ok := f.Summary(agentID("nobody"), now)
	want = `{"agent_id":"` + agentID("nobody") + `","is_healthy":false,"uptime_24h_pct":0,"last_seen_at":null}`
	if got := mustJSON(t, s); ok || got != want {
		t.Errorf("ok %v\ngot  %s\nwant %s", ok, got, want)
	}
}

func TestParseContent(t *testing.T) {
	nan := -1.0 // stands for NaN below
	cases := []struct {
		content string
		ok      bool
		lat     float64
	}{
		{`{"status":"ok","latency_ms":180}`, true, 180},
		{`{"status":"ok","latency_ms":12.5,"extra":[1,2]}`, true, 12.5},
		{`{"status":"ok"}`, true, nan},
		{`{"status":"OK","latency_ms":1}`, false, 1},
		{`{"Status":"ok","Latency_ms":1}`, false, nan}, // keys are exact
		{`{"status":"degraded","latency_ms":0}`, false, 0},
		{`{"status":null,"latency_ms":null}`, false, nan},
		{`{"status":1,"latency_ms":"180"}`, false, nan},
		{`{"status":"ok","latency_ms":-1}`, true, nan},
		{`{"status":"ok","latency_ms":1e400}`, true, nan},
		{`{"status":"down","status":"ok"}`, true, nan}, // the last duplicate wins, as encoding/json reads it
		{`["ok"]`, false, nan},
		{`null`, false, nan},
		{``, false, nan},
		{`{"status":"ok"} trailing`, false, nan},
	}
	for _, c := range cases {
		ok, lat := parseContent(c.content)
		if lat != lat {
			lat = nan
		}
		if ok != c.ok || lat != c.lat {
			t.Errorf("%q: got (%v, %v), want (%v, %v)", c.content, ok, lat, c.ok, c.lat)
		}
	}
}

func TestAddIgnoresOtherKindsAndDuplicates(t *testing.T) {
	f := New(Options{})
	post := &protocol.Event{CreatedAt: now, Kind: protocol.KindPost, Content: "hi", Tags: [][]string{}}
	post.Sign(key("a"))
	if f.Add(post, now) {
		t.Error("kind 1 kept")
	}
	b := signedBeat("a", now-30, okBeat(1))
	if !f.Add(b, now-30) {
		t.Fatal("beat refused")
	}
	if f.Add(b, now) { // a replay, even received later
		t.Error("duplicate kept")
	}
	if h, _ := f.Agent(agentID("a"), now); h.Beats24h != 1 {
		t.Errorf("beats_24h %d", h.Beats24h)
	}
	if a, n := f.Stats(); a != 1 || n != 1 {
		t.Errorf("stats %d agents %d beats", a, n)
	}
}

// TestOrderIndependence feeds the same received beats in several orders
// and requires the same answers at several times.
func TestOrderIndependence(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	contents := []string{okBeat(100), okBeat(250), `{"status":"degraded","latency_ms":900}`, `{}`, okBeat(40)}
	var beats []received
	for i := range 300 {
		name := []string{"a", "b", "c"}[r.IntN(3)]
		created := now - int64(r.IntN(3*86400))
		recv := created + int64(r.IntN(40))
		if i%10 == 0 {
			recv = created - 100 // dated ahead
		}
		beats = append(beats, one(name, created, recv, contents[r.IntN(len(contents))])...)
	}
	beats = append(beats, beats[5], beats[17]) // duplicates
	observe := func(f *Fold) string {
		var out []any
		for _, name := range []string{"a", "b", "c"} {
			for _, q := range []int64{now - 2*86400, now - 86400 + 17, now - 3600, now, now + 250, now + 86400} {
				h, ok := f.Agent(agentID(name), q)
				s, _ := f.Summary(agentID(name), q)
				out = append(out, h, ok, s)
			}
		}
		return mustJSON(t, out)
	}
	var want string
	for k := range 5 {
		seq := slices.Clone(beats)
		switch k {
		case 1:
			slices.Reverse(seq)
		case 2, 3, 4:
			r.Shuffle(len(seq), func(i, j int) { seq[i], seq[j] = seq[j], seq[i] })
		}
		f := New(Options{})
		feed(f, seq)
		got := observe(f)
		if k == 0 {
			want = got
		} else if got != want {
			t.Fatalf("order %d gives different answers", k)
		}
	}
}

func TestWindowPruning(t *testing.T) {
	f := New(Options{Window: time.Hour})
	feed(f, every("a", now-7200, now-3600, 60, okBeat(1))) // an hour of beats by a, ending an hour ago
	if _, n := f.Stats(); n != 60 {
		t.Fatalf("%d beats", n)
	}
	feed(f, every("b", now-600, now, 60, okBeat(1)))
	if _, ok := f.Agent(agentID("a"), now); ok {
		t.Error("a's beats still count an hour after the last one")
	}
	if f.Add(signedBeat("a", now-3600, okBeat(2)), now) {
		t.Error("a beat already outside the window was kept")
	}
	// Ten more minutes of b: the sweeps forget a.
	feed(f, every("b", now, now+600, 60, okBeat(1)))
	if agents, n := f.Stats(); agents != 1 || n != 20 {
		t.Errorf("after the window moved: %d agents, %d beats", agents, n)
	}
	// An agent's own beats are pruned as it keeps beating, with a slack of
	// Window/16.
	feed(f, every("b", now+600, now+7200, 60, okBeat(1)))
	if _, n := f.Stats(); n < 60 || n > 64 {
		t.Errorf("b keeps %d beats in a one-hour window", n)
	}
	if h, _ := f.Agent(agentID("b"), now+7200); h.Beats24h != 60 {
		t.Errorf("beats_24h %d, want the 60 of the window", h.Beats24h)
	}
}

// TestCapKeepsUptime beats every 7 s, with gaps, for two days into a fold
// with a 10-hour window capped at 256 beats (above 2 × 120 buckets + 1),
// and requires the same answers as an uncapped fold, apart from beats_24h
// and the latencies, which count retained beats.
func TestCapKeepsUptime(t *testing.T) {
	opts := Options{Window: 10 * time.Hour, MaxBeatsPerAgent: 256}
	capped := New(opts)
	opts.MaxBeatsPerAgent = 1 << 20
	full := New(opts)
	r := rand.New(rand.NewPCG(3, 4))
	i := 0
	for at := int64(now - 2*86400); at <= now; at += 7 {
		if r.IntN(50) == 0 {
			at += int64(r.IntN(900)) // gaps of up to 15 minutes
		}
		status := "ok"
		if r.IntN(4) == 0 {
			status = "degraded"
		}
		e := unsigned("a", at, `{"status":"`+status+`"}`)
		capped.Add(e, at)
		full.Add(e, at)
		if i++; i%37 != 0 {
			continue
		}
		for _, q := range []int64{at, at + 150, at + 299, at + 301, at + 3600} {
			c, _ := capped.Agent("a", q)
			u, _ := full.Agent("a", q)
			c.Beats24h, u.Beats24h = 0, 0
			if !reflect.DeepEqual(c, u) {
				t.Fatalf("at %d: capped %s\nuncapped %s", q, mustJSON(t, c), mustJSON(t, u))
			}
		}
		if _, n := capped.Stats(); n > 256 {
			t.Fatalf("capped fold holds %d beats", n)
		}
	}
	if _, n := full.Stats(); n < 1000 {
		t.Fatalf("the uncapped fold holds only %d beats", n)
	}
}

// TestCapDropsOldestWhenSparse: beats an hour apart cannot be thinned, so
// past the cap the oldest go.
func TestCapDropsOldestWhenSparse(t *testing.T) {
	f := New(Options{MaxBeatsPerAgent: 16})
	for i := range 40 {
		at := int64(now - 39*3600 + i*3600)
		f.Add(unsigned("a", at, ""), at)
	}
	h, _ := f.Agent("a", now)
	if _, n := f.Stats(); n > 16 || *h.LastSeenAt != now {
		t.Fatalf("%d beats, last seen %d", n, *h.LastSeenAt)
	}
}

// TestConcurrentUse runs writers against readers; run with -race.
func TestConcurrentUse(t *testing.T) {
	f := New(Options{Window: time.Hour})
	var beats []*protocol.Event
	for i := range 200 {
		beats = append(beats, signedBeat([]string{"a", "b", "c", "d"}[i%4], now+int64(i)*30, okBeat(i)))
	}
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < len(beats); i += 2 {
				f.Add(beats[i], beats[i].CreatedAt)
			}
		}()
	}
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 500 {
				f.Agent(agentID("a"), now+int64(i)*12)
				f.Summary(agentID("b"), now+int64(i)*12)
				f.Stats()
			}
		}()
	}
	wg.Wait()
	if _, n := f.Stats(); n == 0 || n > 200 {
		t.Fatalf("%d beats", n)
	}
}
