package delivery_test

import (
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/protocol/sigverify"
	"github.com/anp2net/relay/relay"
	"github.com/anp2net/relay/relay/delivery"
	"github.com/anp2net/relay/relay/eventlog"
	"github.com/anp2net/relay/relay/relaytest"
	"github.com/anp2net/relay/tasks/taskstest"
)

const vt = relaytest.VectorTime

var relayKey = ed25519.NewKeyFromSeed(make([]byte, 32))

func start(t *testing.T, opts delivery.Options) (*relaytest.Relay, *delivery.Module) {
	opts.AllowPrivate = true
	if opts.Poll == 0 {
		opts.Poll = 10 * time.Millisecond
	}
	m := delivery.NewModule(opts)
	r := relaytest.Start(t, []relay.Module{m}, func(c *relay.Config) { c.RelayKey = relayKey })
	return r, m
}

// hit is one webhook request the receiver got.
type hit struct {
	key, delivery string
	payload       delivery.Payload
	verified      bool
	body          []byte
}

// receiver is a real webhook receiver on loopback; answer decides each
// request's status (n counts from 1).
type receiver struct {
	*httptest.Server
	mu     sync.Mutex
	hits   []hit
	answer func(n int, h hit) int
}

func newReceiver(t *testing.T, answer func(n int, h hit) int) *receiver {
	rc := &receiver{answer: answer}
	sv := sigverify.New(1 << 20)
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		sig, _ := hex.DecodeString(r.Header.Get(delivery.HeaderSignature))
		pub, _ := hex.DecodeString(r.Header.Get(delivery.HeaderRelay))
		h := hit{key: r.Header.Get(delivery.HeaderIdempotencyKey), delivery: r.Header.Get(delivery.HeaderDelivery),
			verified: len(pub) == 32 && string(pub) == string(relayKey.Public().(ed25519.PublicKey)) &&
				sv.Verify(pub, delivery.SignedMessage(r.Header.Get(delivery.HeaderTimestamp), body), sig)}
		_ = json.Unmarshal(body, &h.payload)
		h.body = body
		rc.mu.Lock()
		rc.hits = append(rc.hits, h)
		n := len(rc.hits)
		rc.mu.Unlock()
		status := 200
		if rc.answer != nil {
			status = rc.answer(n, h)
		}
		w.WriteHeader(status)
	}))
	t.Cleanup(rc.Close)
	return rc
}

func (rc *receiver) got() []hit {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]hit(nil), rc.hits...)
}

// do sends an authenticated request as agent a.
func do(t *testing.T, r *relaytest.Relay, a taskstest.Agent, method, path, body string) relaytest.Answer {
	t.Helper()
	return r.Do(t, method, path, "application/json", []byte(body), "Authorization", r.AuthBody(a.Key, method, path, []byte(body), r.Clock.Now().Unix()))
}

func addTrigger(t *testing.T, r *relaytest.Relay, a taskstest.Agent, spec string) string {
	t.Helper()
	ans := do(t, r, a, "POST", "/triggers", spec)
	if ans.Status != 201 {
		t.Fatalf("POST /triggers: %d %s", ans.Status, ans.Body)
	}
	return ans.JSON(t)["id"].(string)
}

func deliveries(t *testing.T, r *relaytest.Relay, a taskstest.Agent, status string) []delivery.Delivery {
	t.Helper()
	path := "/deliveries"
	if status != "" {
		path += "?status=" + status
	}
	ans := do(t, r, a, "GET", path, "")
	if ans.Status != 200 {
		t.Fatalf("GET %s: %d %s", path, ans.Status, ans.Body)
	}
	var out struct{ Deliveries []delivery.Delivery }
	_ = json.Unmarshal(ans.Body, &out)
	return out.Deliveries
}

