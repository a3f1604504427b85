package stream

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/eventlog"
	"github.com/anp2net/relay/relay/sqlite"
)

func key(i int) ed25519.PrivateKey {
	seed := make([]byte, 32)
	seed[0], seed[1], seed[31] = byte(i), byte(i>>8), 0x5b
	return ed25519.NewKeyFromSeed(seed)
}

// mk returns a real signed event.
func mk(k ed25519.PrivateKey, createdAt, kind int64, content string, tags ...[]string) *protocol.Event {
	e := &protocol.Event{CreatedAt: createdAt, Kind: kind, Content: content, Tags: tags}
	if e.Tags == nil {
		e.Tags = [][]string{}
	}
	e.Sign(k)
	return e
}

// rig is a real SQLite log in a temp dir whose commit hook feeds a hub,
// served by a real HTTP server on loopback the way the relay will serve it.
type rig struct {
	store *sqlite.Store
	hub   *Hub
	srv   *httptest.Server

	// beforeExport and atBound, when set, run inside the hub's backlog
	// call: before the log's end is read, and right after.
	mu           sync.Mutex
	beforeExport func()
	atBound      func(through int64)
	onPublish    func([]Item)
	exportErr    error
}

func newRig(t testing.TB, opts Options) *rig {
	r := &rig{}
	opts.Backlog = r.backlog
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	r.hub = NewHub(opts)
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "log.db"), r.hook)
	if err != nil {
		t.Fatal(err)
	}
	r.store = st
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(func() {
		r.hub.Close()
		r.srv.Close()
		st.Close()
	})
	return r
}

// hook is the store's commit hook, as the lead will wire it.
func (r *rig) hook(cs []eventlog.Committed) {
	items := make([]Item, len(cs))
	for i, c := range cs {
		items[i] = Item{Seq: c.Seq, Event: c.Event}
	}
	r.mu.Lock()
	f := r.onPublish
	r.mu.Unlock()
	if f != nil {
		f(items)
	}
	r.hub.Publish(items)
}

func (r *rig) backlog(ctx context.Context, after int64, start func(int64) error, fn func(int64, []byte) error) error {
	r.mu.Lock()
	before, bound, fail := r.beforeExport, r.atBound, r.exportErr
	r.mu.Unlock()
	if fail != nil {
		return fail
	}
	if before != nil {
		before()
	}
	return r.store.Export(ctx, after, func(through int64) error {
		if bound != nil {
			bound(through)
		}
		return start(through)
	}, fn)
}

// serve stands in for the relay's Echo handler; X-Reader stands in for the
// D4 Authorization header, X-Addr for the client's address key.
func (r *rig) serve(w http.ResponseWriter, req *http.Request) {
	f, err := ParseFilter(req.URL.Query())
	if err == nil {
		err = r.hub.ServeAddr(w, req, f, req.Header.Get("X-Reader"), req.Header.Get("X-Addr"))
	}
	if err != nil {
		writeError(w, err)
	}
}

// writeError is the mapping the relay's error handler applies.
func writeError(w http.ResponseWriter, err error) {
	var busy *BusyError
	var pe *protocol.Error
	status := http.StatusBadRequest
	switch {
	case errors.As(err, &busy):
		w.Header().Set("Retry-After", strconv.Itoa(busy.RetryAfterSeconds()))
		status = http.StatusServiceUnavailable
	case !errors.As(err, &pe):
		http.Error(w, "internal", http.StatusInternalServerError)
		return
	case pe.Code == CodeUnavailable:
		status = http.StatusServiceUnavailable
	}
	errors.As(err, &pe)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"detail": pe.Detail, "code": pe.Code})
}

func (r *rig) append(t testing.TB, e *protocol.Event) int64 {
	t.Helper()
	res, err := r.store.Append(context.Background(), eventlog.Record{Event: e, ReceivedAt: e.CreatedAt})
	if err != nil {
		t.Fatal(err)
	}
	return res.Seq
}

