package delivery_test

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

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

// papEvent is an ANP2 event carrying a PAP event (seed 002 §3): its type
// as a t tag, the PAP event as the content.
func papEvent(a taskstest.Agent, at int64, typ, data string) *protocol.Event {
	return a.Sign(protocol.KindPost, at, `{"pap_version":"0.2","id":"evt_`+typ+`","type":"`+typ+`","source":"test","time":"2026-03-11T06:00:00Z","data":`+data+`}`,
		[]string{"t", typ})
}

func manifestYAML(id, risk, url, extra string) string {
	return `pap_version: "0.2"
agent:
  id: ` + id + `
  description: >
    Plans the day's consumption.
  risk_level: ` + risk + `
  target:
    type: webhook
    url: "` + url + `"
  model:
    provider: anthropic
    model_id: claude-sonnet-4-20250514
  system_prompt: |
    You are an energy optimization agent.
  tools:
    - name: get_device_list
      source: mcp://smarthome-hub
      risk_override: read_only
` + extra
}

// TestPAPTriggerDocuments: POST /triggers takes seed 002's own trigger
// document, YAML or JSON: match.type maps onto t/s tags or
// anp2.kind.<n>, agent names a manifest (its target receives the
// invocations), enabled: false registers it paused and PATCH enables it;
// malformed documents are 4xx and register nothing.
func TestPAPTriggerDocuments(t *testing.T) {
	r, _ := start(t, delivery.Options{})
	rc := newReceiver(t, nil)
	a := taskstest.Pool(2)
	if ans := do(t, r, a[0], "POST", "/manifests", manifestYAML("planner-v1", "low", rc.URL+"/planner", "")); ans.Status != 201 {
		t.Fatalf("manifest: %d %s", ans.Status, ans.Body)
	}
	doc := `pap_version: "0.2"
trigger:
  id: energy-price-optimizer
  description: >
    When energy prices exceed threshold, provoke an agent.
  enabled: true
  match:
    type: "energy.price.threshold_exceeded"
  filter:
    - path: "$.data.price_nok_per_kwh"
      operator: gt
      value: 3.00
    - path: "$.data.region"
      operator: eq
      value: "NO1"
  throttle:
    max_per_window: 1
    window_key: "$.data.region"
    window_seconds: 3600
  agent: planner-v1
`
	id := addTrigger(t, r, a[0], doc)
	if ans := do(t, r, a[0], "POST", "/triggers", doc); ans.Status != 409 || ans.Code(t) != delivery.CodeTriggerExists {
		t.Fatalf("same trigger.id again: %d %s", ans.Status, ans.Body)
	}
	for name, body := range map[string]string{
		"unknown agent":  strings.Replace(strings.Replace(doc, "energy-price-optimizer", "other", 1), "agent: planner-v1", "agent: nobody", 1),
		"version":        strings.Replace(doc, `"0.2"`, `"0.1"`, 1),
		"unknown member": strings.Replace(doc, "  enabled: true", "  enabled: true\n  priority: 3", 1),
		"anchor":         strings.Replace(doc, "  match:\n", "  match: &m\n", 1),
		"two targets":    strings.Replace(doc, "  agent: planner-v1", "  agent: planner-v1\n  target: {type: webhook, url: \""+rc.URL+"\"}", 1),
		"bad kind type":  strings.Replace(doc, "energy.price.threshold_exceeded", "anp2.kind.x", 1),
		"not yaml":       "pap_version: [\n",
	} {
		ans := do(t, r, a[0], "POST", "/triggers", body)
		if ans.Status != 400 {
			t.Fatalf("%s: %d %s", name, ans.Status, ans.Body)
		}
	}
	if ans := do(t, r, a[0], "POST", "/triggers", doc+"# "+strings.Repeat("x", delivery.MaxDocBytes)+"\n"); ans.Status != 413 {
		t.Fatalf("oversized document: %d %s", ans.Status, ans.Body)
	}
	// The same document as JSON, disabled, matching by kind.
	jsonDoc := `{"pap_version":"0.2","trigger":{"id":"all-posts","enabled":false,"match":{"type":"anp2.kind.1"},
		"filter":[{"path":"$.data.region","operator":"exists"}],"target":{"type":"webhook","url":"` + rc.URL + `/posts"}}}`
	posts := addTrigger(t, r, a[0], jsonDoc)
	ans := do(t, r, a[0], "GET", "/triggers", "")
	if !strings.Contains(string(ans.Body), `"name":"energy-price-optimizer"`) || !strings.Contains(string(ans.Body), `"enabled":false`) {
		t.Fatalf("GET /triggers: %s", ans.Body)
	}
	r.PostAll(t, []*protocol.Event{
		papEvent(a[1], vt-20, "energy.price.threshold_exceeded", `{"price_nok_per_kwh":4.82,"region":"NO1"}`),
		papEvent(a[1], vt-19, "energy.price.threshold_exceeded", `{"price_nok_per_kwh":2.5,"region":"NO1"}`), // filtered
		papEvent(a[1], vt-18, "energy.price.threshold_exceeded", `{"price_nok_per_kwh":5,"region":"NO1"}`),   // throttled
		papEvent(a[1], vt-17, "stock.price.dropped_significantly", `{"price_nok_per_kwh":9,"region":"NO1"}`), // other type
	}, 4)
	relaytest.Eventually(t, "one invocation", func() bool { return len(deliveries(t, r, a[0], "delivered")) == 1 })
	d := deliveries(t, r, a[0], "")[0]
	if d.TriggerID != id || d.Agent != "planner-v1" || d.Risk != "low" || !strings.HasSuffix(d.Target, "/planner") {
		t.Fatalf("delivery %+v", d)
	}
	// Enabling the JSON one: it matches the events stored from then on.
	if ans := do(t, r, a[0], "PATCH", "/triggers/"+posts, `{"enabled":true}`); ans.Status != 200 || !strings.Contains(string(ans.Body), `"status":"active"`) {
		t.Fatalf("PATCH: %d %s", ans.Status, ans.Body)
	}
	if ans := do(t, r, a[1], "PATCH", "/triggers/"+posts, `{"enabled":false}`); ans.Status != 404 {
		t.Fatalf("PATCH by another agent: %d", ans.Status)
	}
	r.PostAll(t, []*protocol.Event{papEvent(a[1], vt-10, "x.y.z", `{"region":"NO2"}`)}, 1)
	relaytest.Eventually(t, "the enabled trigger delivers", func() bool { return len(deliveries(t, r, a[0], "delivered")) == 2 })
	if ans := do(t, r, a[0], "PATCH", "/triggers/"+posts, `{"enabled":false}`); ans.Status != 200 || !strings.Contains(string(ans.Body), `"paused_reason":"disabled`) {
		t.Fatalf("PATCH disable: %d %s", ans.Status, ans.Body)
	}
	r.PostAll(t, []*protocol.Event{papEvent(a[1], vt-9, "x.y.z", `{"region":"NO3"}`)}, 1)
	// Deleting the manifest: the next match is a dead letter naming it.
	if ans := do(t, r, a[0], "DELETE", "/manifests/planner-v1", ""); ans.Status != 200 {
		t.Fatalf("delete manifest: %d %s", ans.Status, ans.Body)
	}
	r.Clock.Add(2 * time.Hour) // past the throttle window
	r.PostAll(t, []*protocol.Event{papEvent(a[1], vt+7000, "energy.price.threshold_exceeded", `{"price_nok_per_kwh":4.82,"region":"NO1"}`)}, 1)
	relaytest.Eventually(t, "dead letter", func() bool {
		ds := deliveries(t, r, a[0], "failed")
		return len(ds) == 1 && strings.Contains(ds[0].LastError, "planner-v1 is not registered")
	})
	if n := len(deliveries(t, r, a[0], "delivered")); n != 2 {
		t.Fatalf("the disabled trigger delivered: %d", n)
	}
	// A browser may PATCH and DELETE (CORS preflight).
	pre := r.Do(t, "OPTIONS", "/triggers/"+posts, "", nil, "Origin", "https://app.example", "Access-Control-Request-Method", "PATCH")
	if m := pre.Header.Get("Access-Control-Allow-Methods"); !strings.Contains(m, "PATCH") || !strings.Contains(m, "DELETE") {
		t.Fatalf("preflight: %d %v", pre.Status, pre.Header)
	}
}

