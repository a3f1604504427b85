package a2a_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anp2net/relay/a2a"
	"github.com/anp2net/relay/client"
	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay"
	"github.com/anp2net/relay/relay/sqlite"
	"github.com/anp2net/relay/tasks"
	"github.com/anp2net/relay/tasks/taskstest"
	"github.com/labstack/echo/v4"
)

// t0 is the relay clock at start: after PoW became mandatory on kinds 0
// and 50, so requests must be mined as on the live network.
const t0 = 1780000000

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

var quiet = slog.New(slog.DiscardHandler)

// testRelay is a real relay (SQLite file, HTTP on loopback) under test.
type testRelay struct {
	base  string
	clock *clock
	pub   *client.Client
}

func startRelay(t testing.TB, tweak ...func(*relay.Config)) *testRelay {
	t.Helper()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "r.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	clk := &clock{t: time.Unix(t0, 0)}
	cfg := relay.DefaultConfig()
	cfg.Now = clk.now
	cfg.RatePerAgent, cfg.RatePerIP = 0, 0
	cfg.Logger = slog.New(slog.DiscardHandler)
	for _, f := range tweak {
		f(&cfg)
	}
	cfg.Modules = append(cfg.Modules, a2a.NewModule(a2a.Options{}))
	srv, err := relay.New(cfg, st)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
		st.Close()
	})
	base := "http://" + ln.Addr().String()
	return &testRelay{base: base, clock: clk, pub: client.New(base)}
}

// publish posts events to the relay; each must be accepted.
func (r *testRelay) publish(t testing.TB, evs ...*protocol.Event) {
	t.Helper()
	for _, e := range evs {
		res, err := r.pub.Publish(context.Background(), e, false)
		if err != nil {
			t.Fatalf("publish kind %d: %v", e.Kind, err)
		}
		if !res.Accepted {
			t.Fatalf("publish kind %d: not accepted: %+v", e.Kind, res)
		}
	}
}

// Agents of the task tests.
var (
	requester = taskstest.NewAgent("a2a-requester")
	provider  = taskstest.NewAgent("a2a-provider")
	verifier1 = taskstest.NewAgent("a2a-verifier-1")
	verifier2 = taskstest.NewAgent("a2a-verifier-2")
)

// request returns a mined, signed kind 50 by requester (12-bit PoW, D3).
func request(t testing.TB, at, deadline int64) *protocol.Event {
	t.Helper()
	e := taskstest.Request(requester, at, deadline, taskstest.Reward{}, false)
	if err := protocol.Mine(context.Background(), e, 12); err != nil {
		t.Fatal(err)
	}
	e.Sign(requester.Key)
	return e
}

var seq atomic.Int64

// lifecycle returns the events that bring a fresh task to the native
// status st, the request first. Times are just before t0.
func lifecycle(t testing.TB, st tasks.Status) []*protocol.Event {
	t.Helper()
	deadline := int64(t0 + 3600)
	if st == tasks.StatusTimedOut {
		deadline = t0 - 30
	}
	at := t0 - 1000 - seq.Add(1) // distinct requests, in creation order
	req := request(t, at, deadline)
	evs := []*protocol.Event{req}
	add := func(e ...*protocol.Event) { evs = append(evs, e...) }
	switch st {
	case tasks.StatusPending, tasks.StatusTimedOut:
		return evs
	case tasks.StatusCancelled:
		add(taskstest.Cancel(requester, t0-100, req))
		return evs
	}
	add(taskstest.Accept(provider, t0-100, req))
	if st == tasks.StatusAccepted {
		return evs
	}
	add(taskstest.Result(provider, t0-90, req))
	switch st {
	case tasks.StatusCompleted:
		return evs
	case tasks.StatusDisputed:
		add(taskstest.Verify(verifier1, t0-80, req, protocol.VerdictPassed, 0.9),
			taskstest.Verify(verifier2, t0-79, req, protocol.VerdictFailed, 0.1))
		return evs
	}
	add(taskstest.Verify(verifier1, t0-80, req, protocol.VerdictPassed, 0.9))
	switch st {
	case tasks.StatusPaid:
		add(taskstest.Payment(requester, t0-70, req, protocol.DispositionRelease, protocol.PaymentANP2Credit))
	case tasks.StatusRefunded:
		add(taskstest.Payment(requester, t0-70, req, protocol.DispositionRefund, protocol.PaymentANP2Credit))
	}
	return evs
}