// TestTriggerDelivers: a trigger with a tag match and guard filters gets
// exactly the matching events, signed by the relay key, with the
// idempotency key SHA-256(event.id + trigger.id); the deliveries and
// /metrics show them delivered.
func TestTriggerDelivers(t *testing.T) {
	r, _ := start(t, delivery.Options{})
	rc := newReceiver(t, nil)
	a := taskstest.Pool(2)
	if ans := r.Do(t, "POST", "/triggers", "application/json", []byte(`{}`)); ans.Status != 401 {
		t.Fatalf("anonymous: %d", ans.Status)
	}
	if ans := do(t, r, a[0], "POST", "/triggers", `{"match":{"kinds":[1]},"target":{"type":"webhook","url":"`+rc.URL+`"},"filter":[{"path":"$.price","operator":"gt"}]}`); ans.Status != 400 || ans.Code(t) != delivery.CodeInvalidTrigger {
		t.Fatalf("bad spec: %d %s", ans.Status, ans.Body)
	}
	id := addTrigger(t, r, a[0], `{"match":{"kinds":[1],"tags":{"t":["energy"]}},
		"filter":[{"path":"$.price","operator":"gt","value":3},{"path":"$.region","operator":"in","value":["NO1","NO2"]},
		          {"path":"$.note","operator":"regex","value":"^sp.t"}],
		"target":{"type":"webhook","url":"`+rc.URL+`/hook"}}`)
	post := func(content string, tags ...[]string) *protocol.Event {
		e := a[1].Sign(protocol.KindPost, vt-10, content, tags...)
		r.PostAll(t, []*protocol.Event{e}, 1)
		return e
	}
	hitE := post(`{"price":3.5,"region":"NO1","note":"spot"}`, []string{"t", "energy"})
	post(`{"price":2.5,"region":"NO1","note":"spot"}`, []string{"t", "energy"}) // price too low
	post(`{"price":9,"region":"SE3","note":"spot"}`, []string{"t", "energy"})   // region
	post(`{"price":9,"region":"NO2","note":"spot"}`)                            // no tag
	post(`not json`, []string{"t", "energy"})
	last := post(`{"price":4,"region":"NO2","note":"spat"}`, []string{"t", "energy"})
	relaytest.Eventually(t, "two deliveries", func() bool { return len(deliveries(t, r, a[0], "delivered")) == 2 })
	hits := rc.got()
	if len(hits) != 2 {
		t.Fatalf("receiver got %d requests", len(hits))
	}
	want := map[string]string{delivery.IdempotencyKey(hitE.ID, id): hitE.ID, delivery.IdempotencyKey(last.ID, id): last.ID}
	for _, h := range hits {
		if !h.verified {
			t.Fatalf("webhook signature does not verify: %+v", h)
		}
		if want[h.key] == "" || h.payload.IdempotencyKey != h.key || h.payload.TriggerID != id || !strings.Contains(string(h.payload.Event), want[h.key]) {
			t.Fatalf("hit %+v", h)
		}
	}
	if ds := deliveries(t, r, a[1], ""); len(ds) != 0 {
		t.Fatalf("another agent sees %d deliveries", len(ds))
	}
	metrics := string(r.Do(t, "GET", "/metrics", "", nil).Body)
	if !strings.Contains(metrics, `anp2_deliveries{status="delivered"} 2`) || !strings.Contains(metrics, "anp2_triggers 1") {
		t.Fatalf("metrics:\n%s", metrics)
	}
	// Terminal deliveries are kept for the retention (default 7 days), then pruned.
	r.Clock.Add(6 * 24 * time.Hour)
	if ds := deliveries(t, r, a[0], "delivered"); len(ds) != 2 {
		t.Fatalf("pruned early: %d left", len(ds))
	}
	r.Clock.Add(25 * time.Hour)
	relaytest.Eventually(t, "pruned", func() bool { return len(deliveries(t, r, a[0], "")) == 0 })
	if ans := do(t, r, a[1], "DELETE", "/triggers/"+id, ""); ans.Status != 404 {
		t.Fatalf("delete by another agent: %d", ans.Status)
	}
	if ans := do(t, r, a[0], "DELETE", "/triggers/"+id, ""); ans.Status != 200 {
		t.Fatalf("delete: %d %s", ans.Status, ans.Body)
	}
	if ans := do(t, r, a[0], "GET", "/triggers", ""); !strings.Contains(string(ans.Body), `"count":0`) {
		t.Fatalf("triggers after delete: %s", ans.Body)
	}
}