// auditActions lists the caller's audit actions, oldest first.
func auditActions(t *testing.T, r *relaytest.Relay, a taskstest.Agent) []string {
	t.Helper()
	ans := do(t, r, a, "GET", "/audit", "")
	if ans.Status != 200 {
		t.Fatalf("GET /audit: %d %s", ans.Status, ans.Body)
	}
	var out struct{ Audit []delivery.AuditRecord }
	_ = json.Unmarshal(ans.Body, &out)
	var acts []string
	for i := len(out.Audit) - 1; i >= 0; i-- {
		acts = append(acts, out.Audit[i].Action)
	}
	return acts
}

// outcomeEvents returns the relay's stored outcome events.
func outcomeEvents(t *testing.T, r *relaytest.Relay) []delivery.OutcomeContent {
	t.Helper()
	ans := r.Do(t, "GET", "/events?kinds=60&authors="+protocol.AgentIDOf(relayKey), "", nil)
	var out []protocol.Event
	if err := json.Unmarshal(ans.Body, &out); err != nil {
		t.Fatalf("GET /events: %s", ans.Body)
	}
	var cs []delivery.OutcomeContent
	for _, e := range out {
		var c delivery.OutcomeContent
		_ = json.Unmarshal([]byte(e.Content), &c)
		if e.TagValue("t") != c.Type || e.TagValue("triggered_by") != c.Data.DeliveryID {
			t.Fatalf("outcome event tags %v for %+v", e.Tags, c)
		}
		cs = append(cs, c)
	}
	return cs
}

