package credit

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/tasks"
	tt "github.com/anp2net/relay/tasks/taskstest"
)

const (
	t0       = int64(1780000000)
	deadline = t0 + 1000
)

var (
	reqr = tt.NewAgent("requester")
	prov = tt.NewAgent("provider")
	vers = tt.Pool(4)
)

func n(a Amount) int64 {
	v, ok := a.Int64()
	if !ok {
		panic("amount out of int64 range")
	}
	return v
}

type want struct{ balance, locked, verified int64 }

func check(t *testing.T, l *Ledger, agent string, now int64, w tasks.WeightFunc, exp want) {
	t.Helper()
	a := l.Account(agent, now, w)
	if n(a.Balance) != exp.balance || n(a.Locked) != exp.locked || a.VerifiedProviderTasks != exp.verified ||
		n(a.Available) != exp.balance-exp.locked || a.AgentID != agent {
		t.Fatalf("%s: got balance %s locked %s available %s verified %d, want %+v", agent[:8], a.Balance, a.Locked, a.Available, a.VerifiedProviderTasks, exp)
	}
}

// lifecycle returns a request paying amount credits, accepted and completed
// by provider, with the given verdicts from neutral verifiers.
func lifecycle(amount any, provider tt.Agent, highStakes bool, verdicts ...string) []*protocol.Event {
	req := tt.Request(reqr, t0, deadline, tt.Reward{Amount: amount}, highStakes)
	evs := []*protocol.Event{req, tt.Accept(provider, t0+10, req), tt.Result(provider, t0+20, req)}
	for i, v := range verdicts {
		evs = append(evs, tt.Verify(vers[i], t0+30+int64(i), req, v, 1))
	}
	return evs
}

func ledgerOf(evs ...*protocol.Event) (*tasks.Fold, *Ledger) {
	f := tasks.New(nil)
	for _, e := range evs {
		f.Add(e)
	}
	return f, New(f, "")
}

func TestSettlementAmounts(t *testing.T) {
	cases := []struct {
		amount               int64
		req, provider, treas int64
	}{
		{10, -10, 9, 1},
		{9, -9, 9, 0}, // fee floors to zero below 10
		{1, -1, 1, 0},
		{15, -15, 14, 1},
		{19, -19, 18, 1},
		{100, -100, 90, 10},
		{1<<53 - 1, -(1<<53 - 1), 1<<53 - 1 - (1<<53-1)/10, (1<<53 - 1) / 10},
	}
	for _, tc := range cases {
		_, l := ledgerOf(lifecycle(tc.amount, prov, false, "passed")...)
		now := t0 + 100
		check(t, l, reqr.ID, now, nil, want{tc.req, 0, 0})
		check(t, l, prov.ID, now, nil, want{tc.provider, 0, 1})
		check(t, l, DefaultTreasury, now, nil, want{tc.treas, 0, 0})
	}
}

func TestNothingMovesWithoutANeutralPass(t *testing.T) {
	req := tt.Request(reqr, t0, deadline, tt.Reward{Amount: 10}, false)
	acc, res := tt.Accept(prov, t0+10, req), tt.Result(prov, t0+20, req)
	cases := map[string][]*protocol.Event{
		"failed":       lifecycle(10, prov, false, "failed"),
		"disputed":     lifecycle(10, prov, false, "passed", "failed"),
		"self-verify":  {req, acc, res, tt.Verify(reqr, t0+30, req, "passed", 1), tt.Verify(prov, t0+30, req, "passed", 1)},
		"cancelled":    {req, tt.Cancel(reqr, t0+5, req)},
		"timed out":    {req, acc},
		"release only": {req, acc, res, tt.Payment(reqr, t0+30, req, protocol.DispositionRelease, protocol.PaymentANP2Credit)},
		"mocked reward": func() []*protocol.Event {
			m := tt.Request(reqr, t0, deadline, tt.Reward{Method: protocol.PaymentMocked, Amount: "10"}, false)
			return []*protocol.Event{m, tt.Accept(prov, t0+10, m), tt.Result(prov, t0+20, m), tt.Verify(vers[0], t0+30, m, "passed", 1)}
		}(),
		"zero reward": lifecycle(0, prov, false, "passed"),
	}
	for name, evs := range cases {
		t.Run(name, func(t *testing.T) {
			_, l := ledgerOf(evs...)
			now := deadline + 1
			var locked int64
			if name == "self-verify" {
				locked = 10 // completed, still open: no neutral verdict yet
			}
			check(t, l, reqr.ID, now, nil, want{0, locked, 0})
			check(t, l, prov.ID, now, nil, want{})
			check(t, l, DefaultTreasury, now, nil, want{})
			if int64(len(l.Accounts(now, nil))) != min(locked, 1) {
				t.Fatalf("accounts %+v", l.Accounts(now, nil))
			}
		})
	}
}

func TestPaymentIsNotLoadBearing(t *testing.T) {
	evs := lifecycle(10, prov, false, "passed")
	req := evs[0]
	// The requester announces a refund after a neutral pass: credit still settles.
	evs = append(evs, tt.Payment(reqr, t0+40, req, protocol.DispositionRefund, protocol.PaymentANP2Credit))
	f, l := ledgerOf(evs...)
	if v, _ := f.Task(req.ID, t0+50, nil); v.Status != tasks.StatusRefunded {
		t.Fatalf("status %s", v.Status)
	}
	check(t, l, prov.ID, t0+50, nil, want{9, 0, 1})
}

