package delivery_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay"
	"github.com/anp2net/relay/relay/delivery"
	"github.com/anp2net/relay/relay/relaytest"
	"github.com/anp2net/relay/tasks/taskstest"
)

// The delivery attacks of SPEC §20.2 that are cleaner against an
// in-process relay (a fake clock for the breaker, options for the
// deadline race); cmd/anp2/abuse_delivery_test.go runs the others
// against a real anp2 serve process.

// TestRegexCostBoundedAtRegistration: a regex whose repetition counts or
// compiled program are too large is refused with invalid_trigger before
// it can run; ordinary and expensive-but-allowed ones are accepted.
func TestRegexCostBoundedAtRegistration(t *testing.T) {
	spec := func(re string) []byte {
		v, _ := json.Marshal(re)
		return []byte(`{"match":{"kinds":[1]},"filter":[{"path":"$.s","operator":"regex","value":` + string(v) + `}],` +
			`"target":{"type":"webhook","url":"https://example.com/h"}}`)
	}
	for _, re := range []string{
		`[\p{L}\p{N}]{1000}z`, // the 19-byte filter that cost a second per 64 KB
		`a{101}`,
		`(?:a{100}){100}`, // each count allowed, the product not
		`(?:(?:\w{20}){20}){2}`,
		`x{2,1000}`,
	} {
		_, err := delivery.ParseSpec(spec(re), false)
		var pe *protocol.Error
		if !asProtocolError(err, &pe) || pe.Code != delivery.CodeInvalidTrigger {
			t.Errorf("%s: accepted or wrong error: %v", re, err)
		}
	}
	for _, re := range []string{`^spot\s`, `[\p{L}\p{N}]{100}z`, `(?i)energy|power`, `\d{4}-\d{2}-\d{2}`} {
		if _, err := delivery.ParseSpec(spec(re), false); err != nil {
			t.Errorf("%s: refused: %v", re, err)
		}
	}
}

func asProtocolError(err error, pe **protocol.Error) bool {
	e, ok := err.(*protocol.Error)
	*pe = e
	return ok
}

// TestBreakerPutsOffAFailingHost: after five failed attempts in a row a
// host's breaker opens; its other due deliveries are put off to the end
// of the cooldown without an attempt (they do not hold workers); then
// one trial attempt half-opens it, a failure doubles the cooldown, and a
// success closes it and the rest are delivered.
func TestBreakerPutsOffAFailingHost(t *testing.T) {
	r, _ := start(t, delivery.Options{Workers: 4, HostConcurrency: 1})
	var status atomic.Int64
	status.Store(500)
	rc := newReceiver(t, func(int, hit) int { return int(status.Load()) })
	a := taskstest.Pool(1)
	addTrigger(t, r, a[0], `{"match":{"kinds":[1]},"target":{"type":"webhook","url":"`+rc.URL+`"}}`)
	var evs []*protocol.Event
	for i := range 8 {
		evs = append(evs, a[0].Sign(protocol.KindPost, vt-10+int64(i), "x"))
	}
	r.PostAll(t, evs, 1)
	t0 := r.Clock.Now().UnixMilli()
	putOff := func(until int64, n int) func() bool {
		return func() bool {
			k := 0
			for _, d := range deliveries(t, r, a[0], "") {
				if d.NextAttemptAt == until {
					k++
				}
			}
			return k == n
		}
	}
	relaytest.Eventually(t, "three put off for the 30 s cooldown", putOff(t0+30_000, 3))
	if n := len(rc.got()); n != 5 {
		t.Fatalf("the receiver got %d attempts before the breaker opened, want 5", n)
	}
	r.Clock.Add(31 * time.Second) // half-open: one trial, which fails
	t1 := r.Clock.Now().UnixMilli()
	relaytest.Eventually(t, "seven put off for the doubled cooldown", putOff(t1+60_000, 7))
	if n := len(rc.got()); n != 6 {
		t.Fatalf("half-open breaker let %d attempts through, want 1", n-5)
	}
	status.Store(200)
	r.Clock.Add(61 * time.Second) // the trial succeeds and closes it
	relaytest.Eventually(t, "all delivered", func() bool { return len(deliveries(t, r, a[0], "delivered")) == 8 })
	if n := len(rc.got()); n != 14 {
		t.Fatalf("receiver got %d attempts, want 14", n)
	}
}