// frame is one parsed SSE frame.
type frame struct {
	id       string
	hasID    bool
	event    string
	data     string
	retry    string
	comments []string
}

func (f frame) seq(t testing.TB) int64 {
	t.Helper()
	n, err := strconv.ParseInt(f.id, 10, 64)
	if err != nil {
		t.Fatalf("frame id %q: %v", f.id, err)
	}
	return n
}

func (f frame) isEvent() bool { return f.data != "" && f.event == "" }

func (f frame) comment(prefix string) bool {
	for _, c := range f.comments {
		if strings.HasPrefix(c, prefix) {
			return true
		}
	}
	return false
}

// readFrames parses an SSE body into frames until EOF, then closes out.
func readFrames(body io.Reader, out chan<- frame) {
	defer close(out)
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var f frame
	started := false
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if started {
				out <- f
			}
			f, started = frame{}, false
			continue
		case strings.HasPrefix(line, ":"):
			f.comments = append(f.comments, strings.TrimPrefix(line[1:], " "))
		case strings.HasPrefix(line, "id: "):
			f.id, f.hasID = line[4:], true
		case strings.HasPrefix(line, "retry: "):
			f.retry = line[7:]
		case strings.HasPrefix(line, "event: "):
			f.event = line[7:]
		case strings.HasPrefix(line, "data: "):
			if f.data != "" {
				f.data += "\n"
			}
			f.data += line[6:]
		}
		started = true
	}
}

// client is one SSE subscriber over real HTTP.
type client struct {
	resp   *http.Response
	frames chan frame
	cancel context.CancelFunc
	lastID string // the Last-Event-ID an EventSource would send
}

// connect opens GET /stream?query with optional header pairs and fails
// the test unless the answer is a 200 event stream.
func (r *rig) connect(t testing.TB, query string, hdr ...string) *client {
	t.Helper()
	resp, cancel := r.get(t, query, hdr...)
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		cancel()
		t.Fatalf("GET /stream?%s: %d %s", query, resp.StatusCode, b)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	c := &client{resp: resp, frames: make(chan frame, 4096), cancel: cancel}
	go readFrames(resp.Body, c.frames)
	t.Cleanup(c.close)
	return c
}

func (r *rig) get(t testing.TB, query string, hdr ...string) (*http.Response, context.CancelFunc) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.srv.URL+"/stream?"+query, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := r.srv.Client().Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	return resp, cancel
}

// close drops the connection from the client side (a forced disconnect).
func (c *client) close() {
	c.cancel()
	c.resp.Body.Close()
}

// next returns the next frame, or ok=false at end of stream or timeout.
func (c *client) next(t testing.TB, d time.Duration) (frame, bool) {
	t.Helper()
	select {
	case f, ok := <-c.frames:
		if ok && f.hasID {
			c.lastID = f.id
		}
		return f, ok
	case <-time.After(d):
		return frame{}, false
	}
}

// untilLive returns the frames before the ": live" comment.
func (c *client) untilLive(t testing.TB) []frame {
	t.Helper()
	var out []frame
	for {
		f, ok := c.next(t, 10*time.Second)
		if !ok {
			t.Fatal("stream ended or stalled before going live")
		}
		if f.comment("live") {
			return out
		}
		out = append(out, f)
	}
}

// events reads until n event frames arrived (meta and comments skipped)
// and returns their sequences.
func (c *client) events(t testing.TB, n int) []int64 {
	t.Helper()
	var seqs []int64
	for len(seqs) < n {
		f, ok := c.next(t, 10*time.Second)
		if !ok {
			t.Fatalf("got %d of %d events before the stream ended or stalled", len(seqs), n)
		}
		if f.isEvent() {
			seqs = append(seqs, f.seq(t))
		}
	}
	return seqs
}

// decode returns the event a frame carries.
func decode(t testing.TB, f frame) *protocol.Event {
	t.Helper()
	e, err := protocol.DecodeJSON([]byte(f.data))
	if err != nil {
		t.Fatalf("frame data is not an event: %v\n%s", err, f.data)
	}
	return e
}
