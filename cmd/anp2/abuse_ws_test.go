package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anp2net/relay/client"
	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/tasks/taskstest"
	"github.com/coder/websocket"
)

// The WebSocket and stream readers' attacks (SPEC §20.3), against real
// anp2 serve processes: a REQ flood from one address, the limit of a
// REQ counted in matches, and slow readers of large posts.

// wsMetric returns the value of the /metrics line name, failing the
// test when the relay does not report it.
func wsMetric(t *testing.T, base, name string) int64 {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatalf("metric %s: %q", name, v)
			}
			return n
		}
	}
	t.Fatalf("the relay reports no %s", name)
	return 0
}

// wsClient is a WebSocket client of a relay process's /ws.
type wsClient struct {
	t   *testing.T
	c   *websocket.Conn
	ctx context.Context
}

func wsDial(t *testing.T, base string) *wsClient {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(base, "http")+"/ws", nil)
	if err != nil {
		t.Fatalf("dial /ws: %v", err)
	}
	c.SetReadLimit(1 << 20)
	t.Cleanup(func() { c.CloseNow() })
	return &wsClient{t: t, c: c, ctx: ctx}
}

func (c *wsClient) send(frame ...any) error {
	b, _ := json.Marshal(frame)
	return c.c.Write(c.ctx, websocket.MessageText, b)
}

// next returns the next frame's elements, or an error when the
// connection ended.
func (c *wsClient) next() ([]json.RawMessage, error) {
	_, b, err := c.c.Read(c.ctx)
	if err != nil {
		return nil, err
	}
	var f []json.RawMessage
	if err := json.Unmarshal(b, &f); err != nil || len(f) == 0 {
		return nil, fmt.Errorf("frame %q", b)
	}
	return f, nil
}

func wsStr(b json.RawMessage) string {
	var s string
	_ = json.Unmarshal(b, &s)
	return s
}

func wsEventID(b json.RawMessage) string {
	var e struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal(b, &e)
	return e.ID
}

// wsPublish publishes evs to the relay at base from n workers.
func wsPublish(t *testing.T, base string, evs []*protocol.Event, n int) {
	t.Helper()
	cl := client.New(base)
	work := make(chan *protocol.Event)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for e := range work {
				if _, err := cl.Publish(context.Background(), e, false); err != nil {
					mu.Lock()
					first = cmpErr(first, err)
					mu.Unlock()
				}
			}
		}()
	}
	for _, e := range evs {
		work <- e
	}
	close(work)
	wg.Wait()
	if first != nil {
		t.Fatalf("publish: %v", first)
	}
}

