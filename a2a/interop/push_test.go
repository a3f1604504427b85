package interop

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient"
	"github.com/a2aproject/a2a-go/a2aclient/agentcard"
	relaya2a "github.com/anp2net/relay/a2a"
	"github.com/anp2net/relay/client"
	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay"
	"github.com/anp2net/relay/relay/delivery"
	"github.com/anp2net/relay/relay/sqlite"
	"github.com/anp2net/relay/tasks/taskstest"
)

// d4Signer signs every request it carries with the D4 header
// "Authorization: ANP2 …" of key (URL, method and body bound), as a task's
// requester does to manage its push configs through the SDK's client.
type d4Signer struct {
	key ed25519.PrivateKey
	now func() time.Time
}

func (s d4Signer) RoundTrip(r *http.Request) (*http.Response, error) {
	var body []byte
	if r.Body != nil {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			return nil, err
		}
		r.Body.Close()
		body = b
	}
	r = r.Clone(r.Context())
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	r.Header.Set("Authorization", protocol.HTTPAuth(s.key, r.Method, r.URL.String(), body, s.now().Unix()))
	return http.DefaultTransport.RoundTrip(r)
}

// TestA2AGoSDKPush: with the delivery engine as its Pusher, the relay's
// card announces push notifications; the official SDK's client, signing
// its requests as the task's requester, sets, gets, lists and deletes a
// push config (never shown its token), a stranger's client gets
// ErrTaskNotFound, and a webhook receiver decodes the relay's
// notifications as SDK Tasks, one per state change, with the config's
// token.
func TestA2AGoSDKPush(t *testing.T) {
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
	cfg.Modules = []relay.Module{d, relaya2a.NewModule(relaya2a.Options{Push: d})}
	srv, err := relay.New(cfg, st)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(sctx, ln) }()
	defer func() { stop(); <-done; st.Close() }()
	base := "http://" + ln.Addr().String()

	var mu sync.Mutex
	var got []*a2a.Task
	var tokens []string
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var task a2a.Task
		if err := json.Unmarshal(b, &task); err != nil {
			t.Errorf("notification is not an SDK Task: %v: %s", err, b)
			w.WriteHeader(400)
			return
		}
		mu.Lock()
		got = append(got, &task)
		tokens = append(tokens, r.Header.Get("X-A2A-Notification-Token"))
		mu.Unlock()
	}))
	defer recv.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	card, err := agentcard.DefaultResolver.Resolve(ctx, base)
	if err != nil || !card.Capabilities.PushNotifications {
		t.Fatalf("card: %+v %v", card, err)
	}
	signed := func(key ed25519.PrivateKey) *a2aclient.Client {
		cl, err := a2aclient.NewFromCard(ctx, card, a2aclient.WithJSONRPCTransport(&http.Client{Transport: d4Signer{key, clk.now}}))
		if err != nil {
			t.Fatal(err)
		}
		return cl
	}
	cl, stranger := signed(requester.Key), signed(provider.Key)
	req := request(t, t0-500)
	if _, err := client.New(base).Publish(ctx, req, false); err != nil {
		t.Fatal(err)
	}
	set, err := cl.SetTaskPushConfig(ctx, &a2a.TaskPushConfig{TaskID: a2a.TaskID(req.ID),
		Config: a2a.PushConfig{ID: "cfg-1", URL: recv.URL + "/a2a-hook", Token: "secret-1"}})
	if err != nil || set.Config.ID != "cfg-1" || set.TaskID != a2a.TaskID(req.ID) || set.Config.Token != "" {
		t.Fatalf("set: %+v %v", set, err)
	}
	if _, err := stranger.ListTaskPushConfig(ctx, &a2a.ListTaskPushConfigParams{TaskID: a2a.TaskID(req.ID)}); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Fatalf("a stranger's list: %v, want ErrTaskNotFound", err)
	}
	if err := stranger.DeleteTaskPushConfig(ctx, &a2a.DeleteTaskPushConfigParams{TaskID: a2a.TaskID(req.ID), ConfigID: "cfg-1"}); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Fatalf("a stranger's delete: %v, want ErrTaskNotFound", err)
	}
	states := func() []a2a.TaskState {
		mu.Lock()
		defer mu.Unlock()
		var out []a2a.TaskState
		for _, task := range got {
			out = append(out, task.Status.State)
		}
		return out
	}
	wait := func(n int) {
		for deadline := time.Now().Add(10 * time.Second); len(states()) < n; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%d notifications, want %d: %v", len(states()), n, states())
			}
		}
	}
	wait(1)
	if _, err := client.New(base).Publish(ctx, taskstest.Accept(provider, t0-100, req), false); err != nil {
		t.Fatal(err)
	}
	wait(2)
	if s := states(); s[0] != a2a.TaskStateSubmitted || s[1] != a2a.TaskStateWorking {
		t.Fatalf("states %v", s)
	}
	mu.Lock()
	for i, tok := range tokens {
		if tok != "secret-1" || got[i].ID != a2a.TaskID(req.ID) {
			t.Errorf("notification %d: token %q task %s", i, tok, got[i].ID)
		}
	}
	mu.Unlock()
	one, err := cl.GetTaskPushConfig(ctx, &a2a.GetTaskPushConfigParams{TaskID: a2a.TaskID(req.ID), ConfigID: "cfg-1"})
	if err != nil || one.Config.URL != recv.URL+"/a2a-hook" || one.Config.Token != "" {
		t.Fatalf("get: %+v %v", one, err)
	}
	list, err := cl.ListTaskPushConfig(ctx, &a2a.ListTaskPushConfigParams{TaskID: a2a.TaskID(req.ID)})
	if err != nil || len(list) != 1 {
		t.Fatalf("list: %+v %v", list, err)
	}
	if err := cl.DeleteTaskPushConfig(ctx, &a2a.DeleteTaskPushConfigParams{TaskID: a2a.TaskID(req.ID), ConfigID: "cfg-1"}); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if list, err := cl.ListTaskPushConfig(ctx, &a2a.ListTaskPushConfigParams{TaskID: a2a.TaskID(req.ID)}); err != nil || len(list) != 0 {
		t.Fatalf("list after delete: %+v %v", list, err)
	}
}
