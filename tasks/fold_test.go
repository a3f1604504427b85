package tasks

import (
	"reflect"
	"testing"

	"github.com/anp2net/relay/protocol"
	tt "github.com/anp2net/relay/tasks/taskstest"
)

const (
	t0       = int64(1780000000)
	deadline = t0 + 1000
)

var (
	reqr = tt.NewAgent("requester")
	prov = tt.NewAgent("provider")
	bidr = tt.NewAgent("bidder")
	strg = tt.NewAgent("stranger")
	vs   = tt.Pool(7)
)

func request(rw tt.Reward, highStakes bool) *protocol.Event {
	return tt.Request(reqr, t0, deadline, rw, highStakes)
}

var req = request(tt.Reward{}, false)

func newFold(evs ...*protocol.Event) *Fold {
	f := New(nil)
	for _, e := range evs {
		f.Add(e)
	}
	return f
}

func mustTask(t *testing.T, f *Fold, id string, now int64, w WeightFunc) TaskView {
	t.Helper()
	v, ok := f.Task(id, now, w)
	if !ok {
		t.Fatalf("task %s not found", id[:8])
	}
	return v
}

func statuses(h []Transition) []Status {
	out := make([]Status, len(h))
	for i, x := range h {
		out[i] = x.Status
	}
	return out
}

func reasonOf(v TaskView, id string) (bool, string) {
	for _, e := range v.Events {
		if e.EventID == id {
			return e.Counts, e.Reason
		}
	}
	return false, "absent"
}

// TestEveryStatus derives each §18.10 status from a small lifecycle.
func TestEveryStatus(t *testing.T) {
	acc := tt.Accept(prov, t0+10, req)
	res := tt.Result(prov, t0+20, req)
	pass1 := tt.Verify(vs[1], t0+30, req, protocol.VerdictPassed, 0.9)
	fail2 := tt.Verify(vs[2], t0+40, req, protocol.VerdictFailed, 0.2)
	release := tt.Payment(reqr, t0+50, req, protocol.DispositionRelease, protocol.PaymentANP2Credit)
	refund := tt.Payment(reqr, t0+50, req, protocol.DispositionRefund, protocol.PaymentANP2Credit)
	cancel := tt.Cancel(reqr, t0+5, req)
	cases := []struct {
		name    string
		evs     []*protocol.Event
		now     int64
		want    Status
		history []Status
		verdict string
	}{
		{"pending", nil, t0 + 1, StatusPending, []Status{"pending"}, ""},
		{"pending at the deadline", nil, deadline, StatusPending, []Status{"pending"}, ""},
		{"pending timed out", nil, deadline + 1, StatusTimedOut, []Status{"pending", "timed_out"}, ""},
		{"accepted", []*protocol.Event{acc}, t0 + 11, StatusAccepted, []Status{"pending", "accepted"}, ""},
		{"accepted timed out", []*protocol.Event{acc}, deadline + 1, StatusTimedOut, []Status{"pending", "accepted", "timed_out"}, ""},
		{"completed", []*protocol.Event{acc, res}, deadline + 9999, StatusCompleted, []Status{"pending", "accepted", "completed"}, ""},
		{"verified passed", []*protocol.Event{acc, res, pass1}, t0 + 31, StatusVerified, []Status{"pending", "accepted", "completed", "verified"}, "passed"},
		{"verified failed", []*protocol.Event{acc, res, fail2}, t0 + 41, StatusVerified, []Status{"pending", "accepted", "completed", "verified"}, "failed"},
		{"disputed", []*protocol.Event{acc, res, pass1, fail2}, t0 + 41, StatusDisputed, []Status{"pending", "accepted", "completed", "verified", "disputed"}, "disputed"},
		{"paid", []*protocol.Event{acc, res, pass1, release}, t0 + 51, StatusPaid, []Status{"pending", "accepted", "completed", "verified", "paid"}, "passed"},
		{"refunded", []*protocol.Event{acc, res, fail2, refund}, t0 + 51, StatusRefunded, []Status{"pending", "accepted", "completed", "verified", "refunded"}, "failed"},
		{"refunded after timeout", []*protocol.Event{acc, tt.Payment(reqr, deadline+5, req, protocol.DispositionRefund, protocol.PaymentMocked)}, deadline + 9, StatusRefunded, []Status{"pending", "accepted", "timed_out", "refunded"}, ""},
		{"cancelled", []*protocol.Event{cancel}, t0 + 6, StatusCancelled, []Status{"pending", "cancelled"}, ""},
		{"cancelled after the deadline", []*protocol.Event{tt.Cancel(reqr, deadline+5, req)}, deadline + 6, StatusCancelled, []Status{"pending", "timed_out", "cancelled"}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFold(append([]*protocol.Event{req}, tc.evs...)...)
			v := mustTask(t, f, req.ID, tc.now, nil)
			if v.Status != tc.want {
				t.Fatalf("status %s, want %s (history %v)", v.Status, tc.want, v.History)
			}
			if got := statuses(v.History); !reflect.DeepEqual(got, tc.history) {
				t.Fatalf("history %v, want %v", got, tc.history)
			}
			if v.Consensus.Verdict != tc.verdict {
				t.Fatalf("consensus %q, want %q", v.Consensus.Verdict, tc.verdict)
			}
			for i := 1; i < len(v.History); i++ {
				if v.History[i].At < v.History[i-1].At {
					t.Fatalf("history goes back in time: %+v", v.History)
				}
			}
		})
	}
}