// TestPAPRiskLevels: seed 002 §5/§6 — a medium-risk agent runs and is
// audited; a high-risk one waits in awaiting_approval until its owner
// approves (then runs) or rejects it, and expires at its deadline; each
// ending is a relay-signed outcome event (kind 60, t tag of its type)
// that other triggers match within the cascade limit; a manifest's
// limits and retry govern its invocations.
func TestPAPRiskLevels(t *testing.T) {
	r, _ := start(t, delivery.Options{ApprovalTTL: time.Hour})
	rc := newReceiver(t, func(n int, h hit) int {
		if strings.Contains(string(h.body), "fail-me") {
			return 500
		}
		return 200
	})
	a := taskstest.Pool(2)
	emit := `  on_complete:
    emit_event: "pap.agent.invocation.completed"
  on_failure:
    retry:
      max_attempts: 2
      backoff_seconds: 1
    emit_event: "pap.agent.invocation.failed"
`
	for _, m := range []string{manifestYAML("medium-agent", "medium", rc.URL+"/medium", emit+"  limits:\n    max_invocations: 2\n    window_seconds: 3600\n"),
		manifestYAML("high-agent", "low", rc.URL+"/high", emit+"  tools:\n    - name: pay\n      risk_override: high\n")} {
		// tools is given twice in the second: refused; sent again without.
		ans := do(t, r, a[0], "POST", "/manifests", m)
		if strings.Contains(m, "name: pay") {
			if ans.Status != 400 {
				t.Fatalf("duplicate key: %d %s", ans.Status, ans.Body)
			}
			m = strings.Replace(m, "  tools:\n    - name: get_device_list\n      source: mcp://smarthome-hub\n      risk_override: read_only\n", "", 1)
			ans = do(t, r, a[0], "POST", "/manifests", m)
		}
		if ans.Status != 201 {
			t.Fatalf("manifest: %d %s", ans.Status, ans.Body)
		}
	}
	if ans := do(t, r, a[0], "GET", "/manifests", ""); !strings.Contains(string(ans.Body), `"effective_risk_level":"high"`) {
		t.Fatalf("GET /manifests: %s", ans.Body)
	}
	trig := func(name, typ, agent string) string {
		return addTrigger(t, r, a[0], `{"pap_version":"0.2","trigger":{"id":"`+name+`","match":{"type":"`+typ+`"},"agent":"`+agent+`"}}`)
	}
	trig("med", "ticket.response.overdue", "medium-agent")
	trig("pay", "invoice.payment.due", "high-agent")
	// Triggers on the outcome events (the relay's own, by author).
	watch := addTrigger(t, r, a[1], `{"match":{"type":"pap.agent.invocation.completed","authors":["`+protocol.AgentIDOf(relayKey)+`"]},"target":{"type":"webhook","url":"`+rc.URL+`/watch"}}`)

	// Medium: runs at once, audited; the third in the window is over the limit.
	r.PostAll(t, []*protocol.Event{papEvent(a[1], vt-29, "ticket.response.overdue", `{"n":2,"fail-me":1}`)}, 1)
	r.PostAll(t, []*protocol.Event{papEvent(a[1], vt-30, "ticket.response.overdue", `{"n":1}`)}, 1)
	r.PostAll(t, []*protocol.Event{papEvent(a[1], vt-28, "ticket.response.overdue", `{"n":3}`)}, 1)
	relaytest.Eventually(t, "medium delivered", func() bool { return len(deliveries(t, r, a[0], "delivered")) == 1 })
	r.Clock.Add(3 * time.Second) // the failing one's retry
	relaytest.Eventually(t, "medium failed after the manifest's 2 attempts", func() bool {
		ds := deliveries(t, r, a[0], "failed")
		return len(ds) == 1 && ds[0].Attempts == 2
	})
	if n := len(deliveries(t, r, a[0], "")); n != 2 {
		t.Fatalf("max_invocations 2 let %d through", n)
	}

	// High: waits for approval.
	r.PostAll(t, []*protocol.Event{papEvent(a[1], vt-20, "invoice.payment.due", `{"n":1}`)}, 1)
	var waiting delivery.Delivery
	relaytest.Eventually(t, "awaiting approval", func() bool {
		ds := deliveries(t, r, a[0], "awaiting_approval")
		if len(ds) == 1 {
			waiting = ds[0]
		}
		return len(ds) == 1
	})
	if waiting.Risk != "high" {
		t.Fatalf("waiting %+v", waiting)
	}
	for _, h := range rc.got() {
		if strings.Contains(h.payload.IdempotencyKey, waiting.IdempotencyKey) {
			t.Fatal("sent before its approval")
		}
	}
	if ans := do(t, r, a[1], "POST", "/deliveries/"+waiting.ID+"/approve", ""); ans.Status != 404 {
		t.Fatalf("approve by another agent: %d", ans.Status)
	}
	if ans := r.Do(t, "POST", "/deliveries/"+waiting.ID+"/approve", "", nil); ans.Status != 401 {
		t.Fatalf("anonymous approve: %d", ans.Status)
	}
	if ans := do(t, r, a[0], "POST", "/deliveries/"+waiting.ID+"/approve", ""); ans.Status != 200 {
		t.Fatalf("approve: %d %s", ans.Status, ans.Body)
	}
	if ans := do(t, r, a[0], "POST", "/deliveries/"+waiting.ID+"/approve", ""); ans.Status != 409 {
		t.Fatalf("approve twice: %d %s", ans.Status, ans.Body)
	}
	relaytest.Eventually(t, "approved one delivered", func() bool { return len(deliveries(t, r, a[0], "delivered")) == 2 })

	// Rejected, and expired.
	r.PostAll(t, []*protocol.Event{papEvent(a[1], vt-10, "invoice.payment.due", `{"n":2}`)}, 1)
	relaytest.Eventually(t, "second awaiting", func() bool { return len(deliveries(t, r, a[0], "awaiting_approval")) == 1 })
	rej := deliveries(t, r, a[0], "awaiting_approval")[0]
	if ans := do(t, r, a[0], "POST", "/deliveries/"+rej.ID+"/reject", ""); ans.Status != 200 || !strings.Contains(string(ans.Body), "rejected by its owner") {
		t.Fatalf("reject: %d %s", ans.Status, ans.Body)
	}
	r.PostAll(t, []*protocol.Event{papEvent(a[1], vt-5, "invoice.payment.due", `{"n":3}`)}, 1)
	relaytest.Eventually(t, "third awaiting", func() bool { return len(deliveries(t, r, a[0], "awaiting_approval")) == 1 })
	exp := deliveries(t, r, a[0], "awaiting_approval")[0]
	r.Clock.Add(time.Hour + time.Second)
	relaytest.Eventually(t, "expired", func() bool {
		ds := deliveries(t, r, a[0], "failed")
		for _, d := range ds {
			if d.ID == exp.ID && d.LastError == "approval expired" {
				return true
			}
		}
		return false
	})
	if ans := do(t, r, a[0], "POST", "/deliveries/"+exp.ID+"/approve", ""); ans.Status != 409 {
		t.Fatalf("approve after expiry: %d %s", ans.Status, ans.Body)
	}
	want := []string{"invoked", "invoked", "delivered", "failed", "awaiting_approval", "approved", "delivered", "awaiting_approval", "rejected", "awaiting_approval", "expired"}
	got := auditActions(t, r, a[0])
	// The medium invocations' outcomes may commit in either order.
	sg, sw := slices.Clone(got), slices.Clone(want)
	slices.Sort(sg)
	slices.Sort(sw)
	if !slices.Equal(sg, sw) || got[len(got)-1] != "expired" {
		t.Fatalf("audit %v, want %v", got, want)
	}
	if ans := do(t, r, a[1], "GET", "/audit", ""); !strings.Contains(string(ans.Body), `"count":0`) {
		t.Fatalf("another agent's audit: %s", ans.Body)
	}

	// Outcome events: completed ×2, failed (after 2 attempts), rejected, expired.
	var outs []delivery.OutcomeContent
	relaytest.Eventually(t, "five outcome events", func() bool { outs = outcomeEvents(t, r); return len(outs) == 5 })
	byOutcome := map[string]int{}
	for _, c := range outs {
		byOutcome[c.Type+"/"+c.Data.Outcome]++
		if c.Data.Outcome == "failed" && c.Data.Attempts != 2 {
			t.Fatalf("failed outcome %+v", c)
		}
	}
	if byOutcome["pap.agent.invocation.completed/delivered"] != 2 || byOutcome["pap.agent.invocation.failed/failed"] != 1 ||
		byOutcome["pap.agent.invocation.failed/rejected"] != 1 || byOutcome["pap.agent.invocation.failed/expired"] != 1 {
		t.Fatalf("outcomes %v", byOutcome)
	}
	// The watcher's trigger matched the two completions, one level down
	// the cascade.
	relaytest.Eventually(t, "watcher delivered", func() bool { return len(deliveries(t, r, a[1], "delivered")) == 2 })
	for _, d := range deliveries(t, r, a[1], "") {
		if d.TriggerID != watch || d.Depth != 1 {
			t.Fatalf("watch delivery %+v", d)
		}
	}
}

