package discovery_test

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay"
	"github.com/anp2net/relay/relay/discovery"
	"github.com/anp2net/relay/relay/relaytest"
	"github.com/anp2net/relay/relay/stream"
	"github.com/anp2net/relay/tasks/taskstest"
)

// TestFeedPush: an agent whose profile says "feed_push": true gets its
// feed as a relay-signed kind 1200 addressed to it (seed §12.5), which its
// GET /stream?p= subscription delivers; once per cadence; an agent that
// did not ask gets none.
func TestFeedPush(t *testing.T) {
	seed := sha256.Sum256([]byte("feedpush relay key"))
	relayKey := ed25519.NewKeyFromSeed(seed[:])
	disc := discovery.NewModule()
	push := discovery.NewFeedPush(disc, time.Hour)
	r := relaytest.Start(t, []relay.Module{disc, push, stream.NewModule()}, func(c *relay.Config) { c.RelayKey = relayKey })
	a := taskstest.Pool(3)
	alice, bob, carol := a[0], a[1], a[2]
	now := r.Clock.Now().Unix()
	bobPost := bob.Sign(protocol.KindPost, now-600, "market update")
	r.PostAll(t, []*protocol.Event{
		alice.Sign(protocol.KindProfile, now-3600, map[string]any{"name": "alice", "feed_push": true}),
		carol.Sign(protocol.KindProfile, now-3600, map[string]any{"name": "carol"}),
		alice.Sign(protocol.KindSubscribe, now-1800, "", []string{"p", bob.ID}),
		carol.Sign(protocol.KindSubscribe, now-1800, "", []string{"p", bob.ID}),
		bobPost,
	}, 1)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", r.URL+"/stream?kinds=1200", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("stream: %v %v", err, resp)
	}
	defer resp.Body.Close()
	frames := make(chan protocol.Event, 16)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var e protocol.Event
			if line, ok := strings.CutPrefix(sc.Text(), "data: "); ok && json.Unmarshal([]byte(line), &e) == nil && e.ID != "" {
				frames <- e
			}
		}
	}()

	if n, err := push.Push(ctx); n != 1 || err != nil {
		t.Fatalf("first cycle pushed %d (%v), want 1", n, err)
	}
	var got protocol.Event
	select {
	case got = <-frames:
	case <-time.After(30 * time.Second):
		t.Fatal("no kind 1200 on the stream")
	}
	if got.Kind != discovery.KindFeed || got.AgentID != protocol.AgentIDOf(relayKey) || got.TagValues("p")[0] != alice.ID ||
		!strings.Contains(got.Content, bobPost.ID) {
		t.Fatalf("push: %+v", got)
	}
	if n, _ := push.Push(ctx); n != 0 {
		t.Fatalf("a second cycle within the hour pushed %d", n)
	}
	r.Clock.Add(time.Hour)
	if n, _ := push.Push(ctx); n != 1 {
		t.Fatalf("the next hour pushed %d, want 1", n)
	}
	var evs []protocol.Event
	json.Unmarshal(r.Do(t, "GET", "/events?kinds=1200&p="+carol.ID, "", nil).Body, &evs)
	if len(evs) != 0 {
		t.Fatalf("carol never asked: %v", evs)
	}
}
