package tasks

import (
	"math"
	"testing"

	"github.com/anp2net/relay/protocol"
	tt "github.com/anp2net/relay/tasks/taskstest"
)

func weights(m map[int]float64) WeightFunc {
	byID := map[string]float64{}
	for i, w := range m {
		byID[vs[i].ID] = w
	}
	return func(id string) float64 {
		if w, ok := byID[id]; ok {
			return w
		}
		return 1
	}
}

// TestMofN covers the high-stakes rule: the verdict with strictly the
// largest positive weight wins when at least M = max(3, ceil(0.51 N))
// verifiers gave it.
func TestMofN(t *testing.T) {
	hs := request(tt.Reward{}, true)
	acc := tt.Accept(prov, t0+10, hs)
	res := tt.Result(prov, t0+20, hs)
	windowEnd := res.CreatedAt + 2*(deadline-t0)
	v := func(i int, verdict string) *protocol.Event { return tt.Verify(vs[i], t0+30+int64(i), hs, verdict, 0.5) }
	pass := func(is ...int) []*protocol.Event {
		var out []*protocol.Event
		for _, i := range is {
			out = append(out, v(i, "passed"))
		}
		return out
	}
	fail := func(is ...int) []*protocol.Event {
		var out []*protocol.Event
		for _, i := range is {
			out = append(out, v(i, "failed"))
		}
		return out
	}
	cat := func(ls ...[]*protocol.Event) []*protocol.Event {
		var out []*protocol.Event
		for _, l := range ls {
			out = append(out, l...)
		}
		return out
	}
	cases := []struct {
		name      string
		evs       []*protocol.Event
		w         WeightFunc
		now       int64
		status    Status
		verdict   string
		threshold int
	}{
		{"two passes are not enough", pass(0, 1), nil, t0 + 100, StatusCompleted, "", 3},
		{"two passes, window closed", pass(0, 1), nil, windowEnd + 1, StatusDisputed, "", 3},
		{"window end itself is still open", pass(0, 1), nil, windowEnd, StatusCompleted, "", 3},
		{"no verdict, window closed", nil, nil, windowEnd + 1, StatusDisputed, "", 3},
		{"three passes", pass(0, 1, 2), nil, t0 + 100, StatusVerified, "passed", 3},
		{"three passes beat two fails", cat(pass(0, 1, 2), fail(3, 4)), nil, t0 + 100, StatusVerified, "passed", 3},
		{"heavy fails win weight but lack M", cat(pass(0, 1, 2), fail(3, 4)), weights(map[int]float64{3: 5, 4: 5}), t0 + 100, StatusCompleted, "", 3},
		{"four heavy fails of seven", cat(pass(0, 1, 2), fail(3, 4, 5, 6)), weights(map[int]float64{3: 2}), t0 + 100, StatusVerified, "failed", 4},
		{"four light fails of seven lose on weight", cat(pass(0, 1, 2), fail(3, 4, 5, 6)), weights(map[int]float64{0: 2, 1: 2, 2: 2}), t0 + 100, StatusCompleted, "", 4},
		{"zero-weight verifiers carry nothing", pass(0, 1, 2), weights(map[int]float64{0: 0, 1: 0, 2: 0}), t0 + 100, StatusCompleted, "", 3},
		{"negative and NaN weights are zero", pass(0, 1, 2), weights(map[int]float64{0: -4, 1: math.NaN(), 2: 0}), t0 + 100, StatusCompleted, "", 3},
		{"weight tie is no consensus", cat(pass(0, 1, 2), fail(3, 4, 5)), nil, t0 + 100, StatusCompleted, "", 4},
		{"three disputed", []*protocol.Event{v(0, "disputed"), v(1, "disputed"), v(2, "disputed")}, nil, t0 + 100, StatusDisputed, "disputed", 3},
		{"verdict after the window ignored", cat(pass(0, 1), []*protocol.Event{tt.Verify(vs[2], windowEnd+1, hs, "passed", 1)}), nil, windowEnd + 2, StatusDisputed, "", 3},
		{"verdict at the window end counts", cat(pass(0, 1), []*protocol.Event{tt.Verify(vs[2], windowEnd, hs, "passed", 1)}), nil, windowEnd + 2, StatusVerified, "passed", 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFold(append([]*protocol.Event{hs, acc, res}, tc.evs...)...)
			got := mustTask(t, f, hs.ID, tc.now, tc.w)
			if got.Status != tc.status || got.Consensus.Verdict != tc.verdict {
				t.Fatalf("status %s consensus %q (%+v)", got.Status, got.Consensus.Verdict, got.Consensus)
			}
			if got.Consensus.Rule != "m_of_n" || got.Consensus.Threshold != tc.threshold || got.Consensus.WindowEnd != windowEnd {
				t.Fatalf("consensus %+v", got.Consensus)
			}
		})
	}
}

func TestMofNWeightsAndScore(t *testing.T) {
	hs := request(tt.Reward{}, true)
	f := newFold(hs, tt.Accept(prov, t0+10, hs), tt.Result(prov, t0+20, hs),
		tt.Verify(vs[0], t0+30, hs, "passed", 1), tt.Verify(vs[1], t0+31, hs, "passed", 0.5),
		tt.Verify(vs[2], t0+32, hs, "passed", 0), tt.Verify(vs[3], t0+33, hs, "failed", -1),
		tt.Verify(vs[4], t0+34, hs, "failed", 0))
	w := weights(map[int]float64{0: 3, 1: 1, 2: 1, 3: 0.5, 4: 0})
	v := mustTask(t, f, hs.ID, t0+100, w)
	c := v.Consensus
	if c.Verdict != "passed" || c.Weights["passed"] != 5 || c.Weights["failed"] != 0.5 || c.Verifiers != 4 || c.Counts["failed"] != 1 {
		t.Fatalf("consensus %+v", c)
	}
	// (3×1 + 1×0.5 + 1×0) / (3 + 1 + 1): the unscored fail and the
	// zero-weight verifier are left out.
	if c.Score == nil || *c.Score != 0.7 {
		t.Fatalf("score %v", *c.Score)
	}
	for _, vd := range v.Verdicts {
		switch vd.Verifier {
		case vs[0].ID:
			if vd.Weight != 3 || !vd.Counts {
				t.Fatalf("verdict %+v", vd)
			}
		case vs[4].ID:
			if vd.Weight != 0 || vd.Counts || vd.Reason != ReasonZeroWeight {
				t.Fatalf("verdict %+v", vd)
			}
		}
	}
}

func TestHighStakesByUSDAmount(t *testing.T) {
	cases := []struct {
		rw   tt.Reward
		want bool
	}{
		{tt.Reward{Method: protocol.PaymentMocked, Currency: "USD", Amount: "10.01"}, true},
		{tt.Reward{Method: protocol.PaymentMocked, Currency: "USD", Amount: "10"}, false},
		{tt.Reward{Method: protocol.PaymentMocked, Currency: "USD", Amount: 11}, true},
		{tt.Reward{Method: protocol.PaymentMocked, Currency: "USD-stable", Amount: "25"}, true},
		{tt.Reward{Method: protocol.PaymentMocked, Currency: "SAT", Amount: "100000"}, false},
		{tt.Reward{Amount: 1000}, false}, // credits are not USD
	}
	for _, tc := range cases {
		r := request(tc.rw, false)
		v := mustTask(t, newFold(r), r.ID, t0, nil)
		if v.HighStakes != tc.want {
			t.Errorf("%+v: high_stakes %v", tc.rw, v.HighStakes)
		}
	}
}
