package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anp2net/relay/client"
	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/tasks/taskstest"
)

// a2aCall posts one JSON-RPC request to base's /a2a, signed with key's D4
// header (URL, method and body bound) unless key is nil, and returns the
// HTTP status and the raw answer.
func a2aCall(t *testing.T, base string, key ed25519.PrivateKey, method string, params any) (int, []byte) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	req, _ := http.NewRequest(http.MethodPost, base+"/a2a", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if key != nil {
		req.Header.Set("Authorization", protocol.HTTPAuth(key, http.MethodPost, base+"/a2a", body, time.Now().Unix()))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// a2aErrorCode returns the JSON-RPC error code of an answer, 0 for a result.
func a2aErrorCode(t *testing.T, b []byte) int {
	t.Helper()
	var r struct {
		Error *struct{ Code int } `json:"error"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("not JSON-RPC: %s", b)
	}
	if r.Error == nil {
		return 0
	}
	return r.Error.Code
}

// a2aReceiver records the push notifications a relay sends it, with the
// token header of each.
type a2aReceiver struct {
	*httptest.Server
	mu     sync.Mutex
	tokens []string
}

func newA2AReceiver(t *testing.T) *a2aReceiver {
	rc := &a2aReceiver{}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		rc.mu.Lock()
		rc.tokens = append(rc.tokens, r.URL.Path+" "+r.Header.Get("X-A2A-Notification-Token"))
		rc.mu.Unlock()
	}))
	t.Cleanup(rc.Close)
	return rc
}

func (rc *a2aReceiver) got() []string {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]string(nil), rc.tokens...)
}

// TestAbuseA2APushConfigs: on a real relay process, a task's push config
// is its requester's. A stranger (anonymous, or signed by another key)
// cannot list, get, set or delete it: each answer is JSON-RPC -32001 and
// none carries the token. The requester's own list and get do not show
// the token either; only its notifications carry it, to its own URL.
func TestAbuseA2APushConfigs(t *testing.T) {
	p := startProcEnv(t, []string{"ANP2_WEBHOOK_ALLOW_PRIVATE=1"}, filepath.Join(t.TempDir(), "r.db"))
	recv := newA2AReceiver(t)
	requester, stranger := taskstest.NewAgent("a2a-abuse-requester"), taskstest.NewAgent("a2a-abuse-stranger")
	now := time.Now().Unix()
	task := taskstest.Request(requester, now-5, now+3600, taskstest.Reward{}, false)
	if err := protocol.Mine(context.Background(), task, 12); err != nil {
		t.Fatal(err)
	}
	task.Sign(requester.Key)
	if _, err := client.New(p.base).Publish(context.Background(), task, false); err != nil {
		t.Fatal(err)
	}
	const secret = "the-requesters-secret-token"
	own := map[string]any{"taskId": task.ID, "pushNotificationConfig": map[string]any{"id": "mine", "url": recv.URL + "/mine", "token": secret}}
	st, b := a2aCall(t, p.base, requester.Key, "tasks/pushNotificationConfig/set", own)
	if st != 200 || a2aErrorCode(t, b) != 0 {
		t.Fatalf("the requester's set: %d %s", st, b)
	}
	if bytes.Contains(b, []byte(secret)) {
		t.Errorf("set echoed the token: %s", b)
	}

	hijack := map[string]any{"taskId": task.ID, "pushNotificationConfig": map[string]any{"id": "mine", "url": recv.URL + "/stolen", "token": "x"}}
	fill := map[string]any{"taskId": task.ID, "pushNotificationConfig": map[string]any{"url": recv.URL + "/filler"}}
	for _, c := range []struct {
		method string
		params any
	}{
		{"tasks/pushNotificationConfig/list", map[string]any{"id": task.ID}},
		{"tasks/pushNotificationConfig/get", map[string]any{"id": task.ID}},
		{"tasks/pushNotificationConfig/get", map[string]any{"id": task.ID, "pushNotificationConfigId": "mine"}},
		{"tasks/pushNotificationConfig/set", hijack},
		{"tasks/pushNotificationConfig/set", fill},
		{"tasks/pushNotificationConfig/delete", map[string]any{"id": task.ID, "pushNotificationConfigId": "mine"}},
	} {
		for who, key := range map[string]ed25519.PrivateKey{"anonymous": nil, "stranger": stranger.Key} {
			st, b := a2aCall(t, p.base, key, c.method, c.params)
			if bytes.Contains(b, []byte(secret)) {
				t.Errorf("%s %s saw the token: %s", who, c.method, b)
			}
			if st != 200 || a2aErrorCode(t, b) != -32001 {
				t.Errorf("%s %s: %d %s, want JSON-RPC -32001", who, c.method, st, b)
			}
		}
	}

	// The requester's config is whole and alone, and shows no token.
	st, b = a2aCall(t, p.base, requester.Key, "tasks/pushNotificationConfig/list", map[string]any{"id": task.ID})
	var list []struct {
		PushNotificationConfig struct{ ID, URL, Token string } `json:"pushNotificationConfig"`
	}
	if st != 200 || json.Unmarshal(extractResult(t, b), &list) != nil || len(list) != 1 ||
		list[0].PushNotificationConfig.URL != recv.URL+"/mine" || bytes.Contains(b, []byte(secret)) {
		t.Fatalf("the requester's list: %d %s", st, b)
	}
	waitFor(t, "the requester's notification", func() bool { return len(recv.got()) > 0 })
	for _, g := range recv.got() {
		if g != "/mine "+secret {
			t.Errorf("a notification went to %q", g)
		}
	}
}

// extractResult returns a JSON-RPC answer's result, failing on an error.
func extractResult(t *testing.T, b []byte) json.RawMessage {
	t.Helper()
	var r struct {
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	if json.Unmarshal(b, &r) != nil || r.Error != nil {
		t.Fatalf("JSON-RPC error: %s", b)
	}
	return r.Result
}

// TestAbuseNullBatchAndCommaTags: on a real relay process, a null body
// to POST /events/batch or POST /gossip (JSON or CBOR) is a 400 with its
// code and stores nothing, not an empty batch answered 200; and a tag
// value holding a comma, accepted at publish, is found by t= with the
// comma written \, (and only by it).
func TestAbuseNullBatchAndCommaTags(t *testing.T) {
	p := startProc(t, filepath.Join(t.TempDir(), "r.db"))
	for _, c := range []struct {
		path, ct string
		body     []byte
	}{
		{"/events/batch", "application/json", []byte("null")},
		{"/api/events/batch", protocol.ContentTypeCBOR, []byte{0xf6}},
		{"/gossip", "application/json", []byte(" null\n")},
		{"/api/gossip", protocol.ContentTypeCBOR, []byte{0xf6}},
	} {
		resp, err := http.Post(p.base+c.path, c.ct, bytes.NewReader(c.body))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var e struct{ Code string }
		if resp.StatusCode != 400 || json.Unmarshal(b, &e) != nil || e.Code == "" {
			t.Errorf("POST %s %s null: %d %s, want 400 with a code", c.path, c.ct, resp.StatusCode, b)
		}
	}

	a := taskstest.NewAgent("comma-tagger")
	now := time.Now().Unix()
	both := a.Sign(protocol.KindPost, now-2, "both", []string{"t", "red,green"})
	red := a.Sign(protocol.KindPost, now-1, "red", []string{"t", "red"})
	for _, e := range []*protocol.Event{both, red} {
		if _, err := client.New(p.base).Publish(context.Background(), e, false); err != nil {
			t.Fatal(err)
		}
	}
	for q, want := range map[string]string{`red\,green`: both.ID, `red`: red.ID} {
		resp, err := http.Get(p.base + "/events?" + url.Values{"t": {q}}.Encode())
		if err != nil {
			t.Fatal(err)
		}
		var evs []struct{ ID string }
		err = json.NewDecoder(resp.Body).Decode(&evs)
		resp.Body.Close()
		if err != nil || len(evs) != 1 || evs[0].ID != want {
			var ids []string
			for _, e := range evs {
				ids = append(ids, e.ID)
			}
			t.Errorf("t=%s: %v (%v), want only %s", q, strings.Join(ids, ","), err, want)
		}
	}
}
