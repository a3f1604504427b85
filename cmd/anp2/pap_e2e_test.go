package main

import (
	"crypto/ed25519"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/delivery"
)

// papReceiver is a webhook receiver on loopback: it records each request
// body by path; requests to /hold wait until hold is closed.
type papReceiver struct {
	*httptest.Server
	mu   sync.Mutex
	got  map[string][]string
	hold chan struct{}
}

func newPAPReceiver(t *testing.T) *papReceiver {
	rc := &papReceiver{got: map[string][]string{}, hold: make(chan struct{})}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		rc.got[r.URL.Path] = append(rc.got[r.URL.Path], string(body))
		rc.mu.Unlock()
		if r.URL.Path == "/hold" {
			<-rc.hold
		}
	}))
	t.Cleanup(func() {
		select {
		case <-rc.hold:
		default:
			close(rc.hold)
		}
		rc.Close()
	})
	return rc
}

func (rc *papReceiver) bodies(path string) []string {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]string(nil), rc.got[path]...)
}

// papGet is an authenticated GET as k, decoded into out.
func papGet(t *testing.T, base string, k ed25519.PrivateKey, path string, out any) {
	t.Helper()
	st, _, b := httpDo(t, "GET", base+path, nil, "Authorization", protocol.HTTPAuth(k, "GET", base+path, nil, time.Now().Unix()))
	if st != 200 || json.Unmarshal(b, out) != nil {
		t.Fatalf("GET %s: %d %s", path, st, b)
	}
}

func papDeliveries(t *testing.T, base string, k ed25519.PrivateKey, status string) []delivery.Delivery {
	t.Helper()
	var ans struct{ Deliveries []delivery.Delivery }
	papGet(t, base, k, "/deliveries?status="+status, &ans)
	return ans.Deliveries
}

