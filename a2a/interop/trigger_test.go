package interop

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/a2aproject/a2a-go/a2asrv/eventqueue"
	"github.com/anp2net/relay/client"
	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay"
	"github.com/anp2net/relay/relay/delivery"
	"github.com/anp2net/relay/relay/sqlite"
	"github.com/anp2net/relay/tasks/taskstest"
)

// recorder is an SDK agent executor that keeps the messages it is sent
// and answers each with a message.
type recorder struct {
	mu  sync.Mutex
	got []*a2a.Message
}

func (r *recorder) Execute(ctx context.Context, rc *a2asrv.RequestContext, q eventqueue.Queue) error {
	r.mu.Lock()
	r.got = append(r.got, rc.Message)
	r.mu.Unlock()
	return q.Write(ctx, a2a.NewMessage(a2a.MessageRoleAgent, a2a.TextPart{Text: "seen"}))
}

func (*recorder) Cancel(context.Context, *a2asrv.RequestContext, eventqueue.Queue) error { return nil }

func (r *recorder) messages() []*a2a.Message {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*a2a.Message(nil), r.got...)
}

// TestA2ATriggerToSDKServer: a trigger whose target is the agent card of
// an agent served by the official SDK (a2asrv: static card handler,
// JSON-RPC handler) delivers each matching event as message/send the SDK
// accepts: one data part holding the event, the idempotency key as
// messageId, the attempt under metadata "anp2"; the delivery is
// delivered.
func TestA2ATriggerToSDKServer(t *testing.T) {
	rec := &recorder{}
	aln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	agentURL := "http://" + aln.Addr().String()
	mux := http.NewServeMux()
	mux.Handle("/invoke", a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(rec)))
	mux.Handle(a2asrv.WellKnownAgentCardPath, a2asrv.NewStaticAgentCardHandler(&a2a.AgentCard{
		Name: "recorder", Description: "keeps what it is sent", URL: agentURL + "/invoke",
		PreferredTransport: a2a.TransportProtocolJSONRPC, DefaultInputModes: []string{"application/json"},
		DefaultOutputModes: []string{"text/plain"}, Version: "1", ProtocolVersion: "0.3.0",
	}))
	asrv := &http.Server{Handler: mux}
	go asrv.Serve(aln)
	defer asrv.Close()

	st, err := sqlite.Open(filepath.Join(t.TempDir(), "r.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	clk := &clock{t: time.Unix(t0, 0)}
	cfg := relay.DefaultConfig()
	cfg.Now = clk.now
	cfg.RatePerAgent, cfg.RatePerIP = 0, 0
	cfg.Logger = slog.New(slog.DiscardHandler)
	cfg.Modules = []relay.Module{delivery.NewModule(delivery.Options{AllowPrivate: true, Poll: 10 * time.Millisecond})}
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

	owner := taskstest.NewAgent("trigger owner")
	authed := func(method, path string, body []byte) []byte {
		req, _ := http.NewRequest(method, base+path, bytes.NewReader(body))
		req.Header.Set("Authorization", protocol.HTTPAuth(owner.Key, method, base+path, body, clk.now().Unix()))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode/100 != 2 {
			t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, b)
		}
		return b
	}
	var trig struct{ ID string }
	_ = json.Unmarshal(authed("POST", "/triggers", []byte(`{"match":{"kinds":[1],"tags":{"t":["sdk"]}},
		"target":{"type":"a2a","url":"`+agentURL+a2asrv.WellKnownAgentCardPath+`"}}`)), &trig)
	author := taskstest.NewAgent("author")
	e := author.Sign(protocol.KindPost, t0-10, "for the SDK agent", []string{"t", "sdk"})
	if _, err := client.New(base).Publish(context.Background(), e, false); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); len(rec.messages()) == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the SDK agent got no message")
		}
	}
	msg := rec.messages()[0]
	key := delivery.IdempotencyKey(e.ID, trig.ID)
	if msg.ID != key || len(msg.Parts) != 1 {
		t.Fatalf("message %+v", msg)
	}
	part, ok := msg.Parts[0].(a2a.DataPart)
	if !ok || part.Data["id"] != e.ID || part.Data["content"] != "for the SDK agent" {
		t.Fatalf("part %#v", msg.Parts[0])
	}
	meta, _ := msg.Metadata[delivery.A2AMetadataKey].(map[string]any)
	if meta["trigger_id"] != trig.ID || meta["idempotency_key"] != key {
		t.Fatalf("metadata %+v", msg.Metadata)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var ds struct{ Deliveries []delivery.Delivery }
		_ = json.Unmarshal(authed("GET", "/deliveries?status=delivered", nil), &ds)
		if len(ds.Deliveries) == 1 && ds.Deliveries[0].TargetType == delivery.TargetA2A {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not delivered: %+v", ds)
		}
	}
}
