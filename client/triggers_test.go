package client_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/anp2net/relay/client"
	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay"
	"github.com/anp2net/relay/relay/delivery"
	"github.com/anp2net/relay/relay/relaytest"
)

// A trigger registered through the SDK delivers to a handler that checks
// the relay's signature; a forged or replayed-from-elsewhere request is
// refused, and the deliveries are listed.
func TestTriggerWebhook(t *testing.T) {
	_, relayKey, _ := ed25519.GenerateKey(rand.Reader)
	m := delivery.NewModule(delivery.Options{AllowPrivate: true, Path: filepath.Join(t.TempDir(), "q.delivery")})
	r := relaytest.Start(t, []relay.Module{m}, func(c *relay.Config) { c.RelayKey = relayKey })
	c := agentOn(t, r)
	ctx := context.Background()

	var mu sync.Mutex
	got := map[string]int{}
	v := &client.WebhookVerifier{Relay: protocol.AgentIDOf(relayKey), Now: r.Clock.Now}
	hook := httptest.NewServer(client.WebhookHandler(v, func(_ context.Context, w *client.Webhook) error {
		mu.Lock()
		got[w.Event.Content]++
		mu.Unlock()
		return nil
	}))
	defer hook.Close()

	tr, err := c.CreateTrigger(ctx, client.TriggerSpec{
		Match:  client.TriggerMatch{Kinds: []int64{1}, Tags: map[string][]string{"t": {"alerts"}}},
		Target: client.TriggerTarget{Type: "webhook", URL: hook.URL},
	})
	if err != nil {
		t.Fatal(err)
	}
	if list, err := c.Triggers(ctx); err != nil || len(list) != 1 || list[0].ID != tr.ID {
		t.Fatalf("triggers: %v %v", list, err)
	}
	if _, err := c.Send(ctx, client.PostEvent("fire", "alerts")); err != nil {
		t.Fatal(err)
	}
	relaytest.Eventually(t, "delivered", func() bool {
		d, err := c.Deliveries(ctx, "delivered", 0)
		return err == nil && len(d) == 1
	})
	mu.Lock()
	if got["fire"] != 1 {
		t.Fatalf("handler saw %v", got)
	}
	mu.Unlock()

	if err := c.DeleteTrigger(ctx, tr.ID); err != nil {
		t.Fatal(err)
	}
	var ce *client.Error
	if err := c.DeleteTrigger(ctx, tr.ID); !asError(err, &ce) || ce.Status != http.StatusNotFound {
		t.Fatalf("second delete: %v", err)
	}
}

// Verify accepts exactly the relay's signature over "<ts>.<body>", fresh.
func TestVerifyWebhook(t *testing.T) {
	_, relayKey, _ := ed25519.GenerateKey(rand.Reader)
	_, otherKey, _ := ed25519.GenerateKey(rand.Reader)
	id, _ := client.GenerateIdentity()
	e := client.PostEvent("x")
	if err := client.Sign(context.Background(), id, e, time.Unix(1000, 0)); err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(map[string]any{"delivery_id": "d1", "idempotency_key": "k1", "event": e})
	now := time.Unix(2000, 0)
	v := &client.WebhookVerifier{Relay: protocol.AgentIDOf(relayKey), Now: func() time.Time { return now }}
	req := func(key ed25519.PrivateKey, ts int64, b []byte, tamper bool) *http.Request {
		tsText := strconv.FormatInt(ts, 10)
		sig := ed25519.Sign(key, append([]byte(tsText+"."), b...))
		if tamper {
			b = append(bytes.Clone(b[:len(b)-1]), ' ', '}')
		}
		r := httptest.NewRequest(http.MethodPost, "/hook", bytes.NewReader(b))
		r.Header.Set("X-ANP2-Relay", protocol.AgentIDOf(relayKey))
		r.Header.Set("X-ANP2-Timestamp", tsText)
		r.Header.Set("X-ANP2-Signature", hex.EncodeToString(sig))
		return r
	}
	if w, err := v.Verify(req(relayKey, 2000, body, false)); err != nil || w.Event.ID != e.ID || w.IdempotencyKey != "k1" {
		t.Fatalf("good webhook: %v %v", w, err)
	}
	for name, c := range map[string]struct {
		r    *http.Request
		want error
	}{
		"other key": {req(otherKey, 2000, body, false), client.ErrWebhookSignature},
		"tampered":  {req(relayKey, 2000, body, true), client.ErrWebhookSignature},
		"stale":     {req(relayKey, 1000, body, false), client.ErrWebhookStale},
	} {
		if _, err := v.Verify(c.r); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", name, err, c.want)
		}
	}
}

// CreateTrigger pays the registration's proof of work: a relay that asks
// for more than the client mined names its figure, and the client mines
// again once at it; a stranger's unmined registration stays refused.
func TestCreateTriggerMinesItsRegistration(t *testing.T) {
	m := delivery.NewModule(delivery.Options{AllowPrivate: true, TriggerPoW: 10, Path: filepath.Join(t.TempDir(), "q.delivery")})
	r := relaytest.Start(t, []relay.Module{m})
	c := agentOn(t, r)
	c.TriggerPoW = 4 // short of the relay's 10: refused, then mined at 10
	spec := client.TriggerSpec{
		Match:  client.TriggerMatch{Kinds: []int64{1}},
		Target: client.TriggerTarget{Type: "webhook", URL: "http://127.0.0.1:9/hook"},
	}
	ctx := context.Background()
	for range 2 { // the same spec twice in one second: two proofs, two triggers
		if _, err := c.CreateTrigger(ctx, spec); err != nil {
			t.Fatal(err)
		}
	}
	if list, err := c.Triggers(ctx); err != nil || len(list) != 2 {
		t.Fatalf("triggers: %v %v", list, err)
	}
	c.TriggerPoW = -1
	body, _ := json.Marshal(spec)
	var apiErr *client.Error
	if err := c.PostRaw(ctx, "/triggers", "application/json", body, nil); !errors.As(err, &apiErr) || apiErr.Code != "trigger_pow_required" {
		t.Fatalf("unmined registration: %v", err)
	}
}