// papWait polls cond (a state the relay reaches) for up to 20 s.
func papWait(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(20 * time.Second); time.Now().Before(end); time.Sleep(25 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("%s: not reached", what)
}

// papPublish publishes a PAP event (seed 002 §3) as the content of a kind
// 1 tagged with its type, plus tags.
func papPublish(t *testing.T, base string, k ed25519.PrivateKey, typ, data string, tags ...[]string) *protocol.Event {
	t.Helper()
	e := signed(k, protocol.KindPost, `{"pap_version":"0.2","id":"evt","type":"`+typ+`","source":"e2e","time":"2026-03-11T06:00:00Z","data":`+data+`}`,
		append([][]string{{"t", typ}}, tags...)...)
	if st, _, code := publishRaw(t, base, e); st != 200 {
		t.Fatalf("publish: %d %s", st, code)
	}
	return e
}

// TestPAPEndToEnd drives a real anp2 serve process through seeds 002 and
// 000 with loopback webhooks: manifests and trigger documents (YAML and
// JSON) paid for with the registration proof of work; a medium-risk
// agent's invocation audited; a high-risk one held in awaiting_approval
// until its owner approves it; its relay-signed outcome event matched by
// another agent's trigger (after a kill -9 and restart between the
// hold and the approval); a disabled trigger matching nothing; and a
// deduplication key replacing an in-flight (dispatched) delivery.
func TestPAPEndToEnd(t *testing.T) {
	db := filepath.Join(t.TempDir(), "pap.db")
	env := []string{"ANP2_WEBHOOK_ALLOW_PRIVATE=1", "ANP2_TRIGGER_POW=8"}
	flags := []string{"--rate-agent", "0", "--rate-ip", "0", "--rate-auth", "0"}
	p := startProcEnv(t, env, db, flags...)
	rc := newPAPReceiver(t)
	owner, watcher, sender := deliveryKey(31), deliveryKey(32), deliveryKey(33)

	manifest := func(id, risk, path string) string {
		return "pap_version: \"0.2\"\nagent:\n  id: " + id + "\n  risk_level: " + risk + "\n  target:\n    type: webhook\n    url: \"" + rc.URL + path + "\"\n" +
			"  limits:\n    max_runtime_seconds: 5\n  on_complete:\n    emit_event: \"pap.agent.invocation.completed\"\n"
	}
	post := func(k ed25519.PrivateKey, path, body string, bits int) (int, map[string]any) {
		return deliveryPost(t, p.base+path, body, deliveryAuth(t, k, p.base+path, body, bits))
	}
	if st, ans := post(owner, "/manifests", manifest("planner", "medium", "/planner"), 0); st != 400 || ans["code"] != delivery.CodeTriggerPoW {
		t.Fatalf("manifest without proof of work: %d %v", st, ans)
	}
	for _, m := range []string{manifest("planner", "medium", "/planner"), manifest("payer", "high", "/payer")} {
		if st, ans := post(owner, "/manifests", m, 8); st != 201 {
			t.Fatalf("manifest: %d %v", st, ans)
		}
	}
	planDoc := "pap_version: \"0.2\"\ntrigger:\n  id: plan\n  match:\n    type: energy.price.threshold_exceeded\n  filter:\n    - path: \"$.data.price\"\n      operator: gt\n      value: 3\n  agent: planner\n"
	if st, ans := post(owner, "/triggers", planDoc, 0); st != 400 || ans["code"] != delivery.CodeTriggerPoW {
		t.Fatalf("document without proof of work: %d %v", st, ans)
	}
	// As YAML, with a YAML content type.
	st, _, raw := httpDo(t, "POST", p.base+"/triggers", []byte(planDoc), "Content-Type", "application/yaml",
		"Authorization", deliveryAuth(t, owner, p.base+"/triggers", planDoc, 8))
	var ans map[string]any
	if st != 201 || json.Unmarshal(raw, &ans) != nil {
		t.Fatalf("trigger document: %d %s", st, raw)
	}
	plan := ans["id"].(string)
	if st, ans := post(owner, "/triggers", `{"pap_version":"0.2","trigger":{"id":"pay","match":{"type":"invoice.payment.due"},"agent":"payer"}}`, 8); st != 201 {
		t.Fatalf("JSON document: %d %v", st, ans)
	}
	if st, ans := post(watcher, "/triggers", `{"pap_version":"0.2","trigger":{"id":"watch","match":{"type":"pap.agent.invocation.completed"},"target":{"type":"webhook","url":"`+rc.URL+`/watch"}}}`, 8); st != 201 {
		t.Fatalf("watch document: %d %v", st, ans)
	}
	if st, ans := post(watcher, "/triggers", `{"match":{"tags":{"t":["feed.item.published"]}},"deduplication_key":"#d","target":{"type":"webhook","url":"`+rc.URL+`/hold"}}`, 8); st != 201 {
		t.Fatalf("dedup trigger: %d %v", st, ans)
	}

	// Medium: runs at once, audited.
	papPublish(t, p.base, sender, "energy.price.threshold_exceeded", `{"price":2}`) // filtered out
	papPublish(t, p.base, sender, "energy.price.threshold_exceeded", `{"price":4.8}`)
	papWait(t, "planner invoked", func() bool { return len(papDeliveries(t, p.base, owner, "delivered")) == 1 })
	if n := len(rc.bodies("/planner")); n != 1 {
		t.Fatalf("planner got %d requests", n)
	}
	var audit struct{ Audit []delivery.AuditRecord }
	papWait(t, "audited", func() bool { papGet(t, p.base, owner, "/audit", &audit); return len(audit.Audit) == 2 })
	if audit.Audit[0].Action != "delivered" || audit.Audit[1].Action != "invoked" || audit.Audit[1].Risk != "medium" {
		t.Fatalf("audit %+v", audit.Audit)
	}

	// High: awaits its owner's approval.
	papPublish(t, p.base, sender, "invoice.payment.due", `{"amount":100}`)
	var held delivery.Delivery
	papWait(t, "awaiting approval", func() bool {
		ds := papDeliveries(t, p.base, owner, "awaiting_approval")
		if len(ds) == 1 {
			held = ds[0]
		}
		return len(ds) == 1
	})
	// The manifests, triggers and the waiting delivery outlive a restart.
	p.cmd.Process.Kill()
	p.cmd.Wait()
	p = startProcEnv(t, env, db, flags...)
	if ds := papDeliveries(t, p.base, owner, "awaiting_approval"); len(ds) != 1 || ds[0].ID != held.ID {
		t.Fatalf("after the restart: %+v", ds)
	}
	approve := p.base + "/deliveries/" + held.ID + "/approve"
	if st, _, b := httpDo(t, "POST", approve, nil, "Authorization", protocol.HTTPAuth(watcher, "POST", approve, nil, time.Now().Unix())); st != 404 {
		t.Fatalf("approval by another agent: %d %s", st, b)
	}
	if n := len(rc.bodies("/payer")); n != 0 {
		t.Fatalf("payer invoked before its approval: %d", n)
	}
	if st, _, b := httpDo(t, "POST", approve, nil, "Authorization", protocol.HTTPAuth(owner, "POST", approve, nil, time.Now().Unix())); st != 200 {
		t.Fatalf("approve: %d %s", st, b)
	}
	papWait(t, "payer invoked", func() bool { return len(rc.bodies("/payer")) == 1 })

	// The outcome events: relay-signed kind 60s; the watcher's trigger
	// matched both completions, one level down the cascade.
	papWait(t, "watcher got both completions", func() bool { return len(papDeliveries(t, p.base, watcher, "delivered")) == 2 })
	for _, d := range papDeliveries(t, p.base, watcher, "delivered") {
		if d.Depth != 1 {
			t.Fatalf("watch delivery %+v", d)
		}
	}
	_, _, b := httpDo(t, "GET", p.base+"/events?kinds=60", nil)
	var outs []protocol.Event
	if json.Unmarshal(b, &outs) != nil || len(outs) != 2 {
		t.Fatalf("outcome events: %s", b)
	}
	relayID := outs[0].AgentID
	for _, e := range outs {
		var c delivery.OutcomeContent
		_ = json.Unmarshal([]byte(e.Content), &c)
		if e.AgentID != relayID || e.AgentID == protocol.AgentIDOf(owner) || e.TagValue("t") != delivery.EventCompleted ||
			e.TagValue("p") != protocol.AgentIDOf(owner) || c.Data.Outcome != "delivered" || c.Data.Attempts != 1 {
			t.Fatalf("outcome event %+v", e)
		}
	}

	// enabled: false pauses the planner trigger without deleting it.
	patch := p.base + "/triggers/" + plan
	body := []byte(`{"enabled":false}`)
	if st, _, b := httpDo(t, "PATCH", patch, body, "Content-Type", "application/json", "Authorization", protocol.HTTPAuth(owner, "PATCH", patch, body, time.Now().Unix())); st != 200 || !strings.Contains(string(b), `"enabled":false`) {
		t.Fatalf("PATCH: %d %s", st, b)
	}
	papPublish(t, p.base, sender, "energy.price.threshold_exceeded", `{"price":9}`)

	// Seed 000: the dedup trigger's first delivery is dispatched (held by
	// the receiver); a re-announcement with the same key supersedes it.
	first := papPublish(t, p.base, sender, "feed.item.published", `{"v":1}`, []string{"d", "feed-1"})
	papWait(t, "dispatched", func() bool {
		ds := papDeliveries(t, p.base, watcher, "dispatched")
		return len(ds) == 1 && ds[0].EventID == first.ID && len(rc.bodies("/hold")) == 1
	})
	second := papPublish(t, p.base, sender, "feed.item.published", `{"v":2}`, []string{"d", "feed-1"})
	// (pending again, or already dispatched again to the held receiver)
	papWait(t, "superseded", func() bool {
		var keyed []delivery.Delivery
		for _, d := range papDeliveries(t, p.base, watcher, "") {
			if d.DeduplicationKey == "feed-1" {
				keyed = append(keyed, d)
			}
		}
		return len(keyed) == 1 && keyed[0].EventID == second.ID && keyed[0].OwnerLease >= 3
	})
	close(rc.hold)
	papWait(t, "re-announcement delivered", func() bool {
		for _, d := range papDeliveries(t, p.base, watcher, "delivered") {
			if d.EventID == second.ID {
				return true
			}
		}
		return false
	})
	if hb := rc.bodies("/hold"); !strings.Contains(hb[len(hb)-1], second.ID) {
		t.Fatalf("the receiver's last /hold request is not the re-announcement: %d requests", len(hb))
	}
	// The planner trigger stayed paused: the event published before the
	// feed events (matched in log order) queued nothing.
	if ds := papDeliveries(t, p.base, owner, ""); len(ds) != 2 {
		t.Fatalf("owner's deliveries after the pause: %+v", ds)
	}
}
