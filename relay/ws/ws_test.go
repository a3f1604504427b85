package ws_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay"
	"github.com/anp2net/relay/relay/relaytest"
	"github.com/anp2net/relay/relay/ws"
	"github.com/anp2net/relay/tasks/taskstest"
	"github.com/coder/websocket"
)

const vt = relaytest.VectorTime

func start(t *testing.T, opts ws.Options, tweak ...func(*relay.Config)) (*relaytest.Relay, *ws.Module) {
	m := ws.NewModule(opts)
	return relaytest.Start(t, []relay.Module{m}, tweak...), m
}

// client is a real WebSocket client of the relay's /ws.
type client struct {
	t   *testing.T
	c   *websocket.Conn
	ctx context.Context
}

func dial(t *testing.T, r *relaytest.Relay) *client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(r.URL, "http")+"/ws", nil)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	c.SetReadLimit(4 << 20)
	t.Cleanup(func() { c.CloseNow() })
	return &client{t: t, c: c, ctx: ctx}
}

func (c *client) send(frame ...any) {
	c.t.Helper()
	b, _ := json.Marshal(frame)
	if err := c.c.Write(c.ctx, websocket.MessageText, b); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

func (c *client) sendRaw(s string) {
	c.t.Helper()
	if err := c.c.Write(c.ctx, websocket.MessageText, []byte(s)); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

// next reads one frame as a list of raw elements.
func (c *client) next() []json.RawMessage {
	c.t.Helper()
	_, b, err := c.c.Read(c.ctx)
	if err != nil {
		c.t.Fatalf("read: %v", err)
	}
	var f []json.RawMessage
	if err := json.Unmarshal(b, &f); err != nil {
		c.t.Fatalf("frame %s: %v", b, err)
	}
	return f
}

func str(b json.RawMessage) string {
	var s string
	_ = json.Unmarshal(b, &s)
	return s
}

// expect reads a frame of type typ and returns it.
func (c *client) expect(typ string) []json.RawMessage {
	c.t.Helper()
	f := c.next()
	if str(f[0]) != typ {
		c.t.Fatalf("want %s frame, got %s", typ, join(f))
	}
	return f
}

func join(f []json.RawMessage) string {
	parts := make([]string, len(f))
	for i, p := range f {
		parts[i] = string(p)
	}
	return "[" + strings.Join(parts, ",") + "]"
}

func eventID(f []json.RawMessage) string {
	var e struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal(f[2], &e)
	return e.ID
}

// TestReqReplayLiveClose: REQ with after=0 replays the matching stored
// events with their sequences, EOSE names the log's end, live events
// follow with no duplicate, and CLOSE stops them.
func TestReqReplayLiveClose(t *testing.T) {
	r, _ := start(t, ws.Options{})
	a := taskstest.Pool(2)
	var stored []*protocol.Event
	for i := range 3 {
		stored = append(stored, a[0].Sign(protocol.KindPost, vt-100+int64(i), fmt.Sprintf("post %d", i)))
	}
	other := a[1].Sign(protocol.KindPost, vt-90, "not mine")
	r.PostAll(t, append(stored, other), 1)
	c := dial(t, r)
	c.send("REQ", "s1", map[string]any{"authors": []string{a[0].ID}, "after": 0})
	seen := map[string]bool{}
	for range 3 {
		f := c.expect("EVENT")
		if str(f[1]) != "s1" || len(f) != 4 {
			t.Fatalf("event frame %s", join(f))
		}
		seen[eventID(f)] = true
	}
	for _, e := range stored {
		if !seen[e.ID] {
			t.Fatalf("stored event %s not replayed", e.ID)
		}
	}
	eose := c.expect("EOSE")
	if string(eose[2]) != "4" {
		t.Fatalf("EOSE %s: want through 4", join(eose))
	}
	live := a[0].Sign(protocol.KindPost, vt-10, "live")
	r.PostAll(t, []*protocol.Event{a[1].Sign(protocol.KindPost, vt-11, "skip"), live}, 1)
	f := c.expect("EVENT")
	if eventID(f) != live.ID || string(f[3]) != "6" {
		t.Fatalf("live frame %s", join(f))
	}
	c.send("CLOSE", "s1")
	if f := c.expect("CLOSED"); str(f[1]) != "s1" || str(f[2]) != "" {
		t.Fatalf("closed %s", join(f))
	}
	r.PostAll(t, []*protocol.Event{a[0].Sign(protocol.KindPost, vt-9, "after close")}, 1)
	// A fresh REQ answers EOSE at once; the closed one sent nothing more.
	c.send("REQ", "s2", map[string]any{"ids": []string{live.ID}, "limit": 5})
	if f := c.expect("EVENT"); eventID(f) != live.ID || str(f[1]) != "s2" || len(f) != 3 {
		t.Fatalf("stored match %s", join(f))
	}
	if f := c.expect("EOSE"); string(f[2]) != "7" {
		t.Fatalf("EOSE %s", join(f))
	}
}

// TestReqStoredNewestThenLive: without after, a REQ gets the newest
// limit stored matches (GET /events' order), EOSE, then live events; an
// event that is both stored and queued is sent once.
func TestReqStoredNewestThenLive(t *testing.T) {
	r, _ := start(t, ws.Options{})
	a := taskstest.Pool(1)
	var evs []*protocol.Event
	for i := range 5 {
		evs = append(evs, a[0].Sign(protocol.KindPost, vt-100+int64(i), fmt.Sprintf("p%d", i), []string{"t", "go"}))
	}
	r.PostAll(t, evs, 1)
	c := dial(t, r)
	c.send("REQ", "n", map[string]any{"#t": []string{"go"}, "kinds": []int{1}, "limit": 2})
	if id := eventID(c.expect("EVENT")); id != evs[4].ID {
		t.Fatalf("newest first: got %s", id)
	}
	if id := eventID(c.expect("EVENT")); id != evs[3].ID {
		t.Fatalf("second newest: got %s", id)
	}
	c.expect("EOSE")
	live := a[0].Sign(protocol.KindPost, vt-5, "live", []string{"t", "go"})
	r.PostAll(t, []*protocol.Event{live}, 1)
	if f := c.expect("EVENT"); eventID(f) != live.ID {
		t.Fatalf("live %s", join(f))
	}
}

// TestEventFrame: EVENT publishes with POST /events' rules and answers OK.
func TestEventFrame(t *testing.T) {
	r, _ := start(t, ws.Options{})
	a := taskstest.Pool(1)
	c := dial(t, r)
	e := a[0].Sign(protocol.KindPost, vt-5, "over the socket")
	c.sendRaw(`["EVENT",` + string(protocol.AppendJSON(nil, e)) + `]`)
	if f := c.expect("OK"); str(f[1]) != e.ID || string(f[2]) != "true" || str(f[3]) != "" {
		t.Fatalf("ok %s", join(f))
	}
	if got := r.Do(t, "GET", "/events/"+e.ID, "", nil); got.Status != 200 {
		t.Fatalf("stored event: %d", got.Status)
	}
	c.sendRaw(`["EVENT",` + string(protocol.AppendJSON(nil, e)) + `]`)
	if f := c.expect("OK"); string(f[2]) != "true" || !strings.HasPrefix(str(f[3]), "duplicate:") {
		t.Fatalf("duplicate %s", join(f))
	}
	forged := *e
	forged.Content = "changed"
	c.sendRaw(`["EVENT",` + string(protocol.AppendJSON(nil, &forged)) + `]`)
	if f := c.expect("OK"); string(f[2]) != "false" || !strings.Contains(str(f[3]), ":") {
		t.Fatalf("forged %s", join(f))
	}
	c.sendRaw(`["EVENT",{"id":"x"}]`)
	if f := c.expect("OK"); str(f[1]) != "x" || string(f[2]) != "false" {
		t.Fatalf("malformed %s", join(f))
	}
	if n := r.Count(t); n != 1 {
		t.Fatalf("log holds %d events, want 1", n)
	}
	c.sendRaw(`{"not":"a list"}`)
	if f := c.expect("NOTICE"); !strings.HasPrefix(str(f[1]), ws.CodeInvalidFrame+":") {
		t.Fatalf("notice %s", join(f))
	}
	c.send("REQ", "bad", map[string]any{"color": "red"})
	if f := c.expect("CLOSED"); str(f[1]) != "bad" || !strings.HasPrefix(str(f[2]), "unknown_parameter:") {
		t.Fatalf("closed %s", join(f))
	}
}

// TestAuthVisibility: a hidden post is replayed to its author once the
// connection is authenticated with AUTH, never to an anonymous reader;
// an AUTH for another URL is refused.
func TestAuthVisibility(t *testing.T) {
	r, _ := start(t, ws.Options{})
	a := taskstest.Pool(4)
	post := a[0].Sign(protocol.KindPost, vt-50, "watch this")
	r.PostAll(t, []*protocol.Event{post}, 1)
	var flags []*protocol.Event
	for _, f := range a[1:4] {
		flags = append(flags, f.Sign(protocol.KindFlag, vt-40, map[string]any{"category": "spam"}, []string{"e", post.ID}))
	}
	r.PostAll(t, flags, 1)
	relaytest.Eventually(t, "post hidden", func() bool {
		return strings.Contains(string(r.Do(t, "GET", "/events/"+post.ID+"/flags", "", nil).Body), `"visibility":"hidden"`)
	})
	authFrame := func(url string) string {
		h := protocol.HTTPAuth(a[0].Key, "GET", url, nil, vt)
		raw, err := base64Decode(strings.TrimPrefix(h, "ANP2 "))
		if err != nil {
			t.Fatal(err)
		}
		return `["AUTH",` + string(raw) + `]`
	}
	anon := dial(t, r)
	anon.send("REQ", "k1", map[string]any{"kinds": "1", "after": 0})
	anon.expect("EOSE")

	author := dial(t, r)
	author.sendRaw(authFrame(r.URL + "/elsewhere"))
	if f := author.expect("OK"); string(f[2]) != "false" || !strings.HasPrefix(str(f[3]), "unauthorized:") {
		t.Fatalf("wrong-URL auth %s", join(f))
	}
	author.sendRaw(authFrame("ws" + strings.TrimPrefix(r.URL, "http") + "/ws"))
	if f := author.expect("OK"); string(f[2]) != "true" {
		t.Fatalf("auth %s", join(f))
	}
	author.send("REQ", "k1", map[string]any{"kinds": "1", "after": 0})
	if f := author.expect("EVENT"); eventID(f) != post.ID {
		t.Fatalf("author replay %s", join(f))
	}
	author.expect("EOSE")
}

// TestLimits: subscriptions per connection, connections per address, and
// a plain GET without upgrade.
func TestLimits(t *testing.T) {
	r, _ := start(t, ws.Options{MaxSubscriptions: 2, MaxReqsPerMinute: 5}, func(c *relay.Config) { c.MaxStreamsPerIP = 2 })
	if a := r.Do(t, "GET", "/ws", "", nil); a.Status != 426 || a.Code(t) != ws.CodeUpgradeRequired {
		t.Fatalf("plain GET: %d %s", a.Status, a.Body)
	}
	c := dial(t, r)
	c.send("REQ", "a")
	c.expect("EOSE")
	c.send("REQ", "b")
	c.expect("EOSE")
	c.send("REQ", "a") // replacing an open id is not a new subscription
	c.expect("EOSE")
	c.send("REQ", "c")
	if f := c.expect("CLOSED"); !strings.HasPrefix(str(f[2]), ws.CodeTooManySubscriptions+":") {
		t.Fatalf("third subscription %s", join(f))
	}
	c.send("CLOSE", "b")
	c.expect("CLOSED")
	c.send("REQ", "b") // the fifth REQ this minute
	c.expect("EOSE")
	c.send("CLOSE", "b")
	c.expect("CLOSED")
	c.send("REQ", "b")
	if f := c.expect("CLOSED"); !strings.HasPrefix(str(f[2]), "rate_limited:") {
		t.Fatalf("sixth REQ in a minute %s", join(f))
	}
	r.Clock.Add(time.Minute)
	c.send("REQ", "b")
	c.expect("EOSE")
	dial(t, r)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, resp, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(r.URL, "http")+"/ws", nil)
	if err == nil || resp == nil || resp.StatusCode != 429 || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("third connection from one address: %v %v", err, resp)
	}
}