func TestHistoryNamesCauses(t *testing.T) {
	acc := tt.Accept(prov, t0+10, req)
	f := newFold(req, acc)
	v := mustTask(t, f, req.ID, deadline+1, nil)
	want := []Transition{
		{Status: StatusPending, At: t0, EventID: req.ID},
		{Status: StatusAccepted, At: t0 + 10, EventID: acc.ID},
		{Status: StatusTimedOut, At: deadline},
	}
	if !reflect.DeepEqual(v.History, want) {
		t.Fatalf("history %+v", v.History)
	}
}

// TestD9Rules covers who counts: the winning provider's result only, neutral
// verdicts only, the requester's cancel and payment only, cancel before
// accept only.
func TestD9Rules(t *testing.T) {
	acc := tt.Accept(prov, t0+10, req)
	res := tt.Result(prov, t0+20, req)
	cases := []struct {
		name   string
		evs    []*protocol.Event
		now    int64
		want   Status
		probe  *protocol.Event
		reason string
	}{
		{"losing bidder's result ignored", []*protocol.Event{acc, tt.Accept(bidr, t0+11, req)}, t0 + 30, StatusAccepted,
			tt.Result(bidr, t0+20, req), ReasonNotProvider},
		{"stranger's result ignored", []*protocol.Event{acc}, t0 + 30, StatusAccepted, tt.Result(strg, t0+20, req), ReasonNotProvider},
		{"result after the deadline ignored", []*protocol.Event{acc}, deadline + 10, StatusTimedOut, tt.Result(prov, deadline+1, req), ReasonAfterDeadline},
		{"result at the deadline counts", []*protocol.Event{acc}, deadline + 10, StatusCompleted, tt.Result(prov, deadline, req), ""},
		{"requester self-verify ignored", []*protocol.Event{acc, res}, t0 + 30, StatusCompleted, tt.Verify(reqr, t0+25, req, "passed", 1), ReasonByRequester},
		{"provider self-verify ignored", []*protocol.Event{acc, res}, t0 + 30, StatusCompleted, tt.Verify(prov, t0+25, req, "passed", 1), ReasonByProvider},
		{"verdict without a result waits", []*protocol.Event{acc}, t0 + 30, StatusAccepted, tt.Verify(vs[1], t0+25, req, "passed", 1), ReasonNoResult},
		{"non-requester cancel ignored", nil, t0 + 30, StatusPending, tt.Cancel(strg, t0+5, req), ReasonNotRequester},
		{"cancel after accept ignored", []*protocol.Event{acc}, t0 + 30, StatusAccepted, tt.Cancel(reqr, t0+15, req), ReasonAfterAccept},
		{"accept after cancel loses", []*protocol.Event{tt.Cancel(reqr, t0+5, req)}, t0 + 30, StatusCancelled, acc, ReasonAfterCancel},
		{"non-requester payment ignored", []*protocol.Event{acc, res}, t0 + 30, StatusCompleted,
			tt.Payment(prov, t0+25, req, protocol.DispositionRelease, protocol.PaymentMocked), ReasonNotRequester},
		{"payment without accept ignored", nil, t0 + 30, StatusPending,
			tt.Payment(reqr, t0+25, req, protocol.DispositionRelease, protocol.PaymentMocked), ReasonNoAccept},
		{"second payment superseded", []*protocol.Event{acc, tt.Payment(reqr, t0+25, req, protocol.DispositionRefund, protocol.PaymentMocked)}, t0 + 30, StatusRefunded,
			tt.Payment(reqr, t0+26, req, protocol.DispositionRelease, protocol.PaymentMocked), ReasonSuperseded},
		{"invalid verdict ignored", []*protocol.Event{acc, res}, t0 + 30, StatusCompleted, tt.Broken(vs[1], t0+25, req), ReasonInvalid + ": " + protocol.CodeInvalidTaskContent},
		{"later bid loses", []*protocol.Event{acc}, t0 + 30, StatusAccepted, tt.Accept(bidr, t0+10, req), ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			evs := append([]*protocol.Event{req, tc.probe}, tc.evs...)
			f := newFold(evs...)
			v := mustTask(t, f, req.ID, tc.now, nil)
			if v.Status != tc.want {
				t.Fatalf("status %s, want %s", v.Status, tc.want)
			}
			counts, reason := reasonOf(v, tc.probe.ID)
			if tc.name == "later bid loses" {
				// Same second: the lower id wins.
				winner := acc
				if tc.probe.ID < acc.ID {
					winner = tc.probe
				}
				if v.Accept == nil || v.Accept.EventID != winner.ID || len(v.LosingBids) != 1 {
					t.Fatalf("winning accept %+v, losing %+v", v.Accept, v.LosingBids)
				}
				return
			}
			if counts != (tc.reason == "") || reason != tc.reason {
				t.Fatalf("probe counts=%v reason=%q, want %q", counts, reason, tc.reason)
			}
		})
	}
}

