package taskstest

import (
	"fmt"
	"math/rand/v2"

	"github.com/anp2net/relay/protocol"
)

// Pool returns n agents named a0..a(n-1).
func Pool(n int) []Agent {
	out := make([]Agent, n)
	for i := range out {
		out[i] = NewAgent(fmt.Sprintf("a%d", i))
	}
	return out
}

// Weight is a deterministic test weight function over pool agents: agent
// ids whose first hex digit is 0–2 weigh 0, the others 0.25–3.75.
func Weight(agentID string) float64 {
	if agentID == "" {
		return 0
	}
	c := agentID[0]
	var d int
	if c >= 'a' {
		d = int(c-'a') + 10
	} else {
		d = int(c - '0')
	}
	if d < 3 {
		return 0
	}
	return float64(d) / 4
}

// Lifecycles returns the events of n random task lifecycles, full and
// broken, among pool agents, with times from base: cancels by anyone,
// competing bids, results by the wrong agent or late, self- and third-party
// verdicts, payments by anyone, invalid events and orphans whose request is
// never published. Many events share a second, so (created_at, id) ties are
// common.
func Lifecycles(rng *rand.Rand, pool []Agent, n int, base int64) []*protocol.Event {
	var out []*protocol.Event
	pick := func() Agent { return pool[rng.IntN(len(pool))] }
	for range n {
		requester := pick()
		at := base + rng.Int64N(200)
		deadline := at + 20 + rng.Int64N(60)
		req := Request(requester, at, deadline, randomReward(rng), rng.IntN(4) == 0)
		var evs []*protocol.Event
		if rng.IntN(12) != 0 {
			evs = append(evs, req)
		}
		tm := func() int64 { return at + rng.Int64N(deadline-at+30) }
		var providers []Agent
		for range rng.IntN(4) {
			p := pick()
			providers = append(providers, p)
			evs = append(evs, Accept(p, tm(), req))
		}
		if rng.IntN(5) == 0 {
			c := requester
			if rng.IntN(3) == 0 {
				c = pick()
			}
			evs = append(evs, Cancel(c, tm(), req))
		}
		for range rng.IntN(3) {
			p := pick()
			if len(providers) > 0 && rng.IntN(4) != 0 {
				p = providers[rng.IntN(len(providers))]
			}
			evs = append(evs, Result(p, tm(), req))
		}
		verdicts := []string{protocol.VerdictPassed, protocol.VerdictPassed, protocol.VerdictPassed, protocol.VerdictFailed, protocol.VerdictDisputed}
		for range rng.IntN(7) {
			score := -1.0
			if rng.IntN(3) != 0 {
				score = float64(rng.IntN(11)) / 10
			}
			evs = append(evs, Verify(pick(), tm(), req, verdicts[rng.IntN(len(verdicts))], score))
		}
		for range rng.IntN(3) {
			a := requester
			if rng.IntN(3) == 0 {
				a = pick()
			}
			disp := protocol.DispositionRelease
			if rng.IntN(3) == 0 {
				disp = protocol.DispositionRefund
			}
			method := protocol.PaymentANP2Credit
			if rng.IntN(3) == 0 {
				method = protocol.PaymentMocked
			}
			evs = append(evs, Payment(a, tm(), req, disp, method))
		}
		if rng.IntN(8) == 0 {
			evs = append(evs, Broken(pick(), tm(), req))
		}
		out = append(out, evs...)
	}
	return out
}

func randomReward(rng *rand.Rand) Reward {
	switch rng.IntN(6) {
	case 0:
		return Reward{Method: protocol.PaymentMocked, Amount: "0.05"}
	case 1:
		return Reward{Method: protocol.PaymentMocked, Currency: "USD", Amount: "25"} // high-stakes by amount
	}
	amounts := []int64{0, 1, 9, 10, 15, 100, 1 << 52}
	return Reward{Amount: amounts[rng.IntN(len(amounts))]}
}