// TestSlowReaderClosed: a subscription whose buffer overflows is told
// (CLOSED too_slow, with where to resume) and its connection closed,
// while publishing goes on; resuming from that point misses nothing.
func TestSlowReaderClosed(t *testing.T) {
	r, m := start(t, ws.Options{Buffer: 2})
	a := taskstest.Pool(1)
	c := dial(t, r)
	c.send("REQ", "s", map[string]any{"kinds": "1"})
	c.expect("EOSE")
	var evs []*protocol.Event
	var body []string
	for i := range 10 {
		e := a[0].Sign(protocol.KindPost, vt-100+int64(i), fmt.Sprintf("burst %d", i))
		evs = append(evs, e)
		body = append(body, string(protocol.AppendJSON(nil, e)))
	}
	// One batch commits ten events at once: more than the buffer holds.
	if got := r.Do(t, "POST", "/events/batch", "application/json", []byte("["+strings.Join(body, ",")+"]")); got.Status != 200 {
		t.Fatalf("batch: %d %s", got.Status, got.Body)
	}
	// The client gets what was queued before the overflow (the store may
	// commit the batch in more than one piece), then CLOSED naming the
	// last sequence it was sent.
	var resume string
	var got []string
	last := "0"
	for {
		_, b, err := c.c.Read(c.ctx)
		if err != nil {
			if websocket.CloseStatus(err) != websocket.StatusPolicyViolation {
				t.Fatalf("close: %v", err)
			}
			break
		}
		var f []json.RawMessage
		_ = json.Unmarshal(b, &f)
		switch str(f[0]) {
		case "EVENT":
			got = append(got, eventID(f))
			last = string(f[3])
		case "CLOSED":
			if !strings.HasPrefix(str(f[2]), ws.CodeTooSlow+":") {
				t.Fatalf("closed %s", join(f))
			}
			resume = str(f[2])[strings.LastIndex(str(f[2]), "=")+1:]
		}
	}
	if resume != last || len(got) >= len(evs) {
		t.Fatalf("resume point %q after %d events (last seq %s)", resume, len(got), last)
	}
	if m.Stats().Dropped != 1 {
		t.Fatalf("stats %+v", m.Stats())
	}
	if got := r.Do(t, "GET", "/metrics", "", nil); !strings.Contains(string(got.Body), "anp2_ws_dropped_slow_total 1\n") {
		t.Fatalf("metrics:\n%s", got.Body)
	}
	c2 := dial(t, r)
	c2.send("REQ", "s", map[string]any{"kinds": "1", "after": json.Number(resume)})
	for _, e := range evs[len(got):] {
		if id := eventID(c2.expect("EVENT")); id != e.ID {
			t.Fatalf("resume got %s want %s", id, e.ID)
		}
	}
	for i, e := range evs[:len(got)] {
		if got[i] != e.ID {
			t.Fatalf("before the overflow got %s want %s", got[i], e.ID)
		}
	}
	c2.expect("EOSE")
}