func TestEarliestAcceptWinsAndProviderFollows(t *testing.T) {
	late := tt.Accept(prov, t0+20, req)
	early := tt.Accept(bidr, t0+10, req)
	resProv := tt.Result(prov, t0+30, req)
	f := newFold(req, late, resProv)
	if v := mustTask(t, f, req.ID, t0+40, nil); v.Status != StatusCompleted || v.Provider != prov.ID {
		t.Fatalf("before the earlier bid arrives: %s %s", v.Status, v.Provider)
	}
	f.Add(early) // mirrored late: an earlier accept by another agent
	v := mustTask(t, f, req.ID, t0+40, nil)
	if v.Status != StatusAccepted || v.Provider != bidr.ID || v.Result != nil {
		t.Fatalf("after: %s provider %s result %+v", v.Status, v.Provider, v.Result)
	}
	if len(v.LosingBids) != 1 || v.LosingBids[0].EventID != late.ID || v.LosingBids[0].Reason != ReasonLosingBid {
		t.Fatalf("losing bids %+v", v.LosingBids)
	}
	f.Remove(early) // revoked
	if v := mustTask(t, f, req.ID, t0+40, nil); v.Status != StatusCompleted || v.Provider != prov.ID {
		t.Fatalf("after revoke: %s %s", v.Status, v.Provider)
	}
}

func TestOrdinaryConsensus(t *testing.T) {
	acc := tt.Accept(prov, t0+10, req)
	res := tt.Result(prov, t0+20, req)
	v := func(i int, at int64, verdict string) *protocol.Event { return tt.Verify(vs[i], at, req, verdict, 0.5) }
	cases := []struct {
		name    string
		evs     []*protocol.Event
		status  Status
		verdict string
	}{
		{"one pass", []*protocol.Event{v(1, t0+30, "passed")}, StatusVerified, "passed"},
		{"two passes", []*protocol.Event{v(1, t0+30, "passed"), v(2, t0+31, "passed")}, StatusVerified, "passed"},
		{"pass and fail", []*protocol.Event{v(1, t0+30, "passed"), v(2, t0+31, "failed")}, StatusDisputed, "disputed"},
		{"only fails", []*protocol.Event{v(1, t0+30, "failed"), v(2, t0+31, "failed")}, StatusVerified, "failed"},
		{"neutral disputed", []*protocol.Event{v(1, t0+30, "passed"), v(2, t0+31, "disputed")}, StatusDisputed, "disputed"},
		{"verifier changes its mind", []*protocol.Event{v(1, t0+30, "failed"), v(1, t0+35, "passed")}, StatusVerified, "passed"},
		{"self verdicts do not dispute", []*protocol.Event{v(1, t0+30, "passed"), tt.Verify(reqr, t0+31, req, "failed", 0)}, StatusVerified, "passed"},
		{"verdict before the result counts", []*protocol.Event{v(1, t0+19, "passed")}, StatusVerified, "passed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFold(append([]*protocol.Event{req, acc, res}, tc.evs...)...)
			got := mustTask(t, f, req.ID, t0+100, nil)
			if got.Status != tc.status || got.Consensus.Verdict != tc.verdict {
				t.Fatalf("status %s consensus %q", got.Status, got.Consensus.Verdict)
			}
			if got.Consensus.Rule != "unanimous" {
				t.Fatalf("rule %q", got.Consensus.Rule)
			}
		})
	}
}

func TestConsensusScore(t *testing.T) {
	acc := tt.Accept(prov, t0+10, req)
	res := tt.Result(prov, t0+20, req)
	f := newFold(req, acc, res, tt.Verify(vs[1], t0+30, req, "passed", 0.9), tt.Verify(vs[2], t0+31, req, "passed", 0.6),
		tt.Verify(vs[3], t0+32, req, "passed", -1))
	v := mustTask(t, f, req.ID, t0+100, nil)
	if v.Consensus.Score == nil || *v.Consensus.Score != 0.75 {
		t.Fatalf("score %v", v.Consensus.Score)
	}
	if v.Consensus.Verifiers != 3 || v.Consensus.Counts["passed"] != 3 {
		t.Fatalf("consensus %+v", v.Consensus)
	}
}

