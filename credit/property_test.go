package credit

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/tasks"
	tt "github.com/anp2net/relay/tasks/taskstest"
)

var probeTimes = []int64{t0 + 50, t0 + 150, t0 + 400, t0 + 100000}

// oracle recomputes every account from the task views alone: a check on
// the ledger's cache, not a second derivation of task state.
func oracle(f *tasks.Fold, treasury string, now int64, w tasks.WeightFunc) []Account {
	acc := map[string]*Account{}
	get := func(id string) *Account {
		if acc[id] == nil {
			acc[id] = &Account{AgentID: id}
		}
		return acc[id]
	}
	for _, v := range f.List(tasks.Filter{}, now, w) {
		var rw struct {
			Method string      `json:"payment_method"`
			Amount json.Number `json:"amount"`
		}
		if json.Unmarshal(v.Reward, &rw) != nil || rw.Method != protocol.PaymentANP2Credit {
			continue
		}
		amount, err := rw.Amount.Int64()
		if err != nil || amount <= 0 {
			continue
		}
		if v.Status.Open() {
			r := get(v.Requester)
			r.Locked = r.Locked.Add(AmountOf(amount))
		}
		if v.Consensus.Verdict == protocol.VerdictPassed {
			fee := amount / 10
			r, p, tr := get(v.Requester), get(v.Provider), get(treasury)
			r.Balance = r.Balance.Sub(AmountOf(amount))
			p.Balance = p.Balance.Add(AmountOf(amount - fee))
			tr.Balance = tr.Balance.Add(AmountOf(fee))
			if v.Requester != v.Provider {
				p.VerifiedProviderTasks++
			}
		}
	}
	out := []Account{}
	for _, a := range acc {
		if a.Balance.IsZero() && a.Locked.IsZero() && a.VerifiedProviderTasks == 0 {
			continue
		}
		a.Available = a.Balance.Sub(a.Locked)
		out = append(out, *a)
	}
	sortAccounts(out)
	return out
}

func sortAccounts(l []Account) {
	for i := 1; i < len(l); i++ {
		for j := i; j > 0 && l[j].AgentID < l[j-1].AgentID; j-- {
			l[j], l[j-1] = l[j-1], l[j]
		}
	}
}

func zeroSum(t *testing.T, l *Ledger, now int64, w tasks.WeightFunc, step int) {
	t.Helper()
	var sum Amount
	for _, a := range l.Accounts(now, w) {
		sum = sum.Add(a.Balance)
	}
	if !sum.IsZero() {
		t.Fatalf("step %d now %d: balances sum to %s", step, now, sum)
	}
}

// TestLedgerProperties streams random lifecycles into a fold in shuffled
// orders, with a subset later revoked. At every prefix the balances sum to
// zero; periodically and at the end the cached ledger equals the oracle over
// the views; the final digests agree across orders and with a fresh ledger.
func TestLedgerProperties(t *testing.T) {
	pool := append(tt.Pool(6), reqr, prov)
	weightFns := []tasks.WeightFunc{nil, tt.Weight}
	for seed := uint64(1); seed <= 3; seed++ {
		rng := rand.New(rand.NewPCG(seed, 5))
		evs := tt.Lifecycles(rng, pool, 40, t0)
		var removed []*protocol.Event
		for _, e := range evs {
			if rng.IntN(8) == 0 {
				removed = append(removed, e)
			}
		}
		var digests [][][32]byte
		for range 3 {
			f := tasks.New(nil)
			l := New(f, "")
			stream := shuffled(rng, evs)
			for i, e := range stream {
				f.Add(e)
				now := probeTimes[i%len(probeTimes)]
				w := weightFns[i%2]
				zeroSum(t, l, now, w, i)
				if i%25 == 0 {
					compareOracle(t, f, l, now, w)
				}
			}
			for i, e := range shuffled(rng, removed) {
				f.Remove(e)
				zeroSum(t, l, probeTimes[i%len(probeTimes)], tt.Weight, len(stream)+i)
			}
			var ds [][32]byte
			for _, now := range probeTimes {
				for _, w := range weightFns {
					compareOracle(t, f, l, now, w)
					d := l.Digest(now, w)
					if d != New(f, "").Digest(now, w) {
						t.Fatalf("seed %d: cached ledger and fresh ledger disagree", seed)
					}
					ds = append(ds, d)
				}
			}
			digests = append(digests, ds)
		}
		for _, ds := range digests[1:] {
			if !reflect.DeepEqual(ds, digests[0]) {
				t.Fatalf("seed %d: digests depend on arrival order", seed)
			}
		}
	}
}

func compareOracle(t *testing.T, f *tasks.Fold, l *Ledger, now int64, w tasks.WeightFunc) {
	t.Helper()
	got, want := l.Accounts(now, w), oracle(f, l.Treasury(), now, w)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("now %d: ledger\n%+v\noracle\n%+v", now, got, want)
	}
	for _, a := range want {
		if one := l.Account(a.AgentID, now, w); one != a {
			t.Fatalf("Account(%s) = %+v, Accounts has %+v", a.AgentID[:8], one, a)
		}
	}
}

func shuffled(rng *rand.Rand, evs []*protocol.Event) []*protocol.Event {
	out := append([]*protocol.Event(nil), evs...)
	rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// TestGeneratorMovesCredit guards the property test: it must see settled,
// weight-dependent and locked tasks.
func TestGeneratorMovesCredit(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 5))
	f := tasks.New(nil)
	for _, e := range tt.Lifecycles(rng, append(tt.Pool(6), reqr, prov), 120, t0) {
		f.Add(e)
	}
	l := New(f, "")
	accounts := l.Accounts(t0+50, tt.Weight)
	var locked, moved bool
	for _, a := range accounts {
		locked = locked || !a.Locked.IsZero()
		moved = moved || a.Balance.Sign() > 0
	}
	l.mu.Lock()
	weighed := len(l.weighed)
	l.mu.Unlock()
	if !locked || !moved || weighed == 0 {
		t.Fatalf("locked %v moved %v weight-dependent %d", locked, moved, weighed)
	}
}