// TestBusyStreamInOrder: events published faster than the coalescing
// tick reach a subscription whole and in log order (gathered into corked
// writes), while the same connection's own EVENT frames are answered in
// between (direct writes on the same socket, never interleaved inside a
// frame).
func TestBusyStreamInOrder(t *testing.T) {
	r, _ := start(t, ws.Options{Coalesce: 50 * time.Millisecond})
	a := taskstest.Pool(2)
	c := dial(t, r)
	c.send("REQ", "s", map[string]any{"kinds": "1", "after": 0})
	c.expect("EOSE")
	const n = 200
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range n {
			e := a[0].Sign(protocol.KindPost, vt-300+int64(i), fmt.Sprintf("post %d", i))
			if got := r.Do(t, "POST", "/events", "application/json", protocol.AppendJSON(nil, e)); got.Status != 201 && got.Status != 200 {
				t.Errorf("publish %d: %d %s", i, got.Status, got.Body)
			}
		}
	}()
	var own []string
	for i := range 20 {
		e := a[1].Sign(protocol.KindPost, vt-300+int64(i), fmt.Sprintf("own %d", i))
		own = append(own, e.ID)
		b, _ := json.Marshal([]any{"EVENT", e})
		c.sendRaw(string(b))
	}
	var last int64
	events, oks := 0, 0
	for events < n+len(own) || oks < len(own) {
		f := c.next()
		switch str(f[0]) {
		case "EVENT":
			var seq int64
			if err := json.Unmarshal(f[3], &seq); err != nil || seq <= last {
				t.Fatalf("frame %s after seq %d", join(f), last)
			}
			last = seq
			events++
		case "OK":
			if str(f[1]) != own[oks] || string(f[2]) != "true" {
				t.Fatalf("ok %s, want %s", join(f), own[oks])
			}
			oks++
		default:
			t.Fatalf("frame %s", join(f))
		}
	}
	<-done
}