func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// TestAbuseWSReqFlood: 480 REQs for 300 stored events each, from one
// address over eight connections (under the per-connection REQ rate),
// may make the relay read no more than the address's read budget; the
// rest are refused with rate_limited, and /health and a publish are
// answered during the flood. Before the budget every REQ read its
// stored rows: 144,000 here.
func TestAbuseWSReqFlood(t *testing.T) {
	const perAddr, stored, conns, reqs = 3000, 300, 8, 60
	p := startProcEnv(t, []string{"ANP2_WS_REQ_ROWS_PER_ADDR=" + strconv.Itoa(perAddr)},
		filepath.Join(t.TempDir(), "flood.db"), "--rate-agent", "0", "--rate-ip", "0")
	a := taskstest.Pool(4)
	now := time.Now().Unix()
	var evs []*protocol.Event
	for i := range stored {
		evs = append(evs, a[i%4].Sign(protocol.KindPost, now-int64(stored-i), fmt.Sprintf("flood %d", i)))
	}
	wsPublish(t, p.base, evs, 4)
	start := time.Now()
	var served, refused, other sync.Map
	var wg sync.WaitGroup
	for k := range conns {
		c := wsDial(t, p.base)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range reqs {
				if c.send("REQ", "s", map[string]any{"kinds": []int{1}, "limit": stored}) != nil {
					other.Store(fmt.Sprint(k, i), "write failed")
					return
				}
				for {
					f, err := c.next()
					if err != nil {
						other.Store(fmt.Sprint(k, i), err.Error())
						return
					}
					switch wsStr(f[0]) {
					case "EOSE":
						served.Store(fmt.Sprint(k, i), true)
					case "CLOSED":
						if msg := wsStr(f[2]); strings.HasPrefix(msg, "rate_limited:") {
							refused.Store(fmt.Sprint(k, i), true)
						} else {
							other.Store(fmt.Sprint(k, i), msg)
						}
					default:
						continue
					}
					break
				}
			}
		}()
	}
	// During the flood the relay answers its health check and a publish.
	if resp, err := http.Get(p.base + "/health"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("/health during the flood: %v %v", resp, err)
	}
	wsPublish(t, p.base, []*protocol.Event{a[0].Sign(protocol.KindPost, now, "during the flood")}, 1)
	wg.Wait()
	elapsed := time.Since(start)
	count := func(m *sync.Map) (n int) {
		m.Range(func(k, v any) bool { n++; return true })
		return n
	}
	other.Range(func(k, v any) bool { t.Errorf("REQ %v: %v", k, v); return true })
	nServed, nRefused := count(&served), count(&refused)
	rows := wsMetric(t, p.base, "anp2_ws_req_rows_total")
	// The bucket refills at its size per minute: what the flood may have
	// read is the budget plus its refill over the flood's duration.
	allowed := int64(float64(perAddr)*(1+elapsed.Minutes())) + 1
	t.Logf("%d REQs served, %d refused, %d rows read (allowed %d) in %s", nServed, nRefused, rows, allowed, elapsed.Round(time.Millisecond))
	if nServed+nRefused != conns*reqs {
		t.Fatalf("%d served + %d refused of %d REQs", nServed, nRefused, conns*reqs)
	}
	if rows > allowed || nRefused < conns*reqs/2 {
		t.Fatalf("one address had the relay read %d stored rows (allowed %d) and %d of %d REQs refused", rows, allowed, nRefused, conns*reqs)
	}
	if got := wsMetric(t, p.base, "anp2_ws_req_refused_total"); got != int64(nRefused) {
		t.Fatalf("anp2_ws_req_refused_total %d, clients saw %d refusals", got, nRefused)
	}
}

// TestAbuseWSLimitCountsMatches: a REQ's limit counts the events that
// match its whole filter. Two old posts carry both topics under twenty
// newer ones with one; {"filter":"t:a,t:b","limit":10} finds both.
func TestAbuseWSLimitCountsMatches(t *testing.T) {
	p := startProc(t, filepath.Join(t.TempDir(), "limit.db"), "--rate-agent", "0", "--rate-ip", "0")
	a := taskstest.Pool(1)
	now := time.Now().Unix()
	both := []*protocol.Event{
		a[0].Sign(protocol.KindPost, now-100, "both 0", []string{"t", "a"}, []string{"t", "b"}),
		a[0].Sign(protocol.KindPost, now-99, "both 1", []string{"t", "b"}, []string{"t", "a"}),
	}
	evs := append([]*protocol.Event(nil), both...)
	for i := range 20 {
		evs = append(evs, a[0].Sign(protocol.KindPost, now-50+int64(i), fmt.Sprintf("a only %d", i), []string{"t", "a"}))
	}
	wsPublish(t, p.base, evs, 1)
	c := wsDial(t, p.base)
	if err := c.send("REQ", "x", map[string]any{"filter": "t:a,t:b", "limit": 10}); err != nil {
		t.Fatal(err)
	}
	var got []string
	for {
		f, err := c.next()
		if err != nil {
			t.Fatal(err)
		}
		if wsStr(f[0]) == "EOSE" {
			break
		}
		if wsStr(f[0]) != "EVENT" {
			t.Fatalf("frame %s", f[0])
		}
		got = append(got, wsEventID(f[2]))
	}
	if want := []string{both[1].ID, both[0].ID}; strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("stored matches %v, want %v", got, want)
	}
}

// TestAbuseWSSlowReaders: WebSocket readers that never read, and a
// GET /stream reader that never reads, while large posts are published:
// each is dropped as too slow, the bytes the relay queued for them never
// pass its budgets (its own counters), and a dropped reader resumes
// from the point it was given without a gap or a duplicate. Small
// budgets (256 KiB a reader, 1 MiB in all) keep it quick.
func TestAbuseWSSlowReaders(t *testing.T) {
	wsSlowReaders(t, 8, 100, 1<<20, []string{"ANP2_WS_QUEUE_BYTES=262144", "ANP2_WS_QUEUE_BYTES_TOTAL=1048576",
		"ANP2_STREAM_QUEUE_BYTES=262144", "ANP2_STREAM_QUEUE_BYTES_TOTAL=1048576"})
}

