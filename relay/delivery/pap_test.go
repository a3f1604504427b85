package delivery_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/delivery"
	"github.com/anp2net/relay/relay/relaytest"
	"github.com/anp2net/relay/tasks/taskstest"
)

// TestEscalatedStaysEscalated: seed 000 §5.1 — a first attempt is
// committed as dispatched before it is sent; a failed attempt escalates
// the delivery, and its retry is sent while it stays escalated, until
// it is delivered (never back to pending, dispatched or locked).
func TestEscalatedStaysEscalated(t *testing.T) {
	r, _ := start(t, delivery.Options{})
	release := make(chan struct{})
	inFlight := make(chan struct{}, 4)
	rc := newReceiver(t, func(n int, _ hit) int {
		inFlight <- struct{}{}
		<-release
		if n == 1 {
			return 503
		}
		return 200
	})
	a := taskstest.Pool(1)
	addTrigger(t, r, a[0], `{"match":{"kinds":[1]},"target":{"type":"webhook","url":"`+rc.URL+`"}}`)
	r.PostAll(t, []*protocol.Event{a[0].Sign(protocol.KindPost, vt-10, "x")}, 1)
	<-inFlight
	if ds := deliveries(t, r, a[0], "dispatched"); len(ds) != 1 || ds[0].OwnerLease != 2 {
		t.Fatalf("first attempt in flight: %+v", ds)
	}
	release <- struct{}{}
	relaytest.Eventually(t, "escalated", func() bool { return len(deliveries(t, r, a[0], "escalated")) == 1 })
	r.Clock.Add(2e9) // past the backoff
	<-inFlight
	ds := deliveries(t, r, a[0], "")
	if len(ds) != 1 || ds[0].Status != "escalated" || ds[0].OwnerLease != 4 || ds[0].Attempts != 1 {
		t.Fatalf("retry in flight: %+v", ds)
	}
	close(release)
	relaytest.Eventually(t, "delivered", func() bool { return len(deliveries(t, r, a[0], "delivered")) == 1 })
	if n := len(rc.got()); n != 2 {
		t.Fatalf("receiver got %d requests", n)
	}
}

// TestDeduplicationKeyUpserts: seed 000 §7 on a trigger's
// deduplication_key — a match whose key equals that of a pending
// delivery replaces its event; one whose key matches a dispatched
// delivery supersedes the attempt under way (its outcome is stale) and
// the new event is sent; once delivered, the same key queues a new
// delivery.
func TestDeduplicationKeyUpserts(t *testing.T) {
	r, _ := start(t, delivery.Options{Workers: 1})
	release := make(chan struct{})
	rc := newReceiver(t, func(n int, h hit) int {
		if n == 1 {
			<-release
		}
		return 200
	})
	a := taskstest.Pool(2)
	if ans := do(t, r, a[0], "POST", "/triggers", `{"match":{"kinds":[1]},"deduplication_key":"#","target":{"type":"webhook","url":"`+rc.URL+`"}}`); ans.Status != 400 {
		t.Fatalf("empty tag name: %d %s", ans.Status, ans.Body)
	}
	addTrigger(t, r, a[0], `{"match":{"kinds":[1]},"deduplication_key":"#d","target":{"type":"webhook","url":"`+rc.URL+`"}}`)
	post := func(content, key string, at int64) *protocol.Event {
		e := a[1].Sign(protocol.KindPost, at, content, []string{"d", key})
		r.PostAll(t, []*protocol.Event{e}, 1)
		return e
	}
	post("feed A v1", "A", vt-30) // dispatched, held by the receiver
	relaytest.Eventually(t, "first attempt in flight", func() bool { return len(rc.got()) == 1 })
	a2 := post("feed A v2", "A", vt-29) // supersedes the attempt under way
	post("feed B v1", "B", vt-28)
	b2 := post("feed B v2", "B", vt-27) // replaces the pending one
	relaytest.Eventually(t, "two pending", func() bool { return len(deliveries(t, r, a[0], "pending")) == 2 })
	ds := deliveries(t, r, a[0], "")
	if len(ds) != 2 {
		t.Fatalf("deliveries: %+v", ds)
	}
	for _, d := range ds {
		want := map[string]string{"A": a2.ID, "B": b2.ID}[d.DeduplicationKey]
		if d.EventID != want {
			t.Fatalf("delivery %+v carries %s, want %s", d, d.EventID, want)
		}
	}
	close(release)
	relaytest.Eventually(t, "both delivered", func() bool { return len(deliveries(t, r, a[0], "delivered")) == 2 })
	var sent []string
	for _, h := range rc.got() {
		var ev protocol.Event
		if err := json.Unmarshal(h.payload.Event, &ev); err != nil {
			t.Fatal(err)
		}
		sent = append(sent, ev.Content)
	}
	if strings.Join(sent, "|") != "feed A v1|feed A v2|feed B v2" && strings.Join(sent, "|") != "feed A v1|feed B v2|feed A v2" {
		t.Fatalf("receiver got %q", sent)
	}
	post("feed A v3", "A", vt-26) // after delivery: a new notification
	relaytest.Eventually(t, "three delivered", func() bool { return len(deliveries(t, r, a[0], "delivered")) == 3 })
	m := string(r.Do(t, "GET", "/metrics", "", nil).Body)
	if !strings.Contains(m, "anp2_deliveries_deduplicated_total 2") || !strings.Contains(m, "anp2_deliveries_stale_outcomes_total 1") {
		t.Fatalf("metrics:\n%s", m)
	}
}
