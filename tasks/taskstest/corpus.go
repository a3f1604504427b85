package taskstest

import (
	"fmt"
	"math/rand/v2"

	"github.com/anp2net/relay/protocol"
)

// Corpus returns the events of n well-formed task lifecycles shaped like the
// live network: one issuer posts most requests, 20 providers compete, five
// neutral verifiers judge, one task in twenty is high-stakes. Lifecycles
// stop at random stages, so every status occurs. Deterministic for a seed.
func Corpus(seed uint64, n int, base int64) []*protocol.Event {
	rng := rand.New(rand.NewPCG(seed, 1))
	issuer := NewAgent("taskreq")
	others := Pool(50)
	providers := make([]Agent, 20)
	for i := range providers {
		providers[i] = NewAgent(fmt.Sprintf("provider%d", i))
	}
	verifiers := make([]Agent, 5)
	for i := range verifiers {
		verifiers[i] = NewAgent(fmt.Sprintf("verifier%d", i))
	}
	var out []*protocol.Event
	for i := range n {
		at := base + int64(i)*30
		requester := issuer
		if rng.IntN(10) == 0 {
			requester = others[rng.IntN(len(others))]
		}
		hs := rng.IntN(20) == 0
		req := Request(requester, at, at+6*3600, Reward{Amount: 10}, hs)
		out = append(out, req)
		stage := rng.IntN(10)
		if stage == 0 {
			continue
		}
		p := providers[rng.IntN(len(providers))]
		out = append(out, Accept(p, at+5, req))
		if rng.IntN(3) == 0 {
			out = append(out, Accept(providers[rng.IntN(len(providers))], at+6, req))
		}
		if stage == 1 {
			continue
		}
		out = append(out, Result(p, at+60, req))
		if stage == 2 {
			continue
		}
		nv := 1
		if hs {
			nv = 3 + rng.IntN(2)
		}
		for j := range nv {
			verdict := protocol.VerdictPassed
			if rng.IntN(8) == 0 {
				verdict = protocol.VerdictFailed
			}
			out = append(out, Verify(verifiers[j], at+90+int64(j), req, verdict, 0.9))
		}
		if stage > 4 {
			out = append(out, Payment(requester, at+120, req, protocol.DispositionRelease, protocol.PaymentANP2Credit))
		}
	}
	return out
}
