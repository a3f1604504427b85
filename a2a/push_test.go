package a2a_test

import (
	"context"
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

// TestPushNotifications: tasks/pushNotificationConfig/set on a native task
// makes the relay POST the task to the webhook, with the token, once per
// state; get, list and delete manage the configs; the card says
// pushNotifications: true.
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
	if rep := call(t, r.base, "tasks/pushNotificationConfig/set", map[string]any{"taskId": "nope",
		"pushNotificationConfig": map[string]any{"url": pr.URL}}); rep.Error == nil || rep.Error.Code != a2a.CodeTaskNotFound {
		t.Fatalf("unknown task: %+v", rep.Error)
	}
	req := request(t, t0-500, t0+3600)
	r.publish(t, req)
	var set struct {
		TaskID                 string `json:"taskId"`
		PushNotificationConfig struct{ ID, URL, Token string }
	}
	call(t, r.base, "tasks/pushNotificationConfig/set", map[string]any{"taskId": req.ID,
		"pushNotificationConfig": map[string]any{"url": pr.URL + "/hook", "token": "tok-1"}}).result(t, &set)
	if set.TaskID != req.ID || set.PushNotificationConfig.ID == "" || set.PushNotificationConfig.Token != "tok-1" {
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
	call(t, r.base, "tasks/pushNotificationConfig/list", map[string]any{"id": req.ID}).result(t, &list)
	if len(list) != 1 {
		t.Fatalf("list: %d", len(list))
	}
	var got1 struct{ PushNotificationConfig struct{ ID string } }
	call(t, r.base, "tasks/pushNotificationConfig/get", map[string]any{"id": req.ID,
		"pushNotificationConfigId": set.PushNotificationConfig.ID}).result(t, &got1)
	if got1.PushNotificationConfig.ID != set.PushNotificationConfig.ID {
		t.Fatalf("get: %+v", got1)
	}
	if rep := call(t, r.base, "tasks/pushNotificationConfig/delete", map[string]any{"id": req.ID,
		"pushNotificationConfigId": set.PushNotificationConfig.ID}); rep.Error != nil {
		t.Fatalf("delete: %+v", rep.Error)
	}
	call(t, r.base, "tasks/pushNotificationConfig/list", map[string]any{"id": req.ID}).result(t, &list)
	if len(list) != 0 {
		t.Fatalf("list after delete: %d", len(list))
	}
}