func TestSelfTaskPaysOnlyTheFee(t *testing.T) {
	_, l := ledgerOf(lifecycle(20, reqr, false, "passed")...)
	check(t, l, reqr.ID, t0+50, nil, want{-2, 0, 0})
	check(t, l, DefaultTreasury, t0+50, nil, want{2, 0, 0})
}

func TestLocked(t *testing.T) {
	req := tt.Request(reqr, t0, deadline, tt.Reward{Amount: 10}, false)
	acc, res := tt.Accept(prov, t0+10, req), tt.Result(prov, t0+20, req)
	other := tt.Request(reqr, t0+1, deadline+500, tt.Reward{Amount: 7}, false)
	f, l := ledgerOf(req, other)
	check(t, l, reqr.ID, t0+5, nil, want{0, 17, 0})
	check(t, l, reqr.ID, deadline, nil, want{0, 17, 0})
	check(t, l, reqr.ID, deadline+1, nil, want{0, 7, 0}) // the first timed out
	f.Add(acc)
	check(t, l, reqr.ID, t0+15, nil, want{0, 17, 0})
	f.Add(res) // completed: open until verified, whatever the time
	check(t, l, reqr.ID, deadline+10000, nil, want{0, 10, 0})
	f.Add(tt.Verify(vers[0], t0+30, req, "passed", 1))
	check(t, l, reqr.ID, deadline+10000, nil, want{-10, 0, 0})
	f.Remove(res) // revoked result: back to accepted, then timed out
	check(t, l, reqr.ID, t0+50, nil, want{0, 17, 0})
	check(t, l, reqr.ID, deadline+1, nil, want{0, 7, 0})
}

func TestHighStakesLockAndWeights(t *testing.T) {
	evs := lifecycle(50, prov, true, "passed", "passed")
	req := evs[0]
	windowEnd := t0 + 20 + 2*(deadline-t0)
	f, l := ledgerOf(evs...)
	check(t, l, reqr.ID, windowEnd, nil, want{0, 50, 0})  // two verifiers: no consensus yet
	check(t, l, reqr.ID, windowEnd+1, nil, want{0, 0, 0}) // window closed: disputed
	f.Add(tt.Verify(vers[2], t0+40, req, "passed", 1))
	check(t, l, prov.ID, t0+50, nil, want{45, 0, 1})
	check(t, l, DefaultTreasury, t0+50, nil, want{5, 0, 0})
	// The same events under weights that silence two verifiers: no consensus.
	silence := func(id string) float64 {
		if id == vers[0].ID || id == vers[1].ID {
			return 0
		}
		return 1
	}
	check(t, l, prov.ID, t0+50, silence, want{0, 0, 0})
	check(t, l, reqr.ID, t0+50, silence, want{0, 50, 0})
	check(t, l, DefaultTreasury, t0+50, silence, want{0, 0, 0})
	if got := len(l.Accounts(t0+50, silence)); got != 1 {
		t.Fatalf("accounts under silence: %d", got)
	}
	check(t, l, prov.ID, t0+50, nil, want{45, 0, 1})
}

func TestConfigurableTreasury(t *testing.T) {
	f := tasks.New(nil)
	for _, e := range lifecycle(30, prov, false, "passed") {
		f.Add(e)
	}
	treasury := tt.NewAgent("treasury").ID
	l := New(f, treasury)
	check(t, l, treasury, t0+50, nil, want{3, 0, 0})
	check(t, l, DefaultTreasury, t0+50, nil, want{})
	if l.Treasury() != treasury {
		t.Fatal(l.Treasury())
	}
}

func TestAccountJSON(t *testing.T) {
	_, l := ledgerOf(lifecycle(10, prov, false, "passed")...)
	b, err := json.Marshal(l.Account(prov.ID, t0+50, nil))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"agent_id":"` + prov.ID + `","balance":9,"locked":0,"available":9,"verified_provider_tasks":1}`
	if string(b) != want {
		t.Fatalf("%s", b)
	}
}

func TestAmountIs128Bit(t *testing.T) {
	big := AmountOf(math.MaxInt64)
	sum := big.Add(big).Add(AmountOf(2))
	if sum.String() != "18446744073709551616" {
		t.Fatal(sum)
	}
	if _, ok := sum.Int64(); ok {
		t.Fatal("fits int64")
	}
	back := sum.Sub(big).Sub(big).Sub(AmountOf(2))
	if !back.IsZero() {
		t.Fatal(back)
	}
	neg := AmountOf(0).Sub(sum)
	if neg.Sign() != -1 || neg.String() != "-18446744073709551616" {
		t.Fatal(neg)
	}
	var dec Amount
	if err := json.Unmarshal([]byte(neg.String()), &dec); err != nil || dec != neg {
		t.Fatal(dec, err)
	}
	if v, ok := AmountOf(-5).Int64(); !ok || v != -5 {
		t.Fatal(v)
	}
	a := &agg{}
	for range 3000 {
		a.expiring = append(a.expiring, lock{until: 10, amount: 1<<53 - 1})
	}
	if got, want := a.locked(0).Big().String(), "27021597764222973000"; got != want {
		t.Fatalf("locked %s want %s", got, want)
	}
}