// rpcAnswer is one HTTP answer of the JSON-RPC endpoint.
type rpcAnswer struct {
	status int
	header http.Header
	body   []byte
}

// reply is one JSON-RPC response object.
type reply struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  json.RawMessage `json:"result"`
	Error   *a2a.Error      `json:"error"`
}

func post(t testing.TB, url, body string, hdr ...string) rpcAnswer {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return rpcAnswer{status: resp.StatusCode, header: resp.Header, body: b}
}

func (a rpcAnswer) reply(t testing.TB) reply {
	t.Helper()
	if a.status != http.StatusOK {
		t.Fatalf("HTTP %d, want 200: %s", a.status, a.body)
	}
	var r reply
	if err := json.Unmarshal(a.body, &r); err != nil {
		t.Fatalf("body %s: %v", a.body, err)
	}
	if r.JSONRPC != "2.0" {
		t.Fatalf("jsonrpc %q in %s", r.JSONRPC, a.body)
	}
	return r
}

// call sends one request with id 1 to base+"/a2a" and returns the reply.
func call(t testing.TB, base, method string, params any) reply {
	t.Helper()
	req := map[string]any{"jsonrpc": "2.0", "id": 1, "method": method}
	if params != nil {
		req["params"] = params
	}
	b, _ := json.Marshal(req)
	return post(t, base+"/a2a", string(b)).reply(t)
}

// result decodes a successful reply's result into v.
func (r reply) result(t testing.TB, v any) {
	t.Helper()
	if r.Error != nil {
		t.Fatalf("error %+v", r.Error)
	}
	if err := json.Unmarshal(r.Result, v); err != nil {
		t.Fatalf("result %s: %v", r.Result, err)
	}
}

// userMessage is a MessageSendParams with one text part.
func userMessage(text string) map[string]any {
	return map[string]any{"message": map[string]any{
		"kind": "message", "role": "user", "messageId": "m-" + text,
		"parts": []any{map[string]any{"kind": "text", "text": text}},
	}}
}

// openStream posts a streaming request and returns its SSE data frames on
// a channel, closed when the stream ends.
func openStream(t testing.TB, url, body string) (<-chan reply, http.Header) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("stream: HTTP %d", resp.StatusCode)
	}
	out := make(chan reply, 64)
	go func() {
		defer close(out)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			line, ok := bytes.CutPrefix(sc.Bytes(), []byte("data: "))
			if !ok {
				continue
			}
			var r reply
			if json.Unmarshal(line, &r) != nil {
				r = reply{JSONRPC: "invalid: " + string(line)}
			}
			out <- r
		}
	}()
	return out, resp.Header
}

// next returns the next frame, failing after timeout.
func next(t testing.TB, frames <-chan reply, timeout time.Duration) (reply, bool) {
	t.Helper()
	select {
	case r, ok := <-frames:
		return r, ok
	case <-time.After(timeout):
		t.Fatal("no frame within", timeout)
	}
	return reply{}, false
}

// unitServer serves an Adapter alone (no relay) for tests that need a fake
// task source or small limits.
func unitServer(t testing.TB, opts a2a.Options) string {
	t.Helper()
	e := echo.New()
	a2a.New(opts).Mount(func(method, path string, h echo.HandlerFunc) {
		e.Add(method, path, h)
		e.Add(method, "/api"+path, h)
	})
	ts := httptest.NewServer(e)
	t.Cleanup(ts.Close)
	return ts.URL
}

// fakeTasks is a native task source over fixed views.
type fakeTasks struct {
	views map[string]tasks.TaskView
	panic bool
}

func (f fakeTasks) Task(id string) (tasks.TaskView, bool) {
	if f.panic {
		panic("fake task source failure")
	}
	v, ok := f.views[id]
	return v, ok
}

func (f fakeTasks) List(tasks.Filter) []tasks.TaskView {
	if f.panic {
		panic("fake task source failure")
	}
	out := []tasks.TaskView{}
	for _, v := range f.views {
		out = append(out, v)
	}
	return out
}
