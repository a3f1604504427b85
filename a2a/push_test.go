package a2a_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/anp2net/relay/a2a"
	"github.com/anp2net/relay/client"
	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay"
	"github.com/anp2net/relay/relay/delivery"
	"github.com/anp2net/relay/relay/relaytest"
	"github.com/anp2net/relay/relay/sqlite"
	"github.com/anp2net/relay/tasks/taskstest"
)

// startPushRelay runs a real relay with the delivery engine as the A2A
// adapter's Pusher (loopback receivers allowed).
func startPushRelay(t *testing.T) *testRelay {
	t.Helper()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "r.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	clk := &clock{t: time.Unix(t0, 0)}
	cfg := relay.DefaultConfig()
	cfg.Now = clk.now
	cfg.RatePerAgent, cfg.RatePerIP = 0, 0
	cfg.Logger = slog.New(slog.DiscardHandler)
	d := delivery.NewModule(delivery.Options{AllowPrivate: true, Poll: 10 * time.Millisecond})
	cfg.Modules = []relay.Module{d, a2a.NewModule(a2a.Options{Push: d})}
	srv, err := relay.New(cfg, st)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		<-done
		st.Close()
	})
	base := "http://" + ln.Addr().String()
	return &testRelay{base: base, clock: clk, pub: client.New(base)}
}

// pushReceiver records the A2A push notifications it gets.
type pushReceiver struct {
	*httptest.Server
	mu    sync.Mutex
	tasks []a2a.Task
	token []string
}

func newPushReceiver(t *testing.T) *pushReceiver {
	pr := &pushReceiver{}
	pr.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var task a2a.Task
		if err := json.Unmarshal(b, &task); err != nil {
			w.WriteHeader(400)
			return
		}
		pr.mu.Lock()
		pr.tasks = append(pr.tasks, task)
		pr.token = append(pr.token, r.Header.Get(delivery.HeaderA2AToken))
		pr.mu.Unlock()
	}))
	t.Cleanup(pr.Close)
	return pr
}

func (pr *pushReceiver) states(taskID string) []a2a.TaskState {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	var out []a2a.TaskState
	for _, t := range pr.tasks {
		if t.ID == taskID {
			out = append(out, t.Status.State)
		}
	}
	return out
}

// postAs posts one request with id 1 and a D4 Authorization header signed
// by key (at the relay clock, the body bound by its payload tag).
func (r *testRelay) postAs(t testing.TB, key ed25519.PrivateKey, method string, params any) rpcAnswer {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	auth := protocol.HTTPAuth(key, http.MethodPost, r.base+"/a2a", b, r.clock.now().Unix())
	return post(t, r.base+"/a2a", string(b), "Authorization", auth)
}

// callAs is postAs's reply.
func (r *testRelay) callAs(t testing.TB, key ed25519.PrivateKey, method string, params any) reply {
	t.Helper()
	return r.postAs(t, key, method, params).reply(t)
}

// TestPushNotifications: tasks/pushNotificationConfig/set on a native task
// by its requester makes the relay POST the task to the webhook, with the
// token, once per state; get, list and delete manage the configs and never
// show the token; the card says pushNotifications: true.
func TestPushNotifications(t *testing.T) {
	r := startPushRelay(t)
	pr := newPushReceiver(t)
	var card a2a.AgentCard
	resp, err := http.Get(r.base + "/.well-known/agent-card.json")
	if err != nil {
		t.Fatal(err)
	}
	_ = json.NewDecoder(resp.Body).Decode(&card)
	resp.Body.Close()
	if !card.Capabilities.PushNotifications {
		t.Fatal("card does not announce push notifications")
	}
	if rep := r.callAs(t, requester.Key, "tasks/pushNotificationConfig/set", map[string]any{"taskId": "nope",
		"pushNotificationConfig": map[string]any{"url": pr.URL}}); rep.Error == nil || rep.Error.Code != a2a.CodeTaskNotFound {
		t.Fatalf("unknown task: %+v", rep.Error)
	}
	req := request(t, t0-500, t0+3600)
	r.publish(t, req)
	var set struct {
		TaskID                 string `json:"taskId"`
		PushNotificationConfig struct{ ID, URL, Token string }
	}
	r.callAs(t, requester.Key, "tasks/pushNotificationConfig/set", map[string]any{"taskId": req.ID,
		"pushNotificationConfig": map[string]any{"url": pr.URL + "/hook", "token": "tok-1"}}).result(t, &set)
	if set.TaskID != req.ID || set.PushNotificationConfig.ID == "" || set.PushNotificationConfig.Token != "" {
		t.Fatalf("set: %+v", set)
	}
	relaytest.Eventually(t, "submitted notified", func() bool { return len(pr.states(req.ID)) == 1 })
	r.publish(t, taskstest.Accept(provider, t0-100, req))
	relaytest.Eventually(t, "working notified", func() bool { return len(pr.states(req.ID)) == 2 })
	got := pr.states(req.ID)
	if got[0] != a2a.Project("pending") || got[1] != a2a.Project("accepted") || got[0] == got[1] {
		t.Fatalf("states %v", got)
	}
	pr.mu.Lock()
	for _, tok := range pr.token {
		if tok != "tok-1" {
			t.Errorf("token %q", tok)
		}
	}
	pr.mu.Unlock()
	var list []json.RawMessage
	rep := r.callAs(t, requester.Key, "tasks/pushNotificationConfig/list", map[string]any{"id": req.ID})
	rep.result(t, &list)
	if len(list) != 1 || bytes.Contains(rep.Result, []byte("tok-1")) {
		t.Fatalf("list: %s", rep.Result)
	}
	var got1 struct{ PushNotificationConfig struct{ ID, URL string } }
	rep = r.callAs(t, requester.Key, "tasks/pushNotificationConfig/get", map[string]any{"id": req.ID,
		"pushNotificationConfigId": set.PushNotificationConfig.ID})
	rep.result(t, &got1)
	if got1.PushNotificationConfig.ID != set.PushNotificationConfig.ID || got1.PushNotificationConfig.URL != pr.URL+"/hook" ||
		bytes.Contains(rep.Result, []byte("tok-1")) {
		t.Fatalf("get: %s", rep.Result)
	}
	if rep := r.callAs(t, requester.Key, "tasks/pushNotificationConfig/delete", map[string]any{"id": req.ID,
		"pushNotificationConfigId": set.PushNotificationConfig.ID}); rep.Error != nil {
		t.Fatalf("delete: %+v", rep.Error)
	}
	r.callAs(t, requester.Key, "tasks/pushNotificationConfig/list", map[string]any{"id": req.ID}).result(t, &list)
	if len(list) != 0 {
		t.Fatalf("list after delete: %d", len(list))
	}
}