// TestShutdownGoesAway: when the relay shuts down, a client that reads is
// told "going away" with a close frame, and the shutdown completes
// although other clients never answer their close frames.
func TestShutdownGoesAway(t *testing.T) {
	r, m := start(t, ws.Options{})
	reading := dial(t, r)
	for range 3 {
		dial(t, r) // never reads, so never answers the close handshake
	}
	waitConns(t, m, 4)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	done := make(chan struct{})
	go func() {
		m.Run(ctx)
		close(done)
	}()
	_, _, err := reading.c.Read(reading.ctx)
	if websocket.CloseStatus(err) != websocket.StatusGoingAway {
		t.Fatalf("reading client: %v, want a going-away close", err)
	}
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("shutdown waits on clients that do not answer")
	}
}

func waitConns(t *testing.T, m *ws.Module, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); m.Stats().Connections != n; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d connections, want %d", m.Stats().Connections, n)
		}
	}
}

// TestReqLimitCountsMatches: the limit of a REQ without after counts the
// events that match the whole filter, not rows read before filtering:
// two old events carrying both topics are found under twenty newer ones
// carrying one.
func TestReqLimitCountsMatches(t *testing.T) {
	r, _ := start(t, ws.Options{})
	a := taskstest.Pool(1)
	both := []*protocol.Event{
		a[0].Sign(protocol.KindPost, vt-200, "both 0", []string{"t", "a"}, []string{"t", "b"}),
		a[0].Sign(protocol.KindPost, vt-199, "both 1", []string{"t", "b"}, []string{"t", "a"}),
	}
	evs := append([]*protocol.Event(nil), both...)
	for i := range 20 {
		evs = append(evs, a[0].Sign(protocol.KindPost, vt-100+int64(i), fmt.Sprintf("a only %d", i), []string{"t", "a"}))
	}
	r.PostAll(t, evs, 1)
	c := dial(t, r)
	c.send("REQ", "x", map[string]any{"filter": "t:a,t:b", "limit": 10})
	for _, want := range []string{both[1].ID, both[0].ID} {
		if f := c.expect("EVENT"); eventID(f) != want {
			t.Fatalf("got %s want %s", join(f), want)
		}
	}
	c.expect("EOSE")
	c.send("REQ", "y", map[string]any{"#t": []string{"a"}, "filter": "t:b", "limit": 1})
	if f := c.expect("EVENT"); eventID(f) != both[1].ID {
		t.Fatalf("limit 1: %s", join(f))
	}
	c.expect("EOSE")
}