// FuzzParseTrigger: any body either parses into a trigger whose spec
// re-encodes and parses again, or is refused with a 4xx code; nothing
// panics (YAML included).
func FuzzParseTrigger(f *testing.F) {
	f.Add([]byte("pap_version: \"0.2\"\ntrigger:\n  id: t1\n  match:\n    type: a.b.c\n  filter:\n    - path: \"$.data.x\"\n      operator: gt\n      value: 3\n  target: {type: webhook, url: \"https://x.example/h\"}\n"))
	f.Add([]byte(`{"pap_version":"0.2","trigger":{"id":"x","enabled":false,"match":{"type":"anp2.kind.1"},"agent":"a"}}`))
	f.Add([]byte(`{"match":{"kinds":[1]},"deduplication_key":"#d","target":{"type":"webhook","url":"https://x.example"}}`))
	f.Add([]byte("a: &x [1]\nb: *x\n"))
	f.Add([]byte("pap_version: '0.2'\ntrigger: {id: z, match: {type: q}, agent: p, throttle: {max_per_window: 1, window_seconds: 9}}\n"))
	f.Add([]byte("? [a]\n: 1\n"))
	f.Fuzz(func(t *testing.T, body []byte) {
		s, _, err := delivery.ParseTrigger(body, false)
		if err != nil {
			if c := protocol.CodeOf(err); c != delivery.CodeInvalidTrigger && c != delivery.CodeTargetRefused {
				t.Fatalf("error code %q: %v", c, err)
			}
			return
		}
		canon, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := delivery.ParseTrigger(canon, false); err != nil {
			t.Fatalf("canonical form %s does not parse: %v", canon, err)
		}
	})
}

