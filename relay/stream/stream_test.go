package stream

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anp2net/relay/protocol"
)

// TestLiveStreamFilters: several subscribers with different filters each
// receive exactly the newly stored events their filter matches, in log
// order, as compact JSON that decodes to the signed event.
func TestLiveStreamFilters(t *testing.T) {
	r := newRig(t, Options{})
	s := newSample()
	old := r.append(t, mk(key(9), 900, 1, "before anyone subscribed"))
	queries := []string{
		"",
		"kinds=1",
		"filter=kind:1,t:weather",
		"filter=t:weather,cap:translate",
		"authors=" + s.a + "&filter=kind:50",
		"p=" + s.a,
		"filter=e:" + s.ev[0].ID,
		"kinds=0,7&since=1003",
	}
	clients := make([]*client, len(queries))
	for i, q := range queries {
		clients[i] = r.connect(t, q)
		open := clients[i].untilLive(t)
		if len(open) != 0 {
			t.Fatalf("%q: live-only stream replayed %d frames", q, len(open))
		}
		if clients[i].lastID != strconv.FormatInt(old, 10) {
			t.Fatalf("%q: opening position %q, want the log's end %d", q, clients[i].lastID, old)
		}
	}
	seqOf := map[string]int64{}
	for _, e := range s.ev {
		seqOf[e.ID] = r.append(t, e)
	}
	last := r.append(t, mk(key(9), 3000, 1, "end marker", []string{"t", "end"}))
	for i, q := range queries {
		f, err := ParseFilter(mustQuery(t, q))
		if err != nil {
			t.Fatal(err)
		}
		var want []int64
		for _, e := range s.ev {
			if f.Match(e) {
				want = append(want, seqOf[e.ID])
			}
		}
		var got []int64
		for len(got) < len(want) {
			fr, ok := clients[i].next(t, 5*time.Second)
			if !ok {
				t.Fatalf("%q: stream stalled after %v, want %v", q, got, want)
			}
			if fr.isEvent() {
				e := decode(t, fr)
				if e.CheckSig() != nil || seqOf[e.ID] != fr.seq(t) || !f.Match(e) {
					t.Fatalf("%q: frame %s carries %s", q, fr.id, fr.data)
				}
				got = append(got, fr.seq(t))
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("%q: got %v, want %v", q, got, want)
		}
		if q == "" {
			if fr, _ := clients[i].next(t, 5*time.Second); fr.seq(t) != last {
				t.Errorf("unfiltered stream: next frame %+v, want the end marker %d", fr, last)
			}
		}
	}
}

func mustQuery(t testing.TB, q string) url.Values {
	t.Helper()
	v, err := url.ParseQuery(q)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestStreamRejectsBadRequests: errors come back before the stream starts,
// with the relay's {"detail","code"} body.
func TestStreamRejectsBadRequests(t *testing.T) {
	r := newRig(t, Options{})
	for _, tc := range []struct {
		query  string
		hdr    []string
		status int
		code   string
	}{
		{"filter=colour:red", nil, 400, CodeFilterAxisUnknown},
		{"filter=kind:one", nil, 400, CodeFilterValueInvalid},
		{"limit=5", nil, 400, CodeUnknownParam},
		{"", []string{"Last-Event-ID", "yesterday"}, 400, CodeBadParameter},
	} {
		resp, cancel := r.get(t, tc.query, tc.hdr...)
		var body struct{ Detail, Code string }
		_ = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		cancel()
		if resp.StatusCode != tc.status || body.Code != tc.code || body.Detail == "" {
			t.Errorf("%q %v: %d %+v, want %d %s", tc.query, tc.hdr, resp.StatusCode, body, tc.status, tc.code)
		}
	}
}

// TestResumeAfterForcedDisconnects: while four writers append, a filtered
// subscriber is cut off again and again and resumes with the last id it
// saw; what it receives across all connections is exactly the matching
// events of the log, each once, in order.
func TestResumeAfterForcedDisconnects(t *testing.T) {
	r := newRig(t, Options{})
	const writers, perWriter = 4, 150
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k := key(100 + w)
			for i := range perWriter {
				kind := int64(1 + i%2)
				r.append(t, mk(k, int64(10_000+i), kind, fmt.Sprintf("w%d i%d", w, i), []string{"t", "load"}))
				if i%10 == 0 {
					time.Sleep(time.Millisecond)
				}
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()

	const query = "filter=kind:1,t:load&after=0"
	flt, _ := ParseFilter(mustQuery(t, query))
	rng := rand.New(rand.NewPCG(1, 2))
	var got []int64
	lastID, reconnects := "", 0
	for {
		var c *client
		if lastID == "" {
			c = r.connect(t, query)
		} else {
			c = r.connect(t, query, "Last-Event-ID", lastID)
			reconnects++
		}
		budget := 5 + rng.IntN(60)
		finished := false
		for budget > 0 {
			f, ok := c.next(t, 300*time.Millisecond)
			if !ok {
				finished = isClosed(done) && len(got) == len(matching(t, r, flt))
				break
			}
			if f.isEvent() {
				got = append(got, f.seq(t))
				budget--
			}
		}
		if c.lastID != "" {
			lastID = c.lastID
		}
		c.close() // forced disconnect, mid-stream
		if finished {
			break
		}
	}
	want := matching(t, r, flt)
	if len(want) != writers*perWriter/2 {
		t.Fatalf("log holds %d matching events, want %d", len(want), writers*perWriter/2)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("after %d reconnects received %d events, want %d (first difference at %d)", reconnects, len(got), len(want), firstDiff(got, want))
	}
	t.Logf("%d events over %d reconnects, no gap, no duplicate", len(got), reconnects)
}

// matching returns the sequences of the stored events f matches.
func matching(t testing.TB, r *rig, f *Filter) []int64 {
	var want []int64
	err := r.store.Export(context.Background(), 0, func(int64) error { return nil }, func(seq int64, body []byte) error {
		e, err := protocol.DecodeJSON(body)
		if err != nil {
			return err
		}
		if f.Match(e) {
			want = append(want, seq)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return want
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

func firstDiff(a, b []int64) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestResumeHandOver drives the replay-to-live hand-over deterministically:
// events committed after the subscriber registered but before the log's
// end is read are both queued live and replayed (must not repeat), and
// events committed after the end was read are only queued (must not be
// lost).
func TestResumeHandOver(t *testing.T) {
	r := newRig(t, Options{})
	k := key(7)
	for i := range 5 {
		r.append(t, mk(k, int64(100+i), 1, "old"))
	}
	var once, onceBound sync.Once
	var raced []int64
	r.mu.Lock()
	r.beforeExport = func() {
		once.Do(func() { raced = append(raced, r.append(t, mk(k, 200, 1, "committed before the bound"))) })
	}
	r.atBound = func(int64) {
		onceBound.Do(func() { raced = append(raced, r.append(t, mk(k, 201, 1, "committed after the bound"))) })
	}
	r.mu.Unlock()
	c := r.connect(t, "after=2")
	got := c.events(t, 5)
	if want := []int64{3, 4, 5, raced[0], raced[1]}; !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	after := r.append(t, mk(k, 202, 1, "live"))
	if f, _ := c.next(t, 5*time.Second); !f.isEvent() || f.seq(t) != after {
		t.Fatalf("next frame %+v, want event %d (no duplicate of %v)", f, after, raced)
	}
}

// TestLiveOnlyHandOver: a stream opened without a resume point gets every
// event committed after it subscribed, including one committed before the
// hub read where the log ends (that read must not hide it).
func TestLiveOnlyHandOver(t *testing.T) {
	r := newRig(t, Options{})
	k := key(8)
	r.append(t, mk(k, 100, 1, "old"))
	var once sync.Once
	var raced int64
	r.mu.Lock()
	r.beforeExport = func() {
		once.Do(func() { raced = r.append(t, mk(k, 200, 1, "committed between subscribing and the bound")) })
	}
	r.mu.Unlock()
	c := r.connect(t, "")
	if got := c.events(t, 1); got[0] != raced {
		t.Fatalf("got %v, want the raced event %d", got, raced)
	}
	after := r.append(t, mk(k, 202, 1, "live"))
	if f, _ := c.next(t, 5*time.Second); !f.isEvent() || f.seq(t) != after {
		t.Fatalf("next frame %+v, want event %d", f, after)
	}
}

// TestResumeBeyondTheLog: a Last-Event-ID past the log's end (another
// relay's, or a wiped database) is taken as the end, not waited for.
func TestResumeBeyondTheLog(t *testing.T) {
	r := newRig(t, Options{})
	r.append(t, mk(key(1), 100, 1, "one"))
	c := r.connect(t, "", "Last-Event-ID", "999999")
	c.untilLive(t)
	if c.lastID != "1" {
		t.Fatalf("position %q, want 1", c.lastID)
	}
	seq := r.append(t, mk(key(1), 101, 1, "two"))
	if got := c.events(t, 1); got[0] != seq {
		t.Fatalf("got %v, want %d", got, seq)
	}
}

// TestSlowSubscriberIsDropped: a subscriber that stops reading is cut off
// once its buffer is full, without holding up the writer; its last frame
// names the last id it was given, and resuming from there delivers the
// rest exactly.
func TestSlowSubscriberIsDropped(t *testing.T) {
	testSlowSubscriberIsDropped(t, Options{Buffer: 4, WriteTimeout: 30 * time.Second})
}

// TestSlowSubscriberIsDroppedByBytes: a reader that leaves frames untaken
// is let go once they pass Options.QueueBytes, well before the frame cap,
// and resumes without loss; the hub never held much more than that.
func TestSlowSubscriberIsDroppedByBytes(t *testing.T) {
	r := testSlowSubscriberIsDropped(t, Options{QueueBytes: 256 << 10, WriteTimeout: 30 * time.Second})
	if st := r.hub.Stats(); st.PeakQueuedBytes > 256<<10+70_000 || st.PeakQueuedBytes == 0 {
		t.Fatalf("peak queued %d bytes, want at most the 256 KiB budget plus one frame", st.PeakQueuedBytes)
	}
}

func testSlowSubscriberIsDropped(t *testing.T, opts Options) *rig {
	r := newRig(t, opts)
	conn, err := net.Dial("tcp", r.srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET /stream HTTP/1.1\r\nHost: relay\r\n\r\n")
	waitFor(t, func() bool { return r.hub.Stats().Subscribers == 1 })

	big := strings.Repeat("x", 60_000)
	var seqs []int64
	start := time.Now()
	for i := 0; r.hub.Stats().Dropped == 0; i++ {
		if i == 1000 {
			t.Fatal("the stalled subscriber was never dropped")
		}
		seqs = append(seqs, r.append(t, mk(key(3), int64(i), 1, big)))
	}
	t.Logf("dropped after %d events of 60 kB (%s); the writer never waited", len(seqs), time.Since(start).Round(time.Millisecond))
	for i := range 3 { // the log goes on after the drop
		seqs = append(seqs, r.append(t, mk(key(3), int64(5000+i), 1, big)))
	}

	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	frames := make(chan frame, 1024)
	go readFrames(resp.Body, frames)
	var got []int64
	var last frame
	for f := range frames {
		if f.isEvent() {
			got = append(got, f.seq(t))
		}
		last = f
	}
	if len(got) == 0 || len(got) > len(seqs) || !slices.Equal(got, seqs[:len(got)]) {
		t.Fatalf("received %v, want a prefix of %v", got, seqs)
	}
	resumeAt := strconv.FormatInt(got[len(got)-1], 10)
	if want := "too slow, resume with Last-Event-ID " + resumeAt; !last.comment(want) {
		t.Fatalf("final frame %+v, want comment %q", last, want)
	}
	c := r.connect(t, "", "Last-Event-ID", resumeAt)
	if rest := c.events(t, len(seqs)-len(got)); !slices.Equal(rest, seqs[len(got):]) {
		t.Fatalf("resumed with %v, want %v", rest, seqs[len(got):])
	}
	return r
}

func waitFor(t testing.TB, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached in 10 s")
		}
	}
}

// TestSubscriberCap: beyond MaxSubscribers the answer is 503 with
// Retry-After; a slot frees when a stream ends.
func TestSubscriberCap(t *testing.T) {
	r := newRig(t, Options{MaxSubscribers: 2, RetryAfter: 3 * time.Second})
	a := r.connect(t, "")
	r.connect(t, "kinds=1")
	resp, cancel := r.get(t, "")
	var body struct{ Detail, Code string }
	_ = json.NewDecoder(resp.Body).Decode(&body)
	resp.Body.Close()
	cancel()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "3" || body.Code != CodeTooManySubscribers {
		t.Fatalf("third subscriber: %d Retry-After=%q %+v", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	t0 := time.Now()
	a.close()
	waitFor(t, func() bool { return r.hub.Stats().Subscribers == 1 })
	t.Logf("slot freed in %s", time.Since(t0))
	r.connect(t, "").untilLive(t)
}

// TestKeepalive: an idle stream gets keepalive comments; one whose filter
// skipped events gets its position moved on with them, so a resume does
// not rescan what it already passed.
func TestKeepalive(t *testing.T) {
	r := newRig(t, Options{Keepalive: 50 * time.Millisecond})
	all := r.connect(t, "")
	all.untilLive(t)
	f, ok := all.next(t, 5*time.Second)
	if !ok || !f.comment("keepalive") || f.hasID {
		t.Fatalf("idle stream: %+v, want a bare keepalive", f)
	}
	none := r.connect(t, "kinds=7")
	none.untilLive(t)
	var last int64
	for i := range 3 {
		last = r.append(t, mk(key(1), int64(i), 1, "not kind 7"))
	}
	if got := all.events(t, 3); got[2] != last {
		t.Fatalf("unfiltered got %v", got)
	}
	for {
		f, ok := none.next(t, 5*time.Second)
		if !ok {
			t.Fatal("no keepalive moved the position")
		}
		if f.isEvent() {
			t.Fatalf("kinds=7 received %+v", f)
		}
		if f.comment("keepalive") && f.hasID && f.seq(t) == last {
			break
		}
	}
}

// TestMetaNotices: Notify reaches only the streams authenticated as that
// agent, as event: meta frames; Options.Notices greets a connecting author.
func TestMetaNotices(t *testing.T) {
	a, b := protocol.AgentIDOf(key(1)), protocol.AgentIDOf(key(2))
	pending := `{"id":"` + strings.Repeat("0", 64) + `","meta":{"hidden":true,"flag_count":3}}`
	r := newRig(t, Options{Notices: func(_ context.Context, reader string) ([][]byte, error) {
		if reader == a {
			return [][]byte{[]byte(pending)}, nil
		}
		return nil, nil
	}})
	ca := r.connect(t, "kinds=1", "X-Reader", a)
	opening := ca.untilLive(t)
	if len(opening) != 1 || opening[0].event != "meta" || opening[0].data != pending {
		t.Fatalf("author's opening frames %+v, want the pending notice", opening)
	}
	cb := r.connect(t, "", "X-Reader", b)
	anon := r.connect(t, "")
	cb.untilLive(t)
	anon.untilLive(t)

	notice := `{"id":"` + strings.Repeat("1", 64) + `","meta":{"hidden":false}}`
	r.hub.Notify(a, []byte(notice))
	r.hub.Notify(a, []byte("two\nlines")) // split into data lines, rejoined by the client
	seq := r.append(t, mk(key(3), 1, 1, "after the notices"))

	for i, want := range []string{notice, "two\nlines"} {
		f, ok := ca.next(t, 5*time.Second)
		if !ok || f.event != "meta" || f.data != want || f.hasID {
			t.Fatalf("author frame %d: %+v, want meta %q without id", i, f, want)
		}
	}
	for name, c := range map[string]*client{"author": ca, "other agent": cb, "anonymous": anon} {
		f, ok := c.next(t, 5*time.Second)
		if !ok || !f.isEvent() || f.seq(t) != seq {
			t.Fatalf("%s: next frame %+v, want event %d and no meta", name, f, seq)
		}
	}
}

// TestVisible: Options.Visible decides per reader, on replay and live.
func TestVisible(t *testing.T) {
	author := protocol.AgentIDOf(key(5))
	r := newRig(t, Options{Visible: func(reader string, e *protocol.Event) bool {
		return e.Content != "hidden" || reader == e.AgentID
	}})
	s1 := r.append(t, mk(key(5), 1, 1, "hidden"))
	s2 := r.append(t, mk(key(5), 2, 1, "shown"))
	anon := r.connect(t, "after=0")
	own := r.connect(t, "after=0", "X-Reader", author)
	s3 := r.append(t, mk(key(5), 3, 1, "hidden"))
	s4 := r.append(t, mk(key(5), 4, 1, "shown"))
	if got := anon.events(t, 2); !slices.Equal(got, []int64{s2, s4}) {
		t.Errorf("anonymous got %v", got)
	}
	if got := own.events(t, 4); !slices.Equal(got, []int64{s1, s2, s3, s4}) {
		t.Errorf("author got %v", got)
	}
}

// TestClose: closing the hub ends every stream with a resume hint and
// refuses new ones with 503.
func TestClose(t *testing.T) {
	r := newRig(t, Options{})
	seq := r.append(t, mk(key(1), 1, 1, "one"))
	c := r.connect(t, "")
	c.untilLive(t)
	r.hub.Close()
	var last frame
	for {
		f, ok := c.next(t, 5*time.Second)
		if !ok {
			break
		}
		last = f
	}
	if want := fmt.Sprintf("relay shutting down, resume with Last-Event-ID %d", seq); !last.comment(want) {
		t.Fatalf("last frame %+v, want %q", last, want)
	}
	resp, cancel := r.get(t, "")
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	cancel()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("after Close: %d", resp.StatusCode)
	}
}

// TestReplayFailure: when the log cannot be read the stream ends at once
// with a comment, naming the resume point when there is one.
func TestReplayFailure(t *testing.T) {
	r := newRig(t, Options{})
	r.append(t, mk(key(1), 1, 1, "one"))
	r.mu.Lock()
	r.exportErr = errors.New("disk on fire")
	r.mu.Unlock()
	for _, tc := range []struct{ query, want string }{
		{"after=0", "replay failed, resume with Last-Event-ID 0"},
		{"", "log unavailable, reconnect later"},
	} {
		c := r.connect(t, tc.query)
		f, ok := c.next(t, 5*time.Second)
		if !ok || !f.comment(tc.want) || f.hasID {
			t.Fatalf("%q: frame %+v, want only the comment %q", tc.query, f, tc.want)
		}
		if f, ok := c.next(t, 5*time.Second); ok {
			t.Fatalf("%q: stream went on with %+v", tc.query, f)
		}
	}
}