func TestPhaseDemo(t *testing.T) {
	mocked := request(tt.Reward{Method: protocol.PaymentMocked, Amount: "0.05"}, false)
	f := newFold(mocked, req)
	if v := mustTask(t, f, mocked.ID, t0, nil); v.Phase != "demo" {
		t.Fatalf("mocked reward: phase %q", v.Phase)
	}
	if v := mustTask(t, f, req.ID, t0, nil); v.Phase != "" {
		t.Fatalf("credit reward: phase %q", v.Phase)
	}
	f.Add(tt.Accept(prov, t0+1, req))
	f.Add(tt.Payment(reqr, t0+2, req, protocol.DispositionRelease, protocol.PaymentMocked))
	if v := mustTask(t, f, req.ID, t0+3, nil); v.Phase != "demo" || v.Status != StatusPaid {
		t.Fatalf("mocked payment: phase %q status %s", v.Phase, v.Status)
	}
}

func TestOrphansWaitForTheirRequest(t *testing.T) {
	f := newFold(tt.Accept(prov, t0+10, req), tt.Result(prov, t0+20, req))
	if _, ok := f.Task(req.ID, t0, nil); ok {
		t.Fatal("task visible without its request")
	}
	if f.Len() != 0 || len(f.List(Filter{}, t0, nil)) != 0 {
		t.Fatal("orphans listed")
	}
	f.Add(req)
	if v := mustTask(t, f, req.ID, t0+30, nil); v.Status != StatusCompleted {
		t.Fatalf("status %s", v.Status)
	}
	f.Remove(req)
	if _, ok := f.Task(req.ID, t0, nil); ok {
		t.Fatal("removed request still visible")
	}
}

func TestInvalidRequestIsNotATask(t *testing.T) {
	bad := reqr.Sign(protocol.KindTaskRequest, t0, `{"capability":"x"}`, []string{"t", "x"})
	f := newFold(bad)
	if _, ok := f.Task(bad.ID, t0, nil); ok {
		t.Fatal("invalid kind 50 became a task")
	}
	f.Add(&protocol.Event{ID: "zz", Kind: 50}) // malformed id: ignored, no panic
	f.Add(reqr.Sign(1, t0, "hello"))           // other kinds: ignored
	if f.Len() != 0 {
		t.Fatal("len")
	}
}

func TestAddIsIdempotentAndRemoveOfUnknownIsNoop(t *testing.T) {
	acc := tt.Accept(prov, t0+10, req)
	f := newFold(req, acc)
	d := f.Digest(t0 + 20)
	f.Add(acc)
	f.Add(req)
	f.Remove(tt.Result(prov, t0+20, req))
	f.Remove(tt.Request(strg, t0, deadline, tt.Reward{}, false))
	if f.Digest(t0+20) != d {
		t.Fatal("duplicate add or unknown remove changed the state")
	}
}

func TestList(t *testing.T) {
	other := tt.Request(strg, t0+5, deadline, tt.Reward{}, false)
	third := tt.Request(reqr, t0+9, deadline, tt.Reward{Method: protocol.PaymentMocked, Amount: "1"}, false)
	f := newFold(req, other, third, tt.Accept(prov, t0+10, req), tt.Accept(bidr, t0+10, other))
	ids := func(l []TaskView) []string {
		var out []string
		for _, v := range l {
			out = append(out, v.TaskID)
		}
		return out
	}
	now := t0 + 20
	cases := []struct {
		filter Filter
		want   []string
	}{
		{Filter{}, []string{third.ID, other.ID, req.ID}},
		{Filter{Limit: 2}, []string{third.ID, other.ID}},
		{Filter{Requester: reqr.ID}, []string{third.ID, req.ID}},
		{Filter{Provider: prov.ID}, []string{req.ID}},
		{Filter{Status: StatusPending}, []string{third.ID}},
		{Filter{Status: StatusAccepted, Limit: 1}, []string{other.ID}},
		{Filter{Capability: "other.capability"}, nil},
		{Filter{Capability: tt.Capability, Requester: strg.ID}, []string{other.ID}},
	}
	for _, tc := range cases {
		if got := ids(f.List(tc.filter, now, nil)); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%+v: got %v want %v", tc.filter, got, tc.want)
		}
	}
}

func TestStatusEnumIsA2AProjectable(t *testing.T) {
	for _, s := range Statuses {
		if !s.Valid() {
			t.Fatal(s)
		}
	}
	if Status("done").Valid() {
		t.Fatal("unknown status valid")
	}
}
