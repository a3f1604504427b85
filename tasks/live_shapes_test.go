package tasks_test

import (
	"testing"

	"github.com/anp2net/relay/credit"
	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/tasks"
	tt "github.com/anp2net/relay/tasks/taskstest"
)

const (
	lt0       = int64(1780000000)
	ldeadline = lt0 + 1000
	treasury  = "53f0e3e0485ccdf48ba1854908a8460e13fe0e078d9066ac65aa2b597c9d7916"
)

var (
	lreqr = tt.NewAgent("live-requester")
	lprov = tt.NewAgent("live-provider")
	lbidr = tt.NewAgent("live-bidder")
	lver  = tt.NewAgent("live-verifier")
)

// settle folds evs and returns the task view at now and the balances of
// requester, provider and treasury.
func settle(t *testing.T, taskID string, evs ...*protocol.Event) (tasks.TaskView, [3]string) {
	t.Helper()
	f := tasks.New(nil)
	for _, e := range evs {
		f.Add(e)
	}
	now := lt0 + 100
	v, ok := f.Task(taskID, now, nil)
	if !ok {
		t.Fatalf("task %s not in the fold", taskID[:8])
	}
	l := credit.New(f, treasury)
	var bal [3]string
	for i, a := range []string{lreqr.ID, lprov.ID, treasury} {
		bal[i] = l.Account(a, now, nil).Balance.String()
	}
	return v, bal
}

// TestLiveNetworkShapesSettleLikeCanonical runs one credit task in the live
// network's shapes (kind 50 with "cap", a ["t","task.request"] tag and a
// numeric max_cost_usd; kind 52 without the accept e tag) and the same task
// in the canonical shapes: both settle, and credit moves the same way.
func TestLiveNetworkShapesSettleLikeCanonical(t *testing.T) {
	live := tt.LiveRequest(lreqr, lt0, ldeadline, 10)
	canon := tt.Request(lreqr, lt0, ldeadline, tt.Reward{}, false)
	run := func(req *protocol.Event, result func(tt.Agent, int64, *protocol.Event) *protocol.Event) (tasks.TaskView, [3]string) {
		return settle(t, req.ID, req, tt.Accept(lprov, lt0+10, req), result(lprov, lt0+20, req),
			tt.Verify(lver, lt0+30, req, protocol.VerdictPassed, 1))
	}
	lv, lbal := run(live, tt.LiveResult)
	cv, cbal := run(canon, tt.Result)
	if lv.Capability != tt.Capability {
		t.Errorf("cap alias: capability %q", lv.Capability)
	}
	if lv.Status != tasks.StatusVerified || lv.Provider != lprov.ID || lv.Result == nil || !lv.Result.AcceptInferred {
		t.Fatalf("live shapes: status %s provider %.8s result %+v", lv.Status, lv.Provider, lv.Result)
	}
	if cv.Status != tasks.StatusVerified || cv.Result == nil || cv.Result.AcceptInferred {
		t.Fatalf("canonical shapes: status %s result %+v", cv.Status, cv.Result)
	}
	if lbal != cbal || lbal != [3]string{"-10", "9", "1"} {
		t.Fatalf("balances (requester, provider, treasury): live %v, canonical %v, want [-10 9 1]", lbal, cbal)
	}
}

// TestResultWithoutAcceptTagFollowsTheWinningAccept: a kind 52 without an
// accept reference counts only when its author is the winning provider.
func TestResultWithoutAcceptTagFollowsTheWinningAccept(t *testing.T) {
	req := tt.LiveRequest(lreqr, lt0, ldeadline, 10)
	loser := tt.LiveResult(lbidr, lt0+15, req)
	v, bal := settle(t, req.ID, req, tt.Accept(lprov, lt0+10, req), tt.Accept(lbidr, lt0+11, req), loser,
		tt.Verify(lver, lt0+30, req, protocol.VerdictPassed, 1))
	if v.Status != tasks.StatusAccepted || v.Result != nil {
		t.Fatalf("a losing bidder's untagged result counted: %s %+v", v.Status, v.Result)
	}
	if counts, reason := standing(v, loser.ID); counts || reason != tasks.ReasonNotProvider {
		t.Fatalf("losing bidder's result: counts %v reason %q", counts, reason)
	}
	if bal != [3]string{"0", "0", "0"} {
		t.Fatalf("credit moved: %v", bal)
	}
}