// TestReqReadBudget: REQs are charged the rows they make the relay read;
// beyond the connection's budget, or its address's across connections,
// a REQ is refused with rate_limited and reads nothing, and the budget
// refills with the relay clock.
func TestReqReadBudget(t *testing.T) {
	r, m := start(t, ws.Options{ReqRows: 300, ReqRowsPerAddr: 500})
	a := taskstest.Pool(1)
	var evs []*protocol.Event
	for i := range 250 {
		evs = append(evs, a[0].Sign(protocol.KindPost, vt-1000+int64(i), fmt.Sprintf("p%d", i)))
	}
	r.PostAll(t, evs, 50)
	req := func(c *client, limit int) string {
		c.send("REQ", "s", map[string]any{"kinds": 1, "limit": limit})
		for n := 0; ; n++ {
			f := c.next()
			switch str(f[0]) {
			case "EOSE":
				if n != limit {
					t.Fatalf("%d stored matches, want %d", n, limit)
				}
				return "EOSE"
			case "CLOSED":
				if n != 0 || !strings.HasPrefix(str(f[2]), "rate_limited:") {
					t.Fatalf("after %d events: %s", n, join(f))
				}
				return "rate_limited"
			}
		}
	}
	c1 := dial(t, r)
	if got := req(c1, 200); got != "EOSE" {
		t.Fatal("first REQ refused")
	}
	if got := req(c1, 200); got != "rate_limited" {
		t.Fatal("a REQ over the connection's budget was served")
	}
	c2 := dial(t, r) // same address: 220 of its 500 rows are spent
	if got := req(c2, 200); got != "EOSE" {
		t.Fatal("a second connection's first REQ was refused")
	}
	c3 := dial(t, r)
	if got := req(c3, 200); got != "rate_limited" {
		t.Fatal("a REQ over the address's budget was served on a fresh connection")
	}
	if st := m.Stats(); st.ReqRows > 500 || st.ReqRefused != 2 {
		t.Fatalf("stats %+v: want at most the address's 500 rows and 2 refusals", st)
	}
	r.Clock.Add(time.Minute)
	if got := req(c3, 200); got != "EOSE" {
		t.Fatal("the budget did not refill")
	}
	if got := r.Do(t, "GET", "/metrics", "", nil); !strings.Contains(string(got.Body), "anp2_ws_req_refused_total 2\n") {
		t.Fatalf("metrics:\n%s", got.Body)
	}
}