// TestRetryThenDeadLetter: a failing webhook is retried after the backoff
// (escalated, new lease) and, after MaxAttempts, kept as a dead letter.
func TestRetryThenDeadLetter(t *testing.T) {
	r, _ := start(t, delivery.Options{MaxAttempts: 3})
	rc := newReceiver(t, func(int, hit) int { return 500 })
	a := taskstest.Pool(1)
	addTrigger(t, r, a[0], `{"match":{"kinds":[1]},"target":{"type":"webhook","url":"`+rc.URL+`"}}`)
	r.PostAll(t, []*protocol.Event{a[0].Sign(protocol.KindPost, vt-10, "x")}, 1)
	relaytest.Eventually(t, "first attempt escalated", func() bool {
		ds := deliveries(t, r, a[0], "escalated")
		return len(ds) == 1 && ds[0].Attempts == 1
	})
	d := deliveries(t, r, a[0], "escalated")[0]
	if d.OwnerLease != 3 || !strings.Contains(d.LastError, "500") {
		t.Fatalf("after one failure: %+v", d)
	}
	if n := len(rc.got()); n != 1 {
		t.Fatalf("retried before the backoff: %d requests", n)
	}
	r.Clock.Add(time.Second) // first backoff: 1 s
	relaytest.Eventually(t, "second attempt recorded", func() bool {
		ds := deliveries(t, r, a[0], "escalated")
		return len(ds) == 1 && ds[0].Attempts == 2
	})
	r.Clock.Add(2 * time.Second) // second backoff: 2 s
	relaytest.Eventually(t, "dead letter", func() bool { return len(deliveries(t, r, a[0], "failed")) == 1 })
	if n := len(rc.got()); n != 3 {
		t.Fatalf("%d attempts, want 3", n)
	}
	for _, h := range rc.got() {
		if h.key != d.IdempotencyKey {
			t.Fatalf("idempotency key changed between attempts")
		}
	}
}

// TestWatchdogFencesLateAck: an attempt with no outcome before its deadline
// is escalated by the watchdog with a new lease and sent again; when the
// first attempt's answer finally comes, its compare-and-swap fails and is
// discarded.
func TestWatchdogFencesLateAck(t *testing.T) {
	r, _ := start(t, delivery.Options{WatchdogTTL: 30 * time.Second})
	release := make(chan struct{})
	rc := newReceiver(t, func(n int, _ hit) int {
		if n == 1 {
			<-release
			return 500 // the late outcome: would make it escalated again if it counted
		}
		return 200
	})
	a := taskstest.Pool(1)
	addTrigger(t, r, a[0], `{"match":{"kinds":[1]},"target":{"type":"webhook","url":"`+rc.URL+`"}}`)
	r.PostAll(t, []*protocol.Event{a[0].Sign(protocol.KindPost, vt-10, "x")}, 1)
	relaytest.Eventually(t, "attempt in flight", func() bool {
		ds := deliveries(t, r, a[0], "dispatched")
		return len(ds) == 1 && len(rc.got()) == 1
	})
	r.Clock.Add(31 * time.Second)
	relaytest.Eventually(t, "escalated attempt delivered", func() bool { return len(deliveries(t, r, a[0], "delivered")) == 1 })
	close(release)
	relaytest.Eventually(t, "late outcome discarded", func() bool {
		return strings.Contains(string(r.Do(t, "GET", "/metrics", "", nil).Body), "anp2_deliveries_stale_outcomes_total 1")
	})
	d := deliveries(t, r, a[0], "")[0]
	if d.Status != "delivered" || d.OwnerLease != 4 {
		t.Fatalf("after the late outcome: %+v", d)
	}
}

