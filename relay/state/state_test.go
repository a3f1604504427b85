package state_test

import (
	"math/rand/v2"
	"testing"

	"github.com/anp2net/relay/credit"
	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/state"
	"github.com/anp2net/relay/relay/state/statetest"
)

const base = 1_780_000_000

// live folds evs in the given order the way the relay does: each event once,
// revocations withdrawing targets already folded.
func live(evs []*protocol.Event, check func(i int, s *state.State)) *state.State {
	s := state.New(state.Options{})
	seen := map[string]*protocol.Event{}
	lookup := func(id string) *protocol.Event { return seen[id] }
	for i, e := range evs {
		seen[e.ID] = e
		s.Add(int64(i+1), e, lookup)
		if check != nil {
			check(i, s)
		}
	}
	return s
}

// replay folds evs the way an auditor does: revocations preloaded, no
// lookups.
func replay(evs []*protocol.Event) *state.State {
	s := state.New(state.Options{})
	for _, e := range evs {
		s.Preload(e)
	}
	for i, e := range evs {
		s.Add(int64(i+1), e, nil)
	}
	return s
}

func shuffled(evs []*protocol.Event, seed uint64) []*protocol.Event {
	out := append([]*protocol.Event(nil), evs...)
	rand.New(rand.NewPCG(seed, 3)).Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// TestDigestIndependentOfOrder feeds random streams in shuffled orders to the
// live path and to the replay path and requires identical digests at
// several evaluation times; the credit ledger stays zero-sum at every step.
func TestDigestIndependentOfOrder(t *testing.T) {
	for seed := range uint64(4) {
		evs := statetest.Corpus(seed, 24, 40, base, 400)
		times := []int64{base + 120, base + 3600, base + 40*86400}
		want := replay(evs)
		wantD := make([]state.Digest, len(times))
		for i, at := range times {
			wantD[i] = want.Digest(at)
		}
		if wantD[0].Revoked == 0 || want.Tasks.Len() == 0 {
			t.Fatalf("seed %d: corpus exercises too little: %+v tasks=%d", seed, wantD[0], want.Tasks.Len())
		}
		for k := range uint64(3) {
			order := shuffled(evs, seed*10+k)
			got := live(order, func(i int, s *state.State) {
				if i%37 == 0 {
					assertZeroSum(t, s.Credit, base+60)
				}
			})
			for i, at := range times {
				d := got.Digest(at)
				if d.Digest != wantD[i].Digest {
					t.Fatalf("seed %d shuffle %d at %d: view %q differs\nlive   %+v\nreplay %+v",
						seed, k, at, state.FirstDifference(d, wantD[i]), d, wantD[i])
				}
			}
		}
	}
}

func assertZeroSum(t *testing.T, l *credit.Ledger, now int64) {
	t.Helper()
	total := credit.AmountOf(0)
	for _, a := range l.Accounts(now, nil) {
		total = total.Add(a.Balance)
	}
	if !total.IsZero() {
		t.Fatalf("credit balances sum to %s, want 0", total)
	}
}

// TestRevokeEitherOrder checks that a revoked vote is out of the trust view
// whether the revoke arrives before or after it, and that a revoke by
// someone else changes nothing.
func TestRevokeEitherOrder(t *testing.T) {
	evs := statetest.Corpus(9, 6, 0, base, 10)
	var vote *protocol.Event
	for _, e := range evs {
		if e.Kind == protocol.KindTrustVote {
			vote = e
			break
		}
	}
	a := statetest.Agent(vote.AgentID)
	rev := a.Sign(protocol.KindRevoke, base+20, "", []string{"e", vote.ID})
	other := statetest.Agents(6)[0]
	if other.ID == vote.AgentID {
		other = statetest.Agents(6)[1]
	}
	forged := other.Sign(protocol.KindRevoke, base+20, "", []string{"e", vote.ID})
	before := live(append([]*protocol.Event{rev, forged}, evs...), nil)
	after := live(append(append([]*protocol.Event{}, evs...), forged, rev), nil)
	if !before.Revoked(vote.ID) || !after.Revoked(vote.ID) {
		t.Fatal("vote not revoked")
	}
	if b, a := before.Digest(base+60), after.Digest(base+60); b.Digest != a.Digest {
		t.Fatalf("revoke order changes the state: %q", state.FirstDifference(b, a))
	}
	onlyForged := live(append(append([]*protocol.Event{}, evs...), forged), nil)
	if onlyForged.Revoked(vote.ID) {
		t.Fatal("a revoke by another agent revoked the vote")
	}
}