// TestReplayReadBudget: a replay (REQ with after) is charged every row
// it reads; when the budget runs out the subscription ends with
// rate_limited naming where to resume, and resuming there later misses
// nothing and repeats nothing.
func TestReplayReadBudget(t *testing.T) {
	r, _ := start(t, ws.Options{ReqRows: 100, ReqRowsPerAddr: 100})
	a := taskstest.Pool(1)
	var evs []*protocol.Event
	for i := range 250 {
		evs = append(evs, a[0].Sign(protocol.KindPost, vt-1000+int64(i), fmt.Sprintf("p%d", i)))
	}
	r.PostAll(t, evs, 50)
	var got []string
	after := "0"
	for round := 0; ; round++ {
		if round > 5 {
			t.Fatalf("replay not done after %d rounds (%d events)", round, len(got))
		}
		c := dial(t, r)
		c.send("REQ", "s", map[string]any{"kinds": 1, "after": json.Number(after)})
		done := false
		for !done {
			f := c.next()
			switch str(f[0]) {
			case "EVENT":
				got = append(got, eventID(f))
			case "EOSE":
				done = true
			case "CLOSED":
				msg := str(f[2])
				if !strings.HasPrefix(msg, "rate_limited:") || !strings.Contains(msg, "after=") {
					t.Fatalf("closed %s", join(f))
				}
				after = msg[strings.Index(msg, "after=")+6:]
				after = after[:strings.IndexByte(after, ' ')]
				done = true
			}
		}
		c.c.CloseNow()
		if len(got) == len(evs) {
			break
		}
		r.Clock.Add(time.Minute)
	}
	seen := map[string]bool{}
	for _, id := range got {
		if seen[id] {
			t.Fatalf("event %s sent twice", id)
		}
		seen[id] = true
	}
	for _, e := range evs {
		if !seen[e.ID] {
			t.Fatalf("event %s never sent", e.ID)
		}
	}
}

// TestSlowReaderClosedByBytes: a connection that leaves large events
// unread is closed as too slow once the bytes waiting for it pass
// QueueBytes, long before its frame cap, and the relay never held much
// more than that for it; it resumes from the named point.
func TestSlowReaderClosedByBytes(t *testing.T) {
	r, m := start(t, ws.Options{QueueBytes: 256 << 10})
	a := taskstest.Pool(1)
	c := dial(t, r)
	c.send("REQ", "s", map[string]any{"kinds": "1"})
	c.expect("EOSE")
	big := strings.Repeat("y", 60_000)
	n := 0
	for ; m.Stats().Dropped == 0; n++ {
		if n == 300 { // a 1024-frame cap alone would not drop it yet
			t.Fatalf("a reader 18 MB behind was never dropped; stats %+v", m.Stats())
		}
		r.PostAll(t, []*protocol.Event{a[0].Sign(protocol.KindPost, vt-1000+int64(n), fmt.Sprintf("%d %s", n, big))}, 1)
	}
	if st := m.Stats(); st.PeakQueuedBytes > 256<<10+70_000 {
		t.Fatalf("peak queued %d bytes for one reader on a 256 KiB budget", st.PeakQueuedBytes)
	}
	t.Logf("dropped after %d events of 60 kB", n)
	closed := false
	for {
		_, b, err := c.c.Read(c.ctx)
		if err != nil {
			if websocket.CloseStatus(err) != websocket.StatusPolicyViolation || !closed {
				t.Fatalf("close: %v (CLOSED seen: %v)", err, closed)
			}
			return
		}
		var f []json.RawMessage
		_ = json.Unmarshal(b, &f)
		if str(f[0]) == "CLOSED" {
			if !strings.HasPrefix(str(f[2]), ws.CodeTooSlow+": too slow; reconnect and REQ with after=") {
				t.Fatalf("closed %s", join(f))
			}
			closed = true
		}
	}
}