// TestThrottleAndCascade: a throttle keyed by a content path lets one
// delivery per key through per window; an event whose triggered_by chain
// is 3 deep provokes nothing.
func TestThrottleAndCascade(t *testing.T) {
	r, _ := start(t, delivery.Options{})
	rc := newReceiver(t, nil)
	a := taskstest.Pool(2)
	addTrigger(t, r, a[0], `{"match":{"kinds":[1],"authors":["`+a[1].ID+`"]},
		"throttle":{"max_per_window":1,"window_seconds":3600,"window_key":"$.region"},
		"target":{"type":"webhook","url":"`+rc.URL+`"}}`)
	var evs []*protocol.Event
	for i, region := range []string{"A", "A", "B", "A"} {
		evs = append(evs, a[1].Sign(protocol.KindPost, vt-100+int64(i), fmt.Sprintf(`{"region":%q,"i":%d}`, region, i)))
	}
	r.PostAll(t, evs, 1)
	relaytest.Eventually(t, "two delivered", func() bool { return len(deliveries(t, r, a[0], "delivered")) == 2 })

	b := taskstest.Pool(4)[2:]
	addTrigger(t, r, b[0], `{"match":{"kinds":[1],"authors":["`+b[1].ID+`"]},"target":{"type":"webhook","url":"`+rc.URL+`"}}`)
	inv := ""
	for depth := 0; depth <= 3; depth++ {
		var tags [][]string
		if inv != "" {
			tags = append(tags, []string{"triggered_by", inv})
		}
		e := b[1].Sign(protocol.KindPost, vt-50+int64(depth), fmt.Sprintf("depth %d", depth), tags...)
		if depth == 3 {
			// Published directly, it is refused (and a dry-run says so)...
			if ans := r.Post(t, e); ans.Status != 400 || ans.Code(t) != delivery.CodeCascadeTooDeep {
				t.Fatalf("depth 3 publish: %d %s", ans.Status, ans.Body)
			}
			if ans := r.Do(t, "POST", "/events/dry-run", "application/json", protocol.AppendJSON(nil, e)); !strings.Contains(string(ans.Body), delivery.CodeCascadeTooDeep) {
				t.Fatalf("depth 3 dry-run: %s", ans.Body)
			}
			// ...and stored as a peer's or an import's would be (no gate),
			// it provokes nothing.
			if _, err := r.Store.Append(context.Background(), eventlog.Record{Event: e, ReceivedAt: vt}); err != nil {
				t.Fatal(err)
			}
			break
		}
		r.PostAll(t, []*protocol.Event{e}, 1)
		relaytest.Eventually(t, "delivered", func() bool { return len(deliveries(t, r, b[0], "delivered")) == depth+1 })
		inv = deliveries(t, r, b[0], "delivered")[0].ID // newest first
	}
	relaytest.Eventually(t, "cascade rejected", func() bool {
		return strings.Contains(string(r.Do(t, "GET", "/metrics", "", nil).Body), "anp2_deliveries_cascade_rejected_total 1")
	})
	if n := len(deliveries(t, r, b[0], "")); n != 3 {
		t.Fatalf("%d deliveries, want 3", n)
	}
}

// TestPrivateTargetRefused: without AllowPrivate, an http target is
// refused at registration, and an https target that resolves to loopback
// is refused at connect time: the attempt fails and nothing is sent.
func TestPrivateTargetRefused(t *testing.T) {
	m := delivery.NewModule(delivery.Options{Poll: 10 * time.Millisecond})
	r := relaytest.Start(t, []relay.Module{m}, func(c *relay.Config) { c.RelayKey = relayKey })
	rc := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		t.Error("the loopback receiver was reached")
	}))
	defer rc.Close()
	a := taskstest.Pool(1)
	if ans := do(t, r, a[0], "POST", "/triggers", `{"match":{"kinds":[1]},"target":{"type":"webhook","url":"http://127.0.0.1:9/h"}}`); ans.Status != 400 || ans.Code(t) != delivery.CodeTargetRefused {
		t.Fatalf("http target: %d %s", ans.Status, ans.Body)
	}
	addTrigger(t, r, a[0], `{"match":{"kinds":[1]},"target":{"type":"webhook","url":"`+rc.URL+`"}}`)
	r.PostAll(t, []*protocol.Event{a[0].Sign(protocol.KindPost, vt-10, "x")}, 1)
	relaytest.Eventually(t, "attempt refused", func() bool {
		ds := deliveries(t, r, a[0], "escalated")
		return len(ds) == 1 && strings.Contains(ds[0].LastError, "refused")
	})
}