// TestFilterBudgetPausesTheCostlyTrigger: one owner's filters that would
// do more regex work on an event than the budget allows do not run: the
// trigger that would cross it is paused (GET /triggers shows it with its
// reason, /metrics counts it, its target gets a signed notice), that
// owner's other filtered triggers pass over the event, and another
// owner's trigger delivers it. The owner
// resumes the trigger with POST /triggers/{id}/resume.
func TestFilterBudgetPausesTheCostlyTrigger(t *testing.T) {
	r, _ := start(t, delivery.Options{})
	rc := newReceiver(t, nil)
	a := taskstest.Pool(3)
	costly := `{"match":{"kinds":[1]},"filter":[{"path":"$.text","operator":"regex","value":"[\\p{L}\\p{N}]{100}z"}],` +
		`"target":{"type":"webhook","url":"` + rc.URL + `/costly"}}`
	for range 3 {
		addTrigger(t, r, a[0], costly)
	}
	victim := addTrigger(t, r, a[1], `{"match":{"kinds":[1]},"target":{"type":"webhook","url":"`+rc.URL+`/victim"}}`)
	// 103 instructions over 20,000 bytes: about 2 million units of work,
	// over the default budget of 2^20 per owner per event.
	e := a[2].Sign(protocol.KindPost, vt-10, `{"text":"`+strings.Repeat("a", 20_000)+`"}`)
	r.PostAll(t, []*protocol.Event{e}, 1)
	relaytest.Eventually(t, "the other owner's delivery", func() bool { return len(deliveries(t, r, a[1], "delivered")) == 1 })
	if got := deliveries(t, r, a[1], "delivered")[0]; got.TriggerID != victim {
		t.Fatalf("delivered %+v", got)
	}
	list := func() []map[string]any {
		var out struct{ Triggers []map[string]any }
		if err := json.Unmarshal(do(t, r, a[0], "GET", "/triggers", "").Body, &out); err != nil {
			t.Fatal(err)
		}
		return out.Triggers
	}
	var paused []string
	for _, tr := range list() {
		if tr["status"] == "paused" {
			paused = append(paused, tr["id"].(string))
			if reason, _ := tr["paused_reason"].(string); !strings.Contains(reason, "filter_budget_exceeded") {
				t.Fatalf("paused without its reason: %v", tr)
			}
		}
	}
	if len(paused) != 1 {
		t.Fatalf("paused %d of the costly owner's triggers, want 1", len(paused))
	}
	// Its owner is told: a signed notice to the paused trigger's target,
	// the owner's only delivery (no costly trigger delivered the event).
	relaytest.Eventually(t, "pause notice delivered", func() bool { return len(deliveries(t, r, a[0], "delivered")) == 1 })
	if ds := deliveries(t, r, a[0], ""); len(ds) != 1 || ds[0].TriggerID != paused[0] || ds[0].EventID != "" {
		t.Fatalf("the costly owner's deliveries: %+v", ds)
	}
	notice := deliveries(t, r, a[0], "")[0]
	var told bool
	for _, h := range rc.got() {
		var n delivery.PauseNotice
		if h.delivery == notice.ID && h.verified && json.Unmarshal(h.body, &n) == nil &&
			n.Notice == "trigger_paused" && n.TriggerID == paused[0] && strings.Contains(n.Reason, "filter_budget_exceeded") {
			told = true
		}
	}
	if !told {
		t.Fatal("the receiver got no signed pause notice")
	}
	metrics := string(r.Do(t, "GET", "/metrics", "", nil).Body)
	if !strings.Contains(metrics, "anp2_triggers_paused_total 1") {
		t.Fatalf("metrics:\n%s", metrics)
	}
	if ans := do(t, r, a[1], "POST", "/triggers/"+paused[0]+"/resume", ""); ans.Status != 404 {
		t.Fatalf("resume by another agent: %d", ans.Status)
	}
	if ans := do(t, r, a[0], "POST", "/triggers/"+paused[0]+"/resume", ""); ans.Status != 200 || !strings.Contains(string(ans.Body), `"status":"active"`) {
		t.Fatalf("resume: %d %s", ans.Status, ans.Body)
	}
	for _, tr := range list() {
		if tr["status"] != "active" {
			t.Fatalf("after resume: %v", tr)
		}
	}
}

