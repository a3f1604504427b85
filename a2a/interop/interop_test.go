package interop

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
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
	"github.com/anp2net/relay/relay/sqlite"
	"github.com/anp2net/relay/tasks/taskstest"
)

// t0 is the relay clock: after PoW became mandatory on kind 50.
const t0 = 1780000000

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

// startRelay runs a real relay (SQLite file, HTTP on 127.0.0.1) and returns
// its base URL and a publisher.
func startRelay(t *testing.T) (string, func(...*protocol.Event) error) {
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
	cfg.Modules = append(cfg.Modules, relaya2a.NewModule(relaya2a.Options{}))
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
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
		st.Close()
	})
	base := "http://" + ln.Addr().String()
	pub := client.New(base)
	return base, func(evs ...*protocol.Event) error {
		for _, e := range evs {
			if _, err := pub.Publish(context.Background(), e, false); err != nil {
				return fmt.Errorf("publish kind %d: %w", e.Kind, err)
			}
		}
		return nil
	}
}

var (
	requester = taskstest.NewAgent("interop-requester")
	provider  = taskstest.NewAgent("interop-provider")
	verifier  = taskstest.NewAgent("interop-verifier")
)

// request returns a mined, signed kind 50 created at.
func request(t *testing.T, at int64) *protocol.Event {
	t.Helper()
	e := taskstest.Request(requester, at, t0+3600, taskstest.Reward{}, false)
	if err := protocol.Mine(context.Background(), e, 12); err != nil {
		t.Fatal(err)
	}
	e.Sign(requester.Key)
	return e
}

func textOf(parts a2a.ContentParts) string {
	var b strings.Builder
	for _, p := range parts {
		if tp, ok := p.(a2a.TextPart); ok {
			b.WriteString(tp.Text)
		}
	}
	return b.String()
}

func dataOf(t *testing.T, parts a2a.ContentParts) map[string]any {
	t.Helper()
	for _, p := range parts {
		if dp, ok := p.(a2a.DataPart); ok {
			return dp.Data
		}
	}
	t.Fatalf("no data part in %+v", parts)
	return nil
}

