package ws_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/relaytest"
	"github.com/anp2net/relay/relay/ws"
	"github.com/anp2net/relay/tasks/taskstest"
	"github.com/coder/websocket"
)

// seedClient is a real WebSocket client of GET /subscribe.
type seedClient struct {
	t   *testing.T
	c   *websocket.Conn
	ctx context.Context
}

func dialSeed(t *testing.T, r *relaytest.Relay) *seedClient {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(r.URL, "http")+"/subscribe", nil)
	if err != nil {
		t.Fatalf("dial /subscribe: %v", err)
	}
	t.Cleanup(func() { c.CloseNow() })
	return &seedClient{t: t, c: c, ctx: ctx}
}

func (c *seedClient) send(s string) {
	c.t.Helper()
	if err := c.c.Write(c.ctx, websocket.MessageText, []byte(s)); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

// seedMsg is a relay frame of the seed's dialect.
type seedMsg struct {
	Action   string          `json:"action"`
	SubID    string          `json:"sub_id"`
	ID       string          `json:"id"`
	Event    *protocol.Event `json:"event"`
	Seq      int64           `json:"seq"`
	Through  *int64          `json:"through"`
	Accepted bool            `json:"accepted"`
	Message  string          `json:"message"`
}

func (c *seedClient) next() seedMsg {
	c.t.Helper()
	_, b, err := c.c.Read(c.ctx)
	if err != nil {
		c.t.Fatalf("read: %v", err)
	}
	var m seedMsg
	if err := json.Unmarshal(b, &m); err != nil || m.Action == "" {
		c.t.Fatalf("frame %s: %v", b, err)
	}
	return m
}

// TestSeedDialect: a client written from the seed's §5.3 subscribes with
// {"action":"sub"}, gets the stored match, the end of stored events and
// a live event as {"action":"event","sub_id","event"}, publishes with
// {"action":"event","event"}, resumes with after= and unsubscribes.
func TestSeedDialect(t *testing.T) {
	r, _ := start(t, ws.Options{})
	a := taskstest.NewAgent("seed-client")
	old := a.Sign(protocol.KindPost, vt-20, "stored", []string{"t", "weather"})
	r.Post(t, old)
	c := dialSeed(t, r)
	c.send(`{"action":"sub","id":"w","filter":{"kinds":[1],"t":"weather"}}`)
	if m := c.next(); m.Action != "event" || m.SubID != "w" || m.Event == nil || m.Event.ID != old.ID {
		t.Fatalf("stored match: %+v", m)
	}
	eose := c.next()
	if eose.Action != "eose" || eose.SubID != "w" || eose.Through == nil {
		t.Fatalf("end of stored events: %+v", eose)
	}
	live := a.Sign(protocol.KindPost, vt-10, "live", []string{"t", "weather"})
	b, _ := json.Marshal(map[string]any{"action": "event", "event": live})
	c.send(string(b))
	var ok, ev seedMsg
	for _, m := range []seedMsg{c.next(), c.next()} { // the OK and the delivery, in either order
		switch m.Action {
		case "ok":
			ok = m
		case "event":
			ev = m
		}
	}
	if !ok.Accepted || ok.ID != live.ID || ev.Event == nil || ev.Event.ID != live.ID || ev.Seq <= *eose.Through {
		t.Fatalf("publish and live delivery: ok %+v event %+v", ok, ev)
	}
	c.send(`{"action":"unsub","id":"w"}`)
	if m := c.next(); m.Action != "closed" || m.SubID != "w" || m.Message != "" {
		t.Fatalf("unsub: %+v", m)
	}
	// Resume on a new connection: only what came after the seq seen.
	c2 := dialSeed(t, r)
	c2.send(`{"action":"sub","id":"r","filter":{"t":"weather","after":` + jsonInt(*eose.Through) + `}}`)
	if m := c2.next(); m.Action != "event" || m.Event.ID != live.ID {
		t.Fatalf("resume: %+v", m)
	}
	if m := c2.next(); m.Action != "eose" {
		t.Fatalf("resume end: %+v", m)
	}
	// Bad frames are notices, and the /ws limits apply.
	c2.send(`["REQ","x"]`)
	if m := c2.next(); m.Action != "notice" || !strings.HasPrefix(m.Message, ws.CodeInvalidFrame) {
		t.Fatalf("a /ws frame on /subscribe: %+v", m)
	}
	c2.send(`{"action":"sub","id":"k","filter":{"kinds":[]}}`)
	if m := c2.next(); m.Action != "closed" || m.SubID != "k" || !strings.HasPrefix(m.Message, ws.CodeInvalidFrame) {
		t.Fatalf("an empty filter list: %+v", m)
	}
}

func jsonInt(n int64) string { b, _ := json.Marshal(n); return string(b) }
