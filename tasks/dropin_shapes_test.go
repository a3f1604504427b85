package tasks_test

import (
	"testing"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/tasks"
	tt "github.com/anp2net/relay/tasks/taskstest"
)

// TestClientShapesSettle folds each lifecycle as the network's own clients
// publish it (SDK, MCP tools, browser extension; SPEC §5.3) and checks what
// those clients read back: the status, the provider, the credit moved.
func TestClientShapesSettle(t *testing.T) {
	cases := []struct {
		name   string
		req    *protocol.Event
		accept func(tt.Agent, int64, *protocol.Event) *protocol.Event
		result func(tt.Agent, int64, *protocol.Event) *protocol.Event
		pay    bool
		status tasks.Status
		bal    [3]string
	}{
		{"SDK credit lifecycle", tt.SDKRequest(lreqr, lt0, ldeadline), tt.SDKAccept, tt.SDKResult, true, tasks.StatusPaid, [3]string{"-10", "9", "1"}},
		{"MCP accept on an SDK task", tt.SDKRequest(lreqr, lt0, ldeadline), tt.MCPAccept, tt.SDKResult, false, tasks.StatusVerified, [3]string{"-10", "9", "1"}},
		{"browser extension economy", tt.ExtensionRequest(lreqr, lt0, ldeadline), tt.ExtensionAccept, tt.ExtensionResult, false, tasks.StatusVerified, [3]string{"-10", "9", "1"}},
		// No payment_method: as on the reference relay, no credit moves.
		{"MCP request, no price cap, no payment method", tt.MCPRequest(lreqr, lt0, ldeadline), tt.MCPAccept, tt.SDKResult, true, tasks.StatusPaid, [3]string{"0", "0", "0"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			evs := []*protocol.Event{tc.req, tc.accept(lprov, lt0+10, tc.req), tc.result(lprov, lt0+20, tc.req),
				tt.SDKVerify(lver, lt0+30, tc.req, protocol.VerdictPassed)}
			if tc.pay {
				evs = append(evs, tt.MCPRelease(lreqr, lt0+40, tc.req))
			}
			for _, e := range evs {
				if errs := protocol.CheckKind(e); len(errs) > 0 {
					t.Fatalf("kind %d refused by its rule: %v", e.Kind, errs)
				}
			}
			v, bal := settle(t, tc.req.ID, evs...)
			if v.Status != tc.status || v.Provider != lprov.ID || v.Result == nil {
				t.Fatalf("status %s provider %.8s result %+v", v.Status, v.Provider, v.Result)
			}
			for _, e := range v.Events {
				if !e.Counts {
					t.Errorf("event %.8s (kind %d) does not count: %s", e.EventID, e.Kind, e.Reason)
				}
			}
			if bal != tc.bal {
				t.Fatalf("balances (requester, provider, treasury) %v, want %v", bal, tc.bal)
			}
		})
	}
}

// TestClientShapesDeadlines: the LangChain tools' deadline_sec is read as
// created_at + deadline_sec; a request with no deadline never times out.
func TestClientShapesDeadlines(t *testing.T) {
	lc := tt.LangChainRequest(lreqr, lt0)
	f := tasks.New(nil)
	f.Add(lc)
	v, ok := f.Task(lc.ID, lt0+601, nil)
	if !ok || v.Deadline != lt0+600 || v.Status != tasks.StatusTimedOut {
		t.Fatalf("deadline_sec: ok %v deadline %d status %s", ok, v.Deadline, v.Status)
	}
	none := lreqr.Sign(protocol.KindTaskRequest, lt0, `{"capability":"x","input":{},"constraints":{},"reward":{"currency":"USD","amount":0}}`)
	f.Add(none)
	v, ok = f.Task(none.ID, lt0+10*365*86400, nil)
	if !ok || v.Deadline != protocol.NoDeadline || v.Status != tasks.StatusPending {
		t.Fatalf("no deadline: ok %v deadline %d status %s", ok, v.Deadline, v.Status)
	}
}

// TestAcceptWithoutComparableQuote: an accept in a currency no bound of its
// request applies to, or with no quote, takes the offered reward and can
// win; the reward moves as offered.
func TestAcceptWithoutComparableQuote(t *testing.T) {
	req := tt.SDKRequest(lreqr, lt0, ldeadline)
	eur := tt.Quote(lprov, lt0+10, req, "EUR", "1000")
	v, bal := settle(t, req.ID, req, eur, tt.SDKResult(lprov, lt0+20, req), tt.SDKVerify(lver, lt0+30, req, protocol.VerdictPassed))
	if v.Accept == nil || v.Accept.EventID != eur.ID || v.Status != tasks.StatusVerified {
		t.Fatalf("accept %+v status %s", v.Accept, v.Status)
	}
	if bal != [3]string{"-10", "9", "1"} {
		t.Fatalf("balances %v", bal)
	}
}