// TestA2AGoSDK drives the relay with the official Go SDK: card resolution,
// client creation from the card, message/send, tasks/get (A2A and native),
// tasks/list, tasks/cancel, push config, and streaming.
func TestA2AGoSDK(t *testing.T) {
	base, publish := startRelay(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	card, err := agentcard.DefaultResolver.Resolve(ctx, base)
	if err != nil {
		t.Fatalf("resolve card: %v", err)
	}
	if card.ProtocolVersion != "0.3.0" || card.PreferredTransport != a2a.TransportProtocolJSONRPC || card.URL != base+"/a2a" ||
		!card.Capabilities.Streaming || card.Capabilities.PushNotifications || !card.Capabilities.StateTransitionHistory || len(card.Skills) == 0 {
		t.Fatalf("card %+v", card)
	}
	legacy, err := agentcard.DefaultResolver.Resolve(ctx, base+"/api", agentcard.WithPath("/.well-known/agent.json"))
	if err != nil || legacy.URL != base+"/api/a2a" {
		t.Fatalf("card at /api/.well-known/agent.json: %+v %v", legacy, err)
	}
	cl, err := a2aclient.NewFromCard(ctx, card)
	if err != nil {
		t.Fatalf("client from card: %v", err)
	}
	defer cl.Destroy()
	if got, err := cl.GetAgentCard(ctx); err != nil || got.Name != card.Name {
		t.Errorf("GetAgentCard: %+v %v", got, err)
	}

	// message/send: a completed task with the onboarding artifact.
	res, err := cl.SendMessage(ctx, &a2a.MessageSendParams{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: "How do I join the network?"})})
	if err != nil {
		t.Fatalf("SendMessage: %v", err)
	}
	task, ok := res.(*a2a.Task)
	if !ok || task.Status.State != a2a.TaskStateCompleted || len(task.Artifacts) != 1 {
		t.Fatalf("SendMessage result %#v", res)
	}
	if txt := textOf(task.Artifacts[0].Parts); !strings.Contains(txt, "Ed25519") || !strings.Contains(txt, base+"/events") {
		t.Errorf("onboarding text %q", txt)
	}
	if d := dataOf(t, task.Artifacts[0].Parts); d["intent"] != "join" {
		t.Errorf("onboarding data %v", d)
	}

	// tasks/get of the A2A task.
	got, err := cl.GetTask(ctx, &a2a.TaskQueryParams{ID: task.ID})
	if err != nil || got.ID != task.ID || got.Status.State != a2a.TaskStateCompleted || len(got.History) != 2 {
		t.Fatalf("GetTask A2A: %+v %v", got, err)
	}

	// Native tasks: one paid, one pending.
	paid := request(t, t0-300)
	pending := request(t, t0-200)
	err = publish(paid, pending,
		taskstest.Accept(provider, t0-290, paid), taskstest.Result(provider, t0-280, paid),
		taskstest.Verify(verifier, t0-270, paid, protocol.VerdictPassed, 0.9),
		taskstest.Payment(requester, t0-260, paid, protocol.DispositionRelease, protocol.PaymentANP2Credit))
	if err != nil {
		t.Fatal(err)
	}

	native, err := cl.GetTask(ctx, &a2a.TaskQueryParams{ID: a2a.TaskID(paid.ID)})
	if err != nil {
		t.Fatalf("GetTask native: %v", err)
	}
	if native.Status.State != a2a.TaskStateCompleted || native.Metadata["anp2_status"] != "paid" || len(native.History) != 5 {
		t.Errorf("native task: state %s meta %v history %d", native.Status.State, native.Metadata, len(native.History))
	}
	var statuses []string
	for _, m := range native.History {
		statuses = append(statuses, m.Metadata["anp2_status"].(string))
	}
	if strings.Join(statuses, ",") != "pending,accepted,completed,verified,paid" {
		t.Errorf("native history %v", statuses)
	}

	// tasks/list with the SDK's snake_case request and response.
	list, err := cl.ListTasks(ctx, &a2a.ListTasksRequest{PageSize: 1})
	if err != nil {
		t.Fatalf("ListTasks: %v", err)
	}
	if len(list.Tasks) != 1 || string(list.Tasks[0].ID) != pending.ID || list.PageSize != 1 || list.NextPageToken == "" {
		t.Fatalf("ListTasks page 1: %+v", list)
	}
	list, err = cl.ListTasks(ctx, &a2a.ListTasksRequest{PageSize: 1, PageToken: list.NextPageToken})
	if err != nil || len(list.Tasks) != 1 || string(list.Tasks[0].ID) != paid.ID || list.NextPageToken != "" {
		t.Fatalf("ListTasks page 2: %+v %v", list, err)
	}
	list, err = cl.ListTasks(ctx, &a2a.ListTasksRequest{Status: a2a.TaskStateSubmitted, HistoryLength: 1})
	if err != nil || len(list.Tasks) != 1 || string(list.Tasks[0].ID) != pending.ID || len(list.Tasks[0].History) != 1 {
		t.Fatalf("ListTasks submitted: %+v %v", list, err)
	}

	// tasks/cancel: neither kind of task can be cancelled by the relay.
	if _, err := cl.CancelTask(ctx, &a2a.TaskIDParams{ID: task.ID}); !errors.Is(err, a2a.ErrTaskNotCancelable) {
		t.Errorf("CancelTask A2A: %v", err)
	}
	_, err = cl.CancelTask(ctx, &a2a.TaskIDParams{ID: a2a.TaskID(pending.ID)})
	var aerr *a2a.Error
	if !errors.Is(err, a2a.ErrTaskNotCancelable) || !errors.As(err, &aerr) || aerr.Details["cancelable_by_requester"] != true {
		t.Errorf("CancelTask native: %v", err)
	}
	if _, err := cl.GetTask(ctx, &a2a.TaskQueryParams{ID: a2a.TaskID(strings.Repeat("0", 64))}); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Errorf("GetTask unknown: %v", err)
	}
	_, err = cl.SetTaskPushConfig(ctx, &a2a.TaskPushConfig{TaskID: task.ID, Config: a2a.PushConfig{URL: "https://example.com/hook"}})
	if !errors.Is(err, a2a.ErrPushNotificationNotSupported) {
		t.Errorf("SetTaskPushConfig: %v", err)
	}

	// tasks/resubscribe to a finished native task: the task, then a final status.
	var resub []string
	for ev, err := range cl.ResubscribeToTask(ctx, &a2a.TaskIDParams{ID: a2a.TaskID(paid.ID)}) {
		if err != nil {
			t.Fatalf("ResubscribeToTask: %v", err)
		}
		switch e := ev.(type) {
		case *a2a.Task:
			resub = append(resub, "task:"+string(e.Status.State))
		case *a2a.TaskStatusUpdateEvent:
			resub = append(resub, fmt.Sprintf("status:%s:final=%v", e.Status.State, e.Final))
		}
	}
	if strings.Join(resub, ",") != "task:completed,status:completed:final=true" {
		t.Errorf("ResubscribeToTask: %v", resub)
	}

	t.Run("stream onboarding", func(t *testing.T) { streamOnboarding(ctx, t, cl) })
	t.Run("stream native", func(t *testing.T) { streamNative(ctx, t, cl, publish, pending) })
}

