package views_test

import (
	"encoding/json"
	"testing"

	"github.com/anp2net/relay/credit"
	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay"
	"github.com/anp2net/relay/relay/relaytest"
	"github.com/anp2net/relay/tasks/taskstest"
)

// TestTaskAndCreditRoutes runs one paid task through the relay and reads it
// back from /task, /tasks and /agents/{id}/credit.
func TestTaskAndCreditRoutes(t *testing.T) {
	r := relaytest.Start(t, nil)
	req, prov, ver := taskstest.NewAgent("requester"), taskstest.NewAgent("provider"), taskstest.NewAgent("verifier")
	at := int64(relaytest.VectorTime - 600)
	task := taskstest.Request(req, at, at+3600, taskstest.Reward{Amount: 100}, false)
	// A quote over the request's max_cost_usd (0.10) is refused once the
	// request is stored.
	greedy := prov.Sign(protocol.KindTaskAccept, at+5, map[string]any{"eta_unix": at + 60,
		"price_quote": map[string]any{"currency": "USD", "amount": "5.00"}, "terms_hash": "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
		[]string{"e", task.ID, "root"}, []string{"e", task.ID, "accept"}, []string{"t", taskstest.Capability}, []string{"p", req.ID})
	r.PostAll(t, []*protocol.Event{task}, 1)
	if ans := r.Post(t, greedy); ans.Status != 400 || ans.Code(t) != protocol.CodePriceAboveMax {
		t.Fatalf("greedy accept: %d %s", ans.Status, ans.Body)
	}
	r.PostAll(t, []*protocol.Event{
		taskstest.Accept(prov, at+10, task), taskstest.Result(prov, at+20, task),
		taskstest.Verify(ver, at+30, task, protocol.VerdictPassed, 0.9),
		taskstest.Payment(req, at+40, task, protocol.DispositionRelease, protocol.PaymentANP2Credit),
	}, 1)
	var v struct {
		Status   string `json:"status"`
		Provider string `json:"provider"`
		Events   []any  `json:"events"`
		History  []struct{ Status string }
		// The names the network's existing clients read: full events by kind.
		Request                                       *protocol.Event
		Accepts, Results, Verifies, Payments, Cancels []*protocol.Event
	}
	if ans := r.Do(t, "GET", "/task/"+task.ID, "", nil); ans.Status != 200 || json.Unmarshal(ans.Body, &v) != nil {
		t.Fatalf("GET /task: %d %s", ans.Status, ans.Body)
	}
	if v.Status != "paid" || v.Provider != prov.ID || len(v.Events) != 5 || len(v.History) < 4 {
		t.Fatalf("task view: %+v", v)
	}
	if v.Request == nil || v.Request.ID != task.ID || len(v.Accepts) != 1 || len(v.Results) != 1 || len(v.Verifies) != 1 ||
		len(v.Payments) != 1 || v.Cancels == nil || len(v.Cancels) != 0 || v.Accepts[0].AgentID != prov.ID || v.Payments[0].CheckSig() != nil {
		t.Fatalf("task events by kind: request %v, %d accepts, %d results, %d verifies, %d payments, cancels %v",
			v.Request, len(v.Accepts), len(v.Results), len(v.Verifies), len(v.Payments), v.Cancels)
	}
	var list struct {
		Count int `json:"count"`
	}
	json.Unmarshal(r.Do(t, "GET", "/tasks?status=paid&provider="+prov.ID, "", nil).Body, &list)
	if list.Count != 1 {
		t.Fatalf("GET /tasks?status=paid: %d", list.Count)
	}
	json.Unmarshal(r.Do(t, "GET", "/tasks?status=pending", "", nil).Body, &list)
	if list.Count != 0 {
		t.Fatalf("GET /tasks?status=pending: %d", list.Count)
	}
	balance := func(id string) (acct credit.Account) {
		json.Unmarshal(r.Do(t, "GET", "/agents/"+id+"/credit", "", nil).Body, &acct)
		return acct
	}
	p, q, tr := balance(prov.ID), balance(req.ID), balance(credit.DefaultTreasury)
	if p.Balance.String() != "90" || q.Balance.String() != "-100" || tr.Balance.String() != "10" || p.VerifiedProviderTasks != 1 {
		t.Fatalf("balances: provider %+v requester %+v treasury %+v", p, q, tr)
	}
	for path, code := range map[string]string{
		"/task/" + prov.ID: relay.CodeNotFound, "/tasks?status=bogus": relay.CodeBadParameter, "/tasks?requester=xyz": relay.CodeBadParameter,
		"/agents/xyz/credit": relay.CodeBadParameter, "/state?at=-1": relay.CodeBadParameter,
	} {
		if ans := r.Do(t, "GET", path, "", nil); ans.Code(t) != code {
			t.Errorf("GET %s: %d %s, want %s", path, ans.Status, ans.Body, code)
		}
	}
}
