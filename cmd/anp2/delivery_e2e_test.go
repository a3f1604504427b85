package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/anp2net/relay/client"
	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/delivery"
)

// TestKill9DeliversEveryMatch registers a webhook trigger on a real relay
// process, publishes matching events while the relay delivers them to a
// real receiver on loopback, kills the relay with SIGKILL mid-way,
// restarts it on the same database and requires every acknowledged event
// to reach the receiver, with a second copy only for the few attempts
// that were in flight at the kill (at least once, never lost).
func TestKill9DeliversEveryMatch(t *testing.T) { kill9(t, delivery.TargetWebhook) }

// TestKill9DeliversEveryA2AMatch is TestKill9DeliversEveryMatch with an
// A2A agent as the target: message/send to its card's JSON-RPC url.
func TestKill9DeliversEveryA2AMatch(t *testing.T) { kill9(t, delivery.TargetA2A) }

// eventOf returns the event id a webhook body or an A2A message/send
// carries.
func eventOf(body []byte) string {
	var e struct {
		ID string `json:"id"`
	}
	var hook delivery.Payload
	var rpc struct {
		Params struct {
			Message struct {
				Parts []struct {
					Data json.RawMessage `json:"data"`
				} `json:"parts"`
			} `json:"message"`
		} `json:"params"`
	}
	if json.Unmarshal(body, &hook) == nil && hook.Event != nil {
		_ = json.Unmarshal(hook.Event, &e)
	} else if json.Unmarshal(body, &rpc) == nil && len(rpc.Params.Message.Parts) == 1 {
		_ = json.Unmarshal(rpc.Params.Message.Parts[0].Data, &e)
	}
	return e.ID
}

func kill9(t *testing.T, target string) {
	t.Setenv("ANP2_WEBHOOK_ALLOW_PRIVATE", "1")
	var mu sync.Mutex
	byKey := map[string]int{}
	events := map[string]bool{}
	var slow atomic.Int64
	var serial sync.Mutex
	slow.Store(40)
	var recv *httptest.Server
	recv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/card" {
			fmt.Fprintf(w, `{"name":"receiver","url":%q,"preferredTransport":"JSONRPC"}`, recv.URL+"/rpc")
			return
		}
		body, _ := io.ReadAll(r.Body)
		// Before the kill the receiver is slow (one request at a time,
		// 40 ms each, whatever the relay's number of workers), so a
		// backlog is sure to be queued when the relay dies however busy
		// the machine is; after the restart it answers at once.
		if d := slow.Load(); d > 0 {
			serial.Lock()
			time.Sleep(time.Duration(d) * time.Millisecond)
			serial.Unlock()
		}
		mu.Lock()
		byKey[r.Header.Get(delivery.HeaderIdempotencyKey)]++
		events[eventOf(body)] = true
		mu.Unlock()
		if r.URL.Path == "/rpc" {
			var req struct {
				ID json.RawMessage `json:"id"`
			}
			_ = json.Unmarshal(body, &req)
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"kind":"message","role":"agent","messageId":"ok","parts":[{"kind":"text","text":"ok"}]}}`, req.ID)
		}
	}))
	defer recv.Close()
	url := recv.URL + "/hook"
	if target == delivery.TargetA2A {
		url = recv.URL + "/card"
	}

	db := filepath.Join(t.TempDir(), "push.db")
	flags := []string{"--rate-agent", "0", "--rate-ip", "0"}
	p := startProc(t, db, flags...)
	owner := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, 32))
	spec := []byte(`{"match":{"kinds":[1],"tags":{"t":["push"]}},"target":{"type":"` + target + `","url":"` + url + `"}}`)
	req, _ := http.NewRequest("POST", p.base+"/triggers", bytes.NewReader(spec))
	auth, err := delivery.RegistrationAuth(context.Background(), owner, p.base+"/triggers", spec, time.Now().Unix(), 20)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", auth)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 201 {
		t.Fatalf("POST /triggers: %v %v", err, resp)
	}
	resp.Body.Close()

	var acked []string
	var amu sync.Mutex
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	cl := client.New(p.base)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{byte(w + 1)}, 32))
			for i := 0; ctx.Err() == nil && i < 400; i++ {
				e := &protocol.Event{CreatedAt: time.Now().Unix(), Kind: 1, Content: fmt.Sprint(w, "-", i), Tags: [][]string{{"t", "push"}}}
				e.Sign(k)
				if res, err := cl.Publish(ctx, e, false); err == nil && res.Accepted {
					amu.Lock()
					acked = append(acked, e.ID)
					amu.Unlock()
				}
			}
		}()
	}
	for start := time.Now(); ; time.Sleep(5 * time.Millisecond) {
		mu.Lock()
		got := len(events)
		mu.Unlock()
		amu.Lock()
		n := len(acked)
		amu.Unlock()
		if n >= 300 && got >= 10 || time.Since(start) > 30*time.Second {
			break
		}
	}
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	p.cmd.Wait()
	cancel()
	wg.Wait()
	mu.Lock()
	before := len(events)
	mu.Unlock()
	if before >= len(acked) {
		t.Fatalf("everything (%d) was delivered before the kill; the test proves nothing", before)
	}

	slow.Store(0)
	startProc(t, db, flags...)
	missing := func() int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, id := range acked {
			if !events[id] {
				n++
			}
		}
		return n
	}
	for deadline := time.Now().Add(60 * time.Second); missing() > 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d acknowledged events never delivered after the restart", missing(), len(acked))
		}
	}
	mu.Lock()
	defer mu.Unlock()
	dups := 0
	for _, n := range byKey {
		if n > 1 {
			dups++
		}
	}
	if dups > 64 { // at most one per worker (64) in flight at the kill
		t.Fatalf("%d idempotency keys delivered more than once", dups)
	}
	t.Logf("%d events acknowledged, %d delivered before the kill, all delivered after the restart, %d delivered twice", len(acked), before, dups)
}

// TestBenchPush runs anp2 bench --push small against its own anp2 serve
// process: 60 WebSocket clients (from two loopback addresses, 50 per
// address), 60 webhook triggers (two owners) and 40 events over 3
// topics, so 20 subscribers and 20 triggers follow each event: every one
// of the 800 frames and 800 deliveries must arrive.
func TestBenchPush(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a relay process and 60 clients")
	}
	out, err := exec.Command(binary, "bench", "--push", "--push-subscribers", "60", "--push-triggers", "60",
		"--push-events", "40", "--push-rate", "200", "--push-topics", "3").CombinedOutput()
	if err != nil {
		t.Fatalf("bench: %v\n%s", err, out)
	}
	for _, want := range []string{"WebSocket: 800/800 frames", "webhooks:  800/800 deliveries", "publish rate: ", "failed 0 | 0", "relay CPU: "} {
		if !bytes.Contains(out, []byte(want)) {
			t.Fatalf("bench output lacks %q:\n%s", want, out)
		}
	}
}
