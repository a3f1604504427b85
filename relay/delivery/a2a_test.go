package delivery_test

import (
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/protocol/sigverify"
	"github.com/anp2net/relay/relay"
	"github.com/anp2net/relay/relay/delivery"
	"github.com/anp2net/relay/relay/relaytest"
	"github.com/anp2net/relay/tasks/taskstest"
)

// sent is one message/send an A2A agent received.
type sent struct {
	key, messageID, method string
	verified               bool
	event                  protocol.Event
	attempt                delivery.Attempt
}

// agent is a real A2A agent on loopback: an agent card at /card naming
// its JSON-RPC endpoint /rpc, which takes message/send. answer picks, per
// request (n counts from 1), a JSON-RPC error code (0: a result).
type agent struct {
	*httptest.Server
	cards  atomic.Int64
	mu     sync.Mutex
	got    []sent
	answer func(n int) int
}

func newAgent(t *testing.T, answer func(n int) int) *agent {
	ag := &agent{answer: answer}
	sv := sigverify.New(1 << 20)
	ag.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/card" {
			ag.cards.Add(1)
			json.NewEncoder(w).Encode(map[string]any{"name": "test agent", "protocolVersion": "0.3.0", "version": "1",
				"url": ag.URL + "/rpc", "preferredTransport": "JSONRPC", "capabilities": map[string]any{},
				"defaultInputModes": []string{"application/json"}, "defaultOutputModes": []string{"text/plain"}, "skills": []any{}})
			return
		}
		body, _ := io.ReadAll(r.Body)
		var req struct {
			ID     json.RawMessage
			Method string
			Params struct {
				Message struct {
					MessageID string
					Parts     []struct {
						Kind string
						Data json.RawMessage
					}
					Metadata map[string]delivery.Attempt
				}
			}
		}
		_ = json.Unmarshal(body, &req)
		sig, _ := hex.DecodeString(r.Header.Get(delivery.HeaderSignature))
		s := sent{key: r.Header.Get(delivery.HeaderIdempotencyKey), method: req.Method, messageID: req.Params.Message.MessageID,
			attempt:  req.Params.Message.Metadata[delivery.A2AMetadataKey],
			verified: sv.Verify(relayKey.Public().(ed25519.PublicKey), delivery.SignedMessage(r.Header.Get(delivery.HeaderTimestamp), body), sig)}
		if parts := req.Params.Message.Parts; len(parts) == 1 && parts[0].Kind == "data" {
			_ = json.Unmarshal(parts[0].Data, &s.event)
		}
		ag.mu.Lock()
		ag.got = append(ag.got, s)
		n := len(ag.got)
		ag.mu.Unlock()
		if code := ag.answer(n); code != 0 {
			json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": req.ID, "error": map[string]any{"code": code, "message": "agent busy"}})
			return
		}
		json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": req.ID, "result": map[string]any{
			"kind": "message", "role": "agent", "messageId": "ack-" + s.messageID, "parts": []any{map[string]any{"kind": "text", "text": "ok"}}}})
	}))
	t.Cleanup(ag.Close)
	return ag
}

func (ag *agent) sends() []sent {
	ag.mu.Lock()
	defer ag.mu.Unlock()
	return append([]sent(nil), ag.got...)
}