// FuzzParseManifest: any body is a manifest or an invalid_manifest (or
// webhook_target_refused) error; nothing panics.
func FuzzParseManifest(f *testing.F) {
	f.Add([]byte(manifestYAML("p-1", "medium", "https://x.example/h", "  limits: {max_invocations: 2, window_seconds: 60, max_runtime_seconds: 5}\n")))
	f.Add([]byte(`{"pap_version":"0.2","agent":{"id":"a","risk_level":"high","target":{"type":"a2a","url":"https://x.example/card"}}}`))
	f.Add([]byte("pap_version: \"0.2\"\nagent: {id: a, risk_level: low, target: {type: webhook, url: \"https://x\"}, on_failure: {retry: {max_attempts: 2, backoff_seconds: 1}}}\n"))
	f.Fuzz(func(t *testing.T, body []byte) {
		mf, err := delivery.ParseManifest(body, false, 8)
		if err != nil {
			if c := protocol.CodeOf(err); c != delivery.CodeInvalidManifest && c != delivery.CodeTargetRefused {
				t.Fatalf("error code %q: %v", c, err)
			}
			return
		}
		if mf.Risk() == "" || mf.Target == nil {
			t.Fatalf("manifest without risk or target: %+v", mf)
		}
	})
}

// TestPAPOutcomeEventsBounded: a target that fails every invocation
// cannot flood the log with failure events: at most
// OutcomeEventsPerMinute per owner per minute are stored, the rest are
// dropped and counted.
func TestPAPOutcomeEventsBounded(t *testing.T) {
	r, _ := start(t, delivery.Options{BreakerFailures: 1000})
	rc := newReceiver(t, func(int, hit) int { return 500 })
	a := taskstest.Pool(2)
	mf := manifestYAML("flaky", "low", rc.URL+"/flaky", "  on_failure:\n    retry:\n      max_attempts: 1\n      backoff_seconds: 0\n    emit_event: \"pap.agent.invocation.failed\"\n")
	if ans := do(t, r, a[0], "POST", "/manifests", mf); ans.Status != 201 {
		t.Fatalf("manifest: %d %s", ans.Status, ans.Body)
	}
	addTrigger(t, r, a[0], `{"pap_version":"0.2","trigger":{"id":"flood","match":{"type":"disk.usage.high"},"agent":"flaky"}}`)
	n := delivery.OutcomeEventsPerMinute + 10
	var evs []*protocol.Event
	for i := range n {
		evs = append(evs, papEvent(a[1], vt-100+int64(i), "disk.usage.high", `{"i":`+strconv.Itoa(i)+`}`))
	}
	r.PostAll(t, evs, n)
	relaytest.Eventually(t, "every invocation failed", func() bool { return len(deliveries(t, r, a[0], "failed")) == n })
	relaytest.Eventually(t, "bounded outcome events", func() bool {
		m := string(r.Do(t, "GET", "/metrics", "", nil).Body)
		return strings.Contains(m, "anp2_pap_outcome_events_total "+strconv.Itoa(delivery.OutcomeEventsPerMinute)+"\n") &&
			strings.Contains(m, "anp2_pap_outcome_events_dropped_total 10\n")
	})
	if got := len(outcomeEvents(t, r)); got != delivery.OutcomeEventsPerMinute {
		t.Fatalf("%d outcome events stored, want %d", got, delivery.OutcomeEventsPerMinute)
	}
}