// TestBusyWorkersQueuePending: with every worker busy, a match waits as
// pending (the matcher sends a delivery itself only to a free worker) and
// the dispatcher's claim sends it later; every delivery ends delivered
// under lease 2, whichever path took it, each sent once.
func TestBusyWorkersQueuePending(t *testing.T) {
	r, _ := start(t, delivery.Options{Workers: 1})
	release := make(chan struct{})
	rc := newReceiver(t, func(n int, _ hit) int {
		if n == 1 {
			<-release
		}
		return 200
	})
	a := taskstest.Pool(1)
	addTrigger(t, r, a[0], `{"match":{"kinds":[1]},"target":{"type":"webhook","url":"`+rc.URL+`"}}`)
	r.PostAll(t, []*protocol.Event{a[0].Sign(protocol.KindPost, vt-10, "first")}, 1)
	relaytest.Eventually(t, "first attempt in flight", func() bool { return len(rc.got()) == 1 })
	r.PostAll(t, []*protocol.Event{a[0].Sign(protocol.KindPost, vt-9, "second"), a[0].Sign(protocol.KindPost, vt-8, "third")}, 2)
	relaytest.Eventually(t, "two pending behind the busy worker", func() bool {
		return len(deliveries(t, r, a[0], "pending")) == 2 && len(deliveries(t, r, a[0], "dispatched")) == 1
	})
	close(release)
	relaytest.Eventually(t, "all delivered", func() bool { return len(deliveries(t, r, a[0], "delivered")) == 3 })
	for _, d := range deliveries(t, r, a[0], "") {
		if d.OwnerLease != 2 || d.Attempts != 1 {
			t.Fatalf("delivery %+v", d)
		}
	}
	if n := len(rc.got()); n != 3 {
		t.Fatalf("receiver got %d requests, want 3", n)
	}
}

// TestFeedFullReadsLog: commits the matcher's feed could not hold (here
// a feed of size 0 for the first half) are matched from the log, and the
// matcher goes back to the feed once its cursor has passed them; every
// matching event is delivered once, none lost, none twice.
func TestFeedFullReadsLog(t *testing.T) {
	r, m := start(t, delivery.Options{})
	rc := newReceiver(t, nil)
	a := taskstest.Pool(2)
	trig := addTrigger(t, r, a[0], `{"match":{"kinds":[1],"authors":["`+a[1].ID+`"]},"target":{"type":"webhook","url":"`+rc.URL+`"}}`)
	want := map[string]bool{}
	var evs []*protocol.Event
	for i := range 60 {
		e := a[1].Sign(protocol.KindPost, vt-100+int64(i), fmt.Sprintf("n%d", i))
		evs = append(evs, e)
		want[delivery.IdempotencyKey(e.ID, trig)] = true
	}
	gap0 := delivery.FeedGap(m)
	delivery.SetFeedMax(m, 0)
	r.PostAll(t, evs[:30], 8)
	if delivery.FeedGap(m) <= gap0 {
		t.Fatalf("feed gap %d after 30 commits into a feed of 0, want past %d", delivery.FeedGap(m), gap0)
	}
	delivery.SetFeedMax(m, 4096)
	r.PostAll(t, evs[30:], 8)
	relaytest.Eventually(t, "60 delivered", func() bool { return len(rc.got()) >= 60 })
	got := map[string]int{}
	for _, h := range rc.got() {
		got[h.key]++
	}
	for k := range want {
		if got[k] != 1 {
			t.Errorf("key %s delivered %d times, want 1", k, got[k])
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d keys delivered, want %d", len(got), len(want))
	}
}
