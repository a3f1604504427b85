package client_test

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/anp2net/relay/client"
	"github.com/anp2net/relay/protocol"
)

// The whole lifecycle through the SDK: the requester's waits return when
// the provider and a neutral verifier act, and credit moves.
func TestTaskLifecycle(t *testing.T) {
	r, req := startRelay(t)
	prov, verifier := agentOn(t, r), agentOn(t, r)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	taskID, err := req.RequestTask(ctx, client.TaskRequest{Capability: "text.reverse", Input: map[string]string{"text": "abc"},
		Deadline: r.Clock.Now().Unix() + 3600, Reward: client.CreditReward(10)})
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan *client.Task, 1)
	go func() {
		tk, err := req.WaitAccepted(ctx, taskID)
		if err != nil {
			t.Error(err)
		}
		accepted <- tk
	}()
	open, err := prov.Tasks(ctx, url.Values{"capability": {"text.reverse"}, "status": {client.StatusPending}})
	if err != nil || len(open) != 1 || open[0].TaskID != taskID {
		t.Fatalf("open tasks %v %v", open, err)
	}
	acc, err := prov.AcceptTask(ctx, &open[0], "0", 0)
	if err != nil {
		t.Fatal(err)
	}
	if tk := <-accepted; tk == nil || tk.Provider != prov.AgentID() {
		t.Fatalf("accepted: %+v", tk)
	}
	if _, err := prov.SubmitResult(ctx, &open[0], acc.ID, "cba", 5); err != nil {
		t.Fatal(err)
	}
	tk, err := req.WaitResult(ctx, taskID)
	if err != nil || tk.ResultEvent() == nil {
		t.Fatalf("result: %+v %v", tk, err)
	}
	if _, err := verifier.VerifyResult(ctx, tk, protocol.VerdictPassed, 1); err != nil {
		t.Fatal(err)
	}
	if tk, err = req.WaitVerdict(ctx, taskID); err != nil || tk.Consensus.Verdict != protocol.VerdictPassed {
		t.Fatalf("verdict: %+v %v", tk, err)
	}
	if _, err := req.ReleasePayment(ctx, tk, protocol.PaymentANP2Credit, "10", "credit"); err != nil {
		t.Fatal(err)
	}
	if tk, err = req.WaitSettled(ctx, taskID); err != nil || tk.Status != client.StatusPaid {
		t.Fatalf("settled: %+v %v", tk, err)
	}
	cr, err := prov.Credit(ctx, prov.AgentID())
	if err != nil || cr.Balance.String() != "9" {
		t.Fatalf("provider credit %+v %v", cr, err)
	}
	cr, err = req.Credit(ctx, req.AgentID())
	if err != nil || cr.Balance.String() != "-10" {
		t.Fatalf("requester credit %+v %v", cr, err)
	}
}

// A sealed result opens for the requester only.
func TestSealedResult(t *testing.T) {
	r, req := startRelay(t)
	prov, other := agentOn(t, r), agentOn(t, r)
	ctx := context.Background()
	taskID, err := req.RequestTask(ctx, client.TaskRequest{Capability: "secret.work", Input: "x",
		Deadline: r.Clock.Now().Unix() + 3600, Reward: client.CreditReward(1)})
	if err != nil {
		t.Fatal(err)
	}
	task, _ := prov.Task(ctx, taskID)
	acc, err := prov.AcceptTask(ctx, task, "0", 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := prov.SubmitSealedResult(ctx, task, acc.ID, []byte("the secret answer"), 1); err != nil {
		t.Fatal(err)
	}
	task, err = req.WaitResult(ctx, taskID)
	if err != nil || task.ResultEvent() == nil {
		t.Fatalf("result: %v", err)
	}
	out, err := client.OpenTaskOutput(req.Key, task.ResultEvent())
	if err != nil || string(out) != "the secret answer" {
		t.Fatalf("requester opened %q, %v", out, err)
	}
	if _, err := client.OpenTaskOutput(other.Key, task.ResultEvent()); err == nil {
		t.Fatal("a third agent opened the sealed output")
	}
}