// TestAbuseWSSlowReadersHeavy is TestAbuseWSSlowReaders near the
// attack's own figures, with the default budgets (128 MiB in all): 1,200
// posts of 60 kB, and 60 readers (one address may open 64).
func TestAbuseWSSlowReadersHeavy(t *testing.T) {
	heavyAbuse(t)
	wsSlowReaders(t, 60, 1200, 128<<20, nil)
}

// wsSlowReaders runs the slow readers' attack with readers WebSocket
// readers and posts posts; total is the budget of all the queues, env
// the process's environment.
func wsSlowReaders(t *testing.T, readers, posts int, total int64, env []string) {
	wsTotal, streamTotal := total, total
	p := startProcEnv(t, env, filepath.Join(t.TempDir(), "slow.db"), "--rate-agent", "0", "--rate-ip", "0")
	var slow []*wsClient
	for range readers {
		c := wsDial(t, p.base)
		if err := c.send("REQ", "s", map[string]any{"kinds": []int{1}}); err != nil {
			t.Fatal(err)
		}
		if f, err := c.next(); err != nil || wsStr(f[0]) != "EOSE" {
			t.Fatalf("REQ: %v %v", f, err)
		}
		slow = append(slow, c)
	}
	sse := wsSlowStream(t, p.base)
	a := taskstest.Pool(4)
	now := time.Now().Unix()
	big := strings.Repeat("z", 60_000)
	var evs []*protocol.Event
	for i := range posts {
		evs = append(evs, a[i%4].Sign(protocol.KindPost, now-int64(posts-i), fmt.Sprintf("%d %s", i, big)))
	}
	wsPublish(t, p.base, evs, 4)
	waitFor(t, "every slow reader dropped", func() bool {
		return wsMetric(t, p.base, "anp2_ws_dropped_slow_total") == int64(readers) &&
			wsMetric(t, p.base, "anp2_stream_dropped_slow_total") >= 1
	})
	// Read the dropped readers now: the relay gives a write 10 s.
	sseLast := make(chan string, 1)
	go func() { sseLast <- sse.final(t) }()
	wsPeak := wsMetric(t, p.base, "anp2_ws_queued_bytes_peak")
	streamPeak := wsMetric(t, p.base, "anp2_stream_queued_bytes_peak")
	t.Logf("%d readers, %d posts of 60 kB: peak queued %d bytes (ws), %d (stream); relay %s", readers, posts, wsPeak, streamPeak, wsPeakRSS(p))
	const frame = 70_000 // one frame may go over a budget
	if wsPeak == 0 || wsPeak > wsTotal+frame || streamPeak == 0 || streamPeak > streamTotal+frame {
		t.Fatalf("peak queued bytes %d (ws, budget %d) and %d (stream, budget %d)", wsPeak, wsTotal, streamPeak, streamTotal)
	}
	// One dropped reader: what it got, CLOSED too_slow with where to
	// resume, and the rest on a new connection.
	posted := map[string]bool{}
	for _, e := range evs {
		posted[e.ID] = true
	}
	got := map[string]bool{}
	after := ""
	for after == "" {
		f, err := slow[0].next()
		if err != nil {
			t.Fatalf("connection ended without CLOSED too_slow: %v", err)
		}
		switch wsStr(f[0]) {
		case "EVENT":
			got[wsEventID(f[2])] = true
		case "CLOSED":
			msg := wsStr(f[2])
			if !strings.HasPrefix(msg, "too_slow:") || !strings.Contains(msg, "after=") {
				t.Fatalf("CLOSED %q", msg)
			}
			after = msg[strings.LastIndex(msg, "=")+1:]
		}
	}
	c := wsDial(t, p.base)
	if err := c.send("REQ", "s", map[string]any{"kinds": []int{1}, "after": json.Number(after)}); err != nil {
		t.Fatal(err)
	}
	for {
		f, err := c.next()
		if err != nil {
			t.Fatal(err)
		}
		if wsStr(f[0]) == "EOSE" {
			break
		}
		id := wsEventID(f[2])
		if got[id] {
			t.Fatalf("event %s sent again on resume", id)
		}
		got[id] = true
	}
	for id := range posted {
		if !got[id] {
			t.Fatalf("event %s lost across the drop and resume (%d of %d received)", id, len(got), len(posted))
		}
	}
	if last := <-sseLast; !strings.HasPrefix(last, ": too slow, resume with Last-Event-ID ") {
		t.Fatalf("the slow stream ended with %q", last)
	}
}

