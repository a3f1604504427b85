package stream_test

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay"
	"github.com/anp2net/relay/relay/relaytest"
	"github.com/anp2net/relay/relay/stream"
	"github.com/anp2net/relay/tasks/taskstest"
)

const vectorTime = relaytest.VectorTime

// startRelay runs a relay with the stream module.
func startRelay(t *testing.T, tweak ...func(*relay.Config)) *relaytest.Relay {
	return relaytest.Start(t, []relay.Module{stream.NewModule()}, tweak...)
}

// TestStreamOverRelay subscribes to GET /stream on a real relay, publishes,
// and reads the frame; a hidden event reaches its author as an event: meta
// notice and never reaches an anonymous subscriber.
func TestStreamOverRelay(t *testing.T) {
	r := startRelay(t)
	if a := r.Do(t, "GET", "/stream?filter=color:red", "", nil); a.Status != 400 || a.Code(t) != "filter-axis-unknown" {
		t.Fatalf("bad filter: %d %s", a.Status, a.Body)
	}
	a := taskstest.Pool(4)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	open := func(path string, who *taskstest.Agent) *bufio.Scanner {
		req, _ := http.NewRequestWithContext(ctx, "GET", r.URL+path, nil)
		if who != nil {
			req.Header.Set("Authorization", r.Auth(who.Key, "GET", path, vectorTime))
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("GET %s: %v %v", path, err, resp)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return bufio.NewScanner(resp.Body)
	}
	next := func(sc *bufio.Scanner, prefix string) string {
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), prefix) {
				return sc.Text()
			}
		}
		t.Fatalf("stream ended before a %q line: %v", prefix, sc.Err())
		return ""
	}
	anon := open("/stream?kinds=1", nil)
	author := open("/stream?kinds=1", &a[0])
	post := a[0].Sign(protocol.KindPost, vectorTime-50, "watch this")
	r.PostAll(t, []*protocol.Event{post}, 1)
	if d := next(anon, "data:"); !strings.Contains(d, post.ID) {
		t.Fatalf("anonymous frame: %s", d)
	}
	if d := next(author, "data:"); !strings.Contains(d, post.ID) {
		t.Fatalf("author frame: %s", d)
	}
	var flags []*protocol.Event
	for _, f := range a[1:4] {
		flags = append(flags, f.Sign(protocol.KindFlag, vectorTime-40, map[string]any{"category": "spam"}, []string{"e", post.ID}))
	}
	r.PostAll(t, flags, 1)
	// Reading the flags publishes a fresh moderation snapshot, whose
	// changes reach the author's stream.
	relaytest.Eventually(t, "post hidden", func() bool {
		return strings.Contains(string(r.Do(t, "GET", "/events/"+post.ID+"/flags", "", nil).Body), `"visibility":"hidden"`)
	})
	if ev := next(author, "event:"); ev != "event: meta" {
		t.Fatalf("author got %q", ev)
	}
	if d := next(author, "data:"); !strings.Contains(d, post.ID) || !strings.Contains(d, `"hidden":true`) {
		t.Fatalf("meta notice: %s", d)
	}
}

// TestStreamsPerAddressCap: one client address gets MaxStreamsPerIP streams;
// the next is 429 with Retry-After, and closing one frees its slot.
func TestStreamsPerAddressCap(t *testing.T) {
	r := startRelay(t, func(c *relay.Config) { c.MaxStreamsPerIP = 2 })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	open := func() (*http.Response, context.CancelFunc) {
		sctx, stop := context.WithCancel(ctx)
		req, _ := http.NewRequestWithContext(sctx, "GET", r.URL+"/stream", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp, func() { stop(); resp.Body.Close() }
	}
	var closers []context.CancelFunc
	for i := 0; i < 2; i++ {
		resp, stop := open()
		closers = append(closers, stop)
		if resp.StatusCode != 200 {
			t.Fatalf("stream %d: %d", i, resp.StatusCode)
		}
	}
	// The answer's head goes out before the hub holds the subscriber.
	relaytest.Eventually(t, "anp2_stream_subscribers 2", func() bool {
		m := r.Do(t, "GET", "/metrics", "", nil)
		return strings.Contains(string(m.Body), "\nanp2_stream_subscribers 2\n")
	})
	third := r.Do(t, "GET", "/stream", "", nil)
	if third.Status != 429 || third.Code(t) != stream.CodeRateLimited || third.Header.Get("Retry-After") == "" {
		t.Fatalf("third stream: %d %s %q", third.Status, third.Body, third.Header.Get("Retry-After"))
	}
	closers[0]()
	relaytest.Eventually(t, "a slot is freed", func() bool {
		resp, stop := open()
		defer stop()
		return resp.StatusCode == 200
	})
	closers[1]()
}