// TestA2ATargetDelivers: a trigger whose target is an A2A agent card
// delivers each match as message/send to the card's JSON-RPC url: the
// event as the one data part, the idempotency key as the messageId and
// header, the relay's signature over the body. A JSON-RPC error is a
// failed attempt, retried after the backoff with the same messageId;
// the card is read once per cardTTL (5 minutes of the relay clock).
func TestA2ATargetDelivers(t *testing.T) {
	r, _ := start(t, delivery.Options{})
	ag := newAgent(t, func(n int) int {
		if n == 3 {
			return -32603
		}
		return 0
	})
	a := taskstest.Pool(2)
	id := addTrigger(t, r, a[0], `{"match":{"kinds":[1],"tags":{"t":["a2a"]}},"target":{"type":"a2a","url":"`+ag.URL+`/card"}}`)
	var evs []*protocol.Event
	for i := range 2 {
		e := a[1].Sign(protocol.KindPost, vt-10+int64(i), "hello agent", []string{"t", "a2a"})
		evs = append(evs, e)
		r.PostAll(t, []*protocol.Event{e, a[1].Sign(protocol.KindPost, vt-20+int64(i), "not for it")}, 2)
	}
	relaytest.Eventually(t, "two delivered", func() bool { return len(deliveries(t, r, a[0], "delivered")) == 2 })
	got := ag.sends()
	if len(got) != 2 || ag.cards.Load() != 1 {
		t.Fatalf("agent got %d messages, card read %d times", len(got), ag.cards.Load())
	}
	for _, s := range got {
		key := delivery.IdempotencyKey(s.event.ID, id)
		if s.method != "message/send" || s.key != key || s.messageID != key || !s.verified ||
			s.attempt.TriggerID != id || s.attempt.IdempotencyKey != key || s.attempt.Attempt != 1 || s.event.Content != "hello agent" {
			t.Fatalf("message %+v", s)
		}
	}
	for _, d := range deliveries(t, r, a[0], "delivered") {
		if d.TargetType != delivery.TargetA2A || d.Target != ag.URL+"/card" {
			t.Fatalf("delivery %+v", d)
		}
	}

	// A JSON-RPC error: escalated, then delivered again with the same key.
	e := a[1].Sign(protocol.KindPost, vt-5, "third", []string{"t", "a2a"})
	r.PostAll(t, []*protocol.Event{e}, 1)
	relaytest.Eventually(t, "first attempt failed", func() bool {
		ds := deliveries(t, r, a[0], "escalated")
		return len(ds) == 1 && strings.Contains(ds[0].LastError, "JSON-RPC error -32603")
	})
	r.Clock.Add(2 * time.Second)
	relaytest.Eventually(t, "retried", func() bool { return len(deliveries(t, r, a[0], "delivered")) == 3 })
	got = ag.sends()
	if len(got) != 4 || got[2].messageID != got[3].messageID || got[3].key != delivery.IdempotencyKey(e.ID, id) || got[3].attempt.Attempt != 2 {
		t.Fatalf("retry: %+v", got[2:])
	}
	if ag.cards.Load() != 1 {
		t.Fatalf("card read %d times within its TTL", ag.cards.Load())
	}
	// Past the card's TTL the next delivery reads it again.
	r.Clock.Add(6 * time.Minute)
	r.PostAll(t, []*protocol.Event{a[1].Sign(protocol.KindPost, vt-4, "fourth", []string{"t", "a2a"})}, 1)
	relaytest.Eventually(t, "fourth delivered", func() bool { return len(deliveries(t, r, a[0], "delivered")) == 4 })
	if ag.cards.Load() != 2 {
		t.Fatalf("card read %d times after its TTL", ag.cards.Load())
	}
}

// TestA2ATargetBadAgents: a card that names no JSON-RPC endpoint, an
// endpoint that is not JSON-RPC, and an agent on loopback while private
// addresses are refused are failed attempts with the reason kept.
func TestA2ATargetBadAgents(t *testing.T) {
	r, _ := start(t, delivery.Options{})
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		switch req.URL.Path {
		case "/grpc-card":
			w.Write([]byte(`{"url":"https://x.example/grpc","preferredTransport":"GRPC"}`))
		case "/card":
			w.Write([]byte(`{"url":"http://` + req.Host + `/rpc"}`))
		default:
			w.Write([]byte(`<html>not json-rpc</html>`))
		}
	}))
	defer bad.Close()
	a := taskstest.Pool(2)
	addTrigger(t, r, a[0], `{"match":{"kinds":[1]},"target":{"type":"a2a","url":"`+bad.URL+`/grpc-card"}}`)
	addTrigger(t, r, a[1], `{"match":{"kinds":[1]},"target":{"type":"a2a","url":"`+bad.URL+`/card"}}`)
	r.PostAll(t, []*protocol.Event{a[0].Sign(protocol.KindPost, vt-10, "x")}, 1)
	relaytest.Eventually(t, "both failed", func() bool {
		d0, d1 := deliveries(t, r, a[0], "escalated"), deliveries(t, r, a[1], "escalated")
		return len(d0) == 1 && strings.Contains(d0[0].LastError, "no JSONRPC interface") &&
			len(d1) == 1 && strings.Contains(d1[0].LastError, "not a JSON-RPC 2.0 response")
	})

	m := delivery.NewModule(delivery.Options{Poll: 10 * time.Millisecond})
	r2 := relaytest.Start(t, []relay.Module{m}, func(c *relay.Config) { c.RelayKey = relayKey })
	tls := httptest.NewTLSServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		t.Error("the loopback agent was reached")
	}))
	defer tls.Close()
	if ans := do(t, r2, a[0], "POST", "/triggers", `{"match":{"kinds":[1]},"target":{"type":"a2a","url":"`+bad.URL+`/card"}}`); ans.Status != 400 || ans.Code(t) != delivery.CodeTargetRefused {
		t.Fatalf("http card: %d %s", ans.Status, ans.Body)
	}
	addTrigger(t, r2, a[0], `{"match":{"kinds":[1]},"target":{"type":"a2a","url":"`+tls.URL+`/card"}}`)
	r2.PostAll(t, []*protocol.Event{a[0].Sign(protocol.KindPost, vt-10, "x")}, 1)
	relaytest.Eventually(t, "card refused", func() bool {
		ds := deliveries(t, r2, a[0], "escalated")
		return len(ds) == 1 && strings.Contains(ds[0].LastError, "refused")
	})
}