// wsPeakRSS returns the relay process's peak resident set as Linux
// reports it (VmHWM), for the log only.
func wsPeakRSS(p *relayProc) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		return "peak RSS unknown"
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			return "peak RSS " + strings.TrimSpace(v)
		}
	}
	return "peak RSS unknown"
}

// wsSlowStreamReader is a GET /stream reader that does not read past
// the response header.
type wsSlowStreamReader struct {
	conn net.Conn
	resp *http.Response
}

func wsSlowStream(t *testing.T, base string) *wsSlowStreamReader {
	t.Helper()
	addr := strings.TrimPrefix(base, "http://")
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	fmt.Fprintf(conn, "GET /stream?kinds=1 HTTP/1.1\r\nHost: %s\r\n\r\n", addr)
	// The header comes once the stream is subscribed.
	_ = conn.SetReadDeadline(time.Now().Add(time.Minute))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /stream: %v %v", resp, err)
	}
	return &wsSlowStreamReader{conn: conn, resp: resp}
}

// final reads the stream to its end and returns its last comment line.
func (r *wsSlowStreamReader) final(t *testing.T) string {
	t.Helper()
	_ = r.conn.SetReadDeadline(time.Now().Add(2 * time.Minute))
	defer r.resp.Body.Close()
	sc := bufio.NewScanner(r.resp.Body)
	sc.Buffer(make([]byte, 128<<10), 1<<20)
	last := ""
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), ": ") {
			last = sc.Text()
		}
	}
	return last
}

// TestAbuseStreamReplayBudget: streams resumed from the log's start by
// one address are charged every row their replays read: past the
// address's budget a replay ends with retry: and where to resume, rather
// than reading the log again for each stream.
func TestAbuseStreamReplayBudget(t *testing.T) {
	p := startProcEnv(t, []string{"ANP2_STREAM_REPLAY_ROWS=100"}, filepath.Join(t.TempDir(), "replay.db"), "--rate-agent", "0", "--rate-ip", "0")
	a := taskstest.Pool(2)
	now := time.Now().Unix()
	var evs []*protocol.Event
	for i := range 150 {
		evs = append(evs, a[i%2].Sign(protocol.KindPost, now-int64(150-i), fmt.Sprintf("replay %d", i)))
	}
	wsPublish(t, p.base, evs, 4)
	start := time.Now()
	ended := 0
	for range 3 {
		req, _ := http.NewRequest("GET", p.base+"/stream", nil)
		req.Header.Set("Last-Event-ID", "0")
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		resp, err := http.DefaultClient.Do(req.WithContext(ctx))
		if err != nil || resp.StatusCode != 200 {
			cancel()
			t.Fatalf("GET /stream: %v %v", resp, err)
		}
		sc := bufio.NewScanner(resp.Body)
		retry := false
		for sc.Scan() {
			line := sc.Text()
			if strings.HasPrefix(line, "retry: ") {
				retry = true
			}
			if line == ": live" {
				break
			}
			if strings.HasPrefix(line, ": read budget spent, resume with Last-Event-ID ") && retry {
				ended++
				break
			}
		}
		resp.Body.Close()
		cancel()
	}
	rows := wsMetric(t, p.base, "anp2_stream_replay_rows_total")
	allowed := int64(100*(1+time.Since(start).Minutes())) + 1 // the budget and its refill meanwhile
	if ended != 3 || rows > allowed {
		t.Fatalf("%d of 3 replays of 150 events ended on a 100-row budget; %d rows read (allowed %d)", ended, rows, allowed)
	}
}