// TestSlowMatchSendsOnceAtATime: a matcher run longer than the watchdog
// TTL (expensive filters of another owner, allowed here by a large
// budget) does not leave the deliveries it hands out already overdue:
// the deadline is taken when the delivery is handed out, so the watchdog
// does not send it a second time beside the first attempt. The receiver
// holds each request past the watchdog's one-second period, so an overdue
// delivery would be sent again while the first attempt is held.
func TestSlowMatchSendsOnceAtATime(t *testing.T) {
	ttl := 2 * time.Second
	m := delivery.NewModule(delivery.Options{AllowPrivate: true, Poll: 10 * time.Millisecond, WatchdogTTL: ttl,
		SendTimeout: ttl * 9 / 10, RegexWork: 1 << 62, FilterBudget: time.Hour, MaxTriggersPerOwner: 1000})
	r := relaytest.Start(t, []relay.Module{m}, func(c *relay.Config) { c.RelayKey, c.Now = relayKey, time.Now })
	var mu sync.Mutex
	inflight, most, total := map[string]int{}, 0, map[string]int{}
	rc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		key := req.Header.Get(delivery.HeaderIdempotencyKey)
		mu.Lock()
		inflight[key]++
		total[key]++
		most = max(most, inflight[key])
		mu.Unlock()
		time.Sleep(1100 * time.Millisecond)
		mu.Lock()
		inflight[key]--
		mu.Unlock()
	}))
	defer rc.Close()
	a := taskstest.Pool(3)
	now := func() int64 { return time.Now().Unix() }
	doNow := func(ag taskstest.Agent, method, path, body string) relaytest.Answer {
		return r.Do(t, method, path, "application/json", []byte(body), "Authorization", r.AuthBody(ag.Key, method, path, []byte(body), now()))
	}
	// Enough costly filters for about 4 s of matching on this machine.
	text := strings.Repeat("a", 32<<10)
	re := regexp.MustCompile(`[\p{L}\p{N}]{100}z`)
	start := time.Now()
	re.MatchString(text)
	n := min(200, max(2, int(3*time.Second/max(time.Since(start), time.Millisecond))+1))
	for range n {
		ans := doNow(a[0], "POST", "/triggers", `{"match":{"kinds":[1]},"filter":[{"path":"$.text","operator":"regex","value":"[\\p{L}\\p{N}]{100}z"}],"target":{"type":"webhook","url":"`+rc.URL+`/costly"}}`)
		if ans.Status != 201 {
			t.Fatalf("costly trigger: %d %s", ans.Status, ans.Body)
		}
	}
	if ans := doNow(a[1], "POST", "/triggers", `{"match":{"kinds":[1]},"target":{"type":"webhook","url":"`+rc.URL+`/victim"}}`); ans.Status != 201 {
		t.Fatalf("trigger: %d %s", ans.Status, ans.Body)
	}
	e := a[2].Sign(protocol.KindPost, now(), `{"text":"`+text+`"}`)
	if ans := r.Post(t, e); ans.Status != 200 {
		t.Fatalf("publish: %d %s", ans.Status, ans.Body)
	}
	// Matching takes seconds here: wait up to a minute, not Eventually's 10 s.
	var d delivery.Delivery
	for end := time.Now().Add(time.Minute); d.ID == ""; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("not delivered within a minute")
		}
		ans := doNow(a[1], "GET", "/deliveries?status=delivered", "")
		var out struct{ Deliveries []delivery.Delivery }
		_ = json.Unmarshal(ans.Body, &out)
		if len(out.Deliveries) == 1 {
			d = out.Deliveries[0]
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if most != 1 || total[d.IdempotencyKey] != 1 || d.Attempts != 1 || d.OwnerLease != 2 {
		t.Fatalf("sent %d times, at most %d at once; delivery %+v", total[d.IdempotencyKey], most, d)
	}
}

// TestOwnersTakeTurns: with one worker busy, one owner queues three
// deliveries and then another owner three; once the worker is free they
// go out taking turns between the owners, not the first owner's backlog
// first.
func TestOwnersTakeTurns(t *testing.T) {
	r, _ := start(t, delivery.Options{Workers: 1})
	release := make(chan struct{})
	rc := newReceiver(t, func(n int, _ hit) int {
		if n == 1 {
			<-release
		}
		return 200
	})
	a := taskstest.Pool(4)
	owner := map[string]string{}
	for i, tag := range []string{"c", "a", "b"} {
		id := addTrigger(t, r, a[i], `{"match":{"kinds":[1],"tags":{"t":["`+tag+`"]}},"target":{"type":"webhook","url":"`+rc.URL+`"}}`)
		owner[id] = tag
	}
	r.PostAll(t, []*protocol.Event{a[3].Sign(protocol.KindPost, vt-20, "block", []string{"t", "c"})}, 1)
	relaytest.Eventually(t, "the worker busy", func() bool { return len(rc.got()) == 1 })
	for i, tag := range []string{"a", "a", "a", "b", "b", "b"} {
		r.PostAll(t, []*protocol.Event{a[3].Sign(protocol.KindPost, vt-10+int64(i), tag+strconv.Itoa(i), []string{"t", tag})}, 1)
	}
	relaytest.Eventually(t, "six waiting", func() bool {
		return len(deliveries(t, r, a[1], "pending")) == 3 && len(deliveries(t, r, a[2], "pending")) == 3
	})
	close(release)
	relaytest.Eventually(t, "all sent", func() bool { return len(rc.got()) == 7 })
	var order string
	for _, h := range rc.got()[1:] {
		order += owner[h.payload.TriggerID]
	}
	if order != "ababab" && order != "bababa" {
		t.Fatalf("sent in the order %s, want the owners taking turns", order)
	}
}