// TestDedupNeverReplacesAwaitingApproval: a re-announcement never swaps
// the event of a delivery its owner is asked to approve; it waits for an
// approval of its own.
func TestDedupNeverReplacesAwaitingApproval(t *testing.T) {
	r, _ := start(t, delivery.Options{})
	rc := newReceiver(t, nil)
	a := taskstest.Pool(2)
	if ans := do(t, r, a[0], "POST", "/manifests", manifestYAML("payer", "high", rc.URL, "")); ans.Status != 201 {
		t.Fatalf("manifest: %d %s", ans.Status, ans.Body)
	}
	addTrigger(t, r, a[0], `{"pap_version":"0.2","trigger":{"id":"pay","match":{"type":"invoice.due"},"deduplication_key":"$.data.invoice","agent":"payer"}}`)
	first := papEvent(a[1], vt-20, "invoice.due", `{"invoice":"inv-1","amount":10}`)
	r.PostAll(t, []*protocol.Event{first}, 1)
	relaytest.Eventually(t, "awaiting", func() bool { return len(deliveries(t, r, a[0], "awaiting_approval")) == 1 })
	r.PostAll(t, []*protocol.Event{papEvent(a[1], vt-19, "invoice.due", `{"invoice":"inv-1","amount":10000}`)}, 1)
	relaytest.Eventually(t, "two awaiting", func() bool { return len(deliveries(t, r, a[0], "awaiting_approval")) == 2 })
	for _, d := range deliveries(t, r, a[0], "awaiting_approval") {
		if d.DeduplicationKey != "inv-1" {
			t.Fatalf("delivery %+v", d)
		}
	}
	if ds := deliveries(t, r, a[0], ""); ds[len(ds)-1].EventID != first.ID {
		t.Fatalf("the first delivery's event was replaced: %+v", ds)
	}
}