// TestAcceptPriceRuleInTheFold: an accept quoting above the reward in the
// reward's currency, or above max_cost_usd in USD, never wins, whether it
// arrives before its request or after, and says why; the next acceptable
// accept wins.
func TestAcceptPriceRuleInTheFold(t *testing.T) {
	req := tt.Request(lreqr, lt0, ldeadline, tt.Reward{}, false) // 10 credits, max_cost_usd 0.10
	eur := tt.Quote(lbidr, lt0+5, req, "credit", "11")
	dear := tt.Quote(lbidr, lt0+6, req, "USD", "0.11")
	good := tt.Quote(lprov, lt0+7, req, "usd", "0.10")
	for name, order := range map[string][]*protocol.Event{
		"request first":          {req, eur, dear, good},
		"accepts before request": {eur, dear, good, req},
	} {
		t.Run(name, func(t *testing.T) {
			v, _ := settle(t, req.ID, order...)
			if v.Accept == nil || v.Accept.EventID != good.ID || v.Provider != lprov.ID {
				t.Fatalf("winning accept %+v", v.Accept)
			}
			want := map[string]string{eur.ID: protocol.CodePriceAboveReward, dear.ID: protocol.CodePriceAboveMax}
			for _, b := range v.LosingBids {
				if want[b.EventID] != b.Reason {
					t.Errorf("bid %.8s: reason %q, want %q", b.EventID, b.Reason, want[b.EventID])
				}
				delete(want, b.EventID)
			}
			if len(want) != 0 {
				t.Errorf("bids missing from losing_bids: %v", want)
			}
		})
	}
	// With only bad quotes, the task stays pending and a cancel still counts.
	v, _ := settle(t, req.ID, req, eur, dear, tt.Cancel(lreqr, lt0+20, req))
	if v.Status != tasks.StatusCancelled || v.Accept != nil {
		t.Fatalf("only bad quotes, then a cancel: %s %+v", v.Status, v.Accept)
	}
}

// TestMalformedContentIsShownNotCounted: events whose content breaks a kind
// rule (stored from peers, D15) never count and say which rule.
func TestMalformedContentIsShownNotCounted(t *testing.T) {
	req := tt.Request(lreqr, lt0, ldeadline, tt.Reward{}, false)
	badAccept := lprov.Sign(protocol.KindTaskAccept, lt0+5, `{"price_quote":"cheap"}`,
		[]string{"e", req.ID, "root"}, []string{"e", req.ID, "accept"}, []string{"p", lreqr.ID})
	badResult := lprov.Sign(protocol.KindTaskResult, lt0+6, `[1,2]`, []string{"e", req.ID, "root"})
	garbage := tt.GarbageRequest(lreqr, lt0+1)
	f := tasks.New(nil)
	for _, e := range []*protocol.Event{req, badAccept, badResult, garbage} {
		f.Add(e)
	}
	if _, ok := f.Task(garbage.ID, lt0+10, nil); ok {
		t.Fatal("a kind 50 with garbage content became a task")
	}
	v, ok := f.Task(req.ID, lt0+10, nil)
	if !ok || v.Status != tasks.StatusPending || v.Accept != nil {
		t.Fatalf("status %s accept %+v", v.Status, v.Accept)
	}
	for id, want := range map[string]string{
		badAccept.ID: "content_invalid: " + protocol.CodeInvalidTaskContent,
		badResult.ID: "content_invalid: " + protocol.CodeMissingTag,
	} {
		if counts, reason := standing(v, id); counts || reason != want {
			t.Errorf("%.8s: counts %v reason %q, want %q", id, counts, reason, want)
		}
	}
}

func standing(v tasks.TaskView, id string) (bool, string) {
	for _, e := range v.Events {
		if e.EventID == id {
			return e.Counts, e.Reason
		}
	}
	return false, "absent"
}