// TestPushConfigsBelongToRequester: a task's push configs are its
// requester's. Anonymous callers, a header that proves nothing and another
// agent's key get -32001 for set, get, list and delete, see no token and
// change nothing; an A2A-originated task takes no config (-32004); a batch
// of the requester's calls is authenticated once and all succeed.
func TestPushConfigsBelongToRequester(t *testing.T) {
	r := startPushRelay(t)
	pr := newPushReceiver(t)
	req := request(t, t0-500, t0+3600)
	r.publish(t, req)
	cfg := map[string]any{"taskId": req.ID, "pushNotificationConfig": map[string]any{"id": "c1", "url": pr.URL + "/hook", "token": "secret-tok"}}
	r.callAs(t, requester.Key, "tasks/pushNotificationConfig/set", cfg).result(t, new(json.RawMessage))

	stranger := taskstest.NewAgent("a2a-stranger")
	evil := map[string]any{"taskId": req.ID, "pushNotificationConfig": map[string]any{"id": "c1", "url": pr.URL + "/evil", "token": "x"}}
	calls := []struct {
		method string
		params any
	}{
		{"tasks/pushNotificationConfig/list", map[string]any{"id": req.ID}},
		{"tasks/pushNotificationConfig/get", map[string]any{"id": req.ID}},
		{"tasks/pushNotificationConfig/get", map[string]any{"id": req.ID, "pushNotificationConfigId": "c1"}},
		{"tasks/pushNotificationConfig/set", evil},
		{"tasks/pushNotificationConfig/delete", map[string]any{"id": req.ID, "pushNotificationConfigId": "c1"}},
	}
	badHeader := protocol.HTTPAuth(stranger.Key, http.MethodPost, "http://elsewhere.example/a2a", nil, t0)
	for _, c := range calls {
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": c.method, "params": c.params})
		for who, rep := range map[string]rpcAnswer{
			"anonymous":  post(t, r.base+"/a2a", string(b)),
			"stranger":   r.postAs(t, stranger.Key, c.method, c.params),
			"bad header": post(t, r.base+"/a2a", string(b), "Authorization", badHeader),
		} {
			if bytes.Contains(rep.body, []byte("secret-tok")) {
				t.Errorf("%s %s: the token leaked: %s", who, c.method, rep.body)
			}
			if e := rep.reply(t).Error; e == nil || e.Code != a2a.CodeTaskNotFound {
				t.Errorf("%s %s: %s, want -32001", who, c.method, rep.body)
			}
		}
	}
	// The requester's config is untouched: same URL, still delivering
	// with its own token.
	var one struct{ PushNotificationConfig struct{ ID, URL string } }
	r.callAs(t, requester.Key, "tasks/pushNotificationConfig/get", map[string]any{"id": req.ID, "pushNotificationConfigId": "c1"}).result(t, &one)
	if one.PushNotificationConfig.URL != pr.URL+"/hook" {
		t.Fatalf("the stranger's set replaced the config: %+v", one)
	}
	relaytest.Eventually(t, "notified", func() bool { return len(pr.states(req.ID)) == 1 })
	pr.mu.Lock()
	if pr.token[0] != "secret-tok" {
		t.Errorf("token %q", pr.token[0])
	}
	pr.mu.Unlock()

	// An A2A-originated task has no requester key.
	var task a2a.Task
	call(t, r.base, "message/send", userMessage("hello")).result(t, &task)
	if rep := r.callAs(t, requester.Key, "tasks/pushNotificationConfig/set", map[string]any{"taskId": task.ID,
		"pushNotificationConfig": map[string]any{"url": pr.URL + "/hook"}}); rep.Error == nil || rep.Error.Code != a2a.CodeUnsupportedOperation {
		t.Fatalf("A2A task: %+v", rep.Error)
	}

	// A batch is one request: one header covers every call in it.
	batch, _ := json.Marshal([]any{
		map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tasks/pushNotificationConfig/list", "params": map[string]any{"id": req.ID}},
		map[string]any{"jsonrpc": "2.0", "id": 2, "method": "tasks/pushNotificationConfig/get", "params": map[string]any{"id": req.ID}},
	})
	auth := protocol.HTTPAuth(requester.Key, http.MethodPost, r.base+"/a2a", batch, r.clock.now().Unix())
	ans := post(t, r.base+"/a2a", string(batch), "Authorization", auth)
	var reps []reply
	if err := json.Unmarshal(ans.body, &reps); err != nil || len(reps) != 2 || reps[0].Error != nil || reps[1].Error != nil {
		t.Fatalf("batch: %s", ans.body)
	}
}