// streamOnboarding: message/stream yields the task, its artifact and a
// final completed status.
func streamOnboarding(ctx context.Context, t *testing.T, cl *a2aclient.Client) {
	var kinds []string
	var final *a2a.TaskStatusUpdateEvent
	msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: "find agents"})
	for ev, err := range cl.SendStreamingMessage(ctx, &a2a.MessageSendParams{Message: msg}) {
		if err != nil {
			t.Fatalf("stream: %v", err)
		}
		switch e := ev.(type) {
		case *a2a.Task:
			kinds = append(kinds, "task:"+string(e.Status.State))
		case *a2a.TaskArtifactUpdateEvent:
			kinds = append(kinds, "artifact")
			if d := dataOf(t, e.Artifact.Parts); d["intent"] != "discover" {
				t.Errorf("artifact data %v", d)
			}
		case *a2a.TaskStatusUpdateEvent:
			kinds = append(kinds, "status:"+string(e.Status.State))
			final = e
		default:
			t.Fatalf("unexpected event %T", ev)
		}
	}
	if strings.Join(kinds, ",") != "task:working,artifact,status:completed" || final == nil || !final.Final {
		t.Errorf("events %v final %+v", kinds, final)
	}
}

// streamNative: message/stream with a native task's id follows the task
// through signed events to its final state.
func streamNative(ctx context.Context, t *testing.T, cl *a2aclient.Client, publish func(...*protocol.Event) error, req *protocol.Event) {
	msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: "watch"})
	msg.TaskID = a2a.TaskID(req.ID)
	var seen []string
	published := false
	for ev, err := range cl.SendStreamingMessage(ctx, &a2a.MessageSendParams{Message: msg}) {
		if err != nil {
			t.Fatalf("stream: %v", err)
		}
		switch e := ev.(type) {
		case *a2a.Task:
			seen = append(seen, "task:"+e.Metadata["anp2_status"].(string))
		case *a2a.TaskStatusUpdateEvent:
			seen = append(seen, string(e.Status.State)+":"+e.Metadata["anp2_status"].(string))
			if e.Final {
				seen = append(seen, "final")
			}
		default:
			t.Fatalf("unexpected event %T", ev)
		}
		if !published {
			published = true
			go func() {
				err := publish(taskstest.Accept(provider, t0-190, req), taskstest.Result(provider, t0-180, req),
					taskstest.Verify(verifier, t0-170, req, protocol.VerdictFailed, 0.2),
					taskstest.Payment(requester, t0-160, req, protocol.DispositionRefund, protocol.PaymentANP2Credit))
				if err != nil {
					t.Error(err)
				}
			}()
		}
	}
	want := "task:pending,working:accepted,working:completed,working:verified,failed:refunded,final"
	if strings.Join(seen, ",") != want {
		t.Errorf("stream %v, want %s", seen, want)
	}
}
