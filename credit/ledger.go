// Package credit derives ANP2 credit balances (seed §18.11, D9) from the task
// derivation of package tasks; it has no rules of its own about task status.
//
// Rules. Only tasks whose kind 50 reward has payment_method anp2_credit move
// credit; their amount is a whole number 0..2^53-1 (protocol.ParseTaskRequest).
// When a task's consensus verdict is passed (tasks.Settlement.Passed), the
// requester is debited the amount, the provider (author of the winning
// accept) credited amount − fee and the treasury credited fee, with
// fee = amount × 1 // 10 (integer floor: rewards below 10 pay no fee). The
// kind 54 is an announcement and moves nothing. locked(agent) sums the
// amounts of the agent's own tasks that are pending, accepted or completed at
// now; available = balance − locked. verified_provider_tasks counts passed
// credit tasks the agent provided with requester ≠ provider and amount > 0
// (mocked rewards never count). Over all agents, treasury included, balances
// sum to zero.
//
// Cost. A Ledger caches every settlement that is the same under every weight
// function, aggregated per agent (balance, verified count, locks that never
// expire, and locks that end at a deadline or window). Each query first
// brings the cache up to date: the fold logs changed credit tasks by
// generation (tasks.Fold.CreditChanges), so only tasks changed since the last
// query are settled again. Settlements that depend on the weights
// (high-stakes tasks with at least three distinct neutral verifiers) are
// never cached: the Ledger keeps only their parties and re-settles them under
// the caller's weight function at each query (tasks.Fold.Resettle, no
// allocation), so no weight version is needed and a weight change is seen at
// once. An Account query costs the tasks changed since the last query plus
// O(deadline locks + weight-dependent tasks) of that agent. Amounts are
// 128-bit (Amount), so sums of 2^53-1 rewards never wrap.
package credit

import (
	"math"
	"sort"
	"sync"

	"github.com/anp2net/relay/tasks"
)

// DefaultTreasury is the public network's treasury agent (D9).
const DefaultTreasury = "53f0e3e0485ccdf48ba1854908a8460e13fe0e078d9066ac65aa2b597c9d7916"

// Account is GET /agents/{id}/credit.
type Account struct {
	AgentID               string `json:"agent_id"`
	Balance               Amount `json:"balance"`
	Locked                Amount `json:"locked"`
	Available             Amount `json:"available"`
	VerifiedProviderTasks int64  `json:"verified_provider_tasks"`
}

// Ledger is the credit view over a tasks.Fold. It is safe for concurrent use.
type Ledger struct {
	fold     *tasks.Fold
	treasury string

	mu      sync.Mutex
	gen     uint64
	settled map[string]tasks.Settlement // weight-independent, applied to agents
	weighed map[string]tasks.Settlement // weight-dependent: parties only
	agents  map[string]*agg
	// scratch buffers, reused under mu
	refs   []tasks.TaskRef
	settle []tasks.Settlement
	fx     []effect
}

// agg is one agent's cached weight-independent position.
type agg struct {
	balance  Amount
	verified int64
	forever  Amount                   // locks of tasks open with no expiry
	expiring []lock                   // locks that end at a deadline or window
	index    map[string]int           // task id → position in expiring
	weighed  map[string]tasks.TaskRef // weight-dependent tasks the agent is party to
}

type lock struct {
	task   string
	until  int64
	amount int64
}

// New returns a Ledger over fold with the given treasury agent ("" for
// DefaultTreasury).
func New(fold *tasks.Fold, treasury string) *Ledger {
	if treasury == "" {
		treasury = DefaultTreasury
	}
	return &Ledger{fold: fold, treasury: treasury, settled: map[string]tasks.Settlement{},
		weighed: map[string]tasks.Settlement{}, agents: map[string]*agg{}}
}

// Treasury returns the treasury agent_id.
func (l *Ledger) Treasury() string { return l.treasury }

// Account returns agent's credit at time now under weights w.
func (l *Ledger) Account(agent string, now int64, w tasks.WeightFunc) Account {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sync()
	acc := Account{AgentID: agent}
	if a := l.agents[agent]; a != nil {
		acc.Balance, acc.VerifiedProviderTasks, acc.Locked = a.balance, a.verified, a.locked(now)
		l.refs = l.refs[:0]
		for _, ref := range a.weighed {
			l.refs = append(l.refs, ref)
		}
		l.weigh(w, now, func(e *effect) bool { return e.agent == agent }, func(*effect) *Account { return &acc })
	}
	acc.Available = acc.Balance.Sub(acc.Locked)
	return acc
}

// Accounts returns every agent whose balance, locked or
// verified_provider_tasks is not zero at time now under w, by agent_id.
func (l *Ledger) Accounts(now int64, w tasks.WeightFunc) []Account {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sync()
	byAgent := make(map[string]*Account, len(l.agents))
	get := func(e *effect) *Account {
		a := byAgent[e.agent]
		if a == nil {
			a = &Account{AgentID: e.agent}
			byAgent[e.agent] = a
		}
		return a
	}
	for id, a := range l.agents {
		acc := get(&effect{agent: id})
		acc.Balance, acc.VerifiedProviderTasks, acc.Locked = a.balance, a.verified, a.locked(now)
	}
	l.refs = l.refs[:0]
	for _, s := range l.weighed {
		l.refs = append(l.refs, s.Ref)
	}
	l.weigh(w, now, func(*effect) bool { return true }, get)
	out := make([]Account, 0, len(byAgent))
	for _, a := range byAgent {
		if a.Balance.IsZero() && a.Locked.IsZero() && a.VerifiedProviderTasks == 0 {
			continue
		}
		a.Available = a.Balance.Sub(a.Locked)
		out = append(out, *a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].AgentID < out[j].AgentID })
	return out
}

// weigh settles l.refs under w and adds each effect that keep accepts to
// the account into(effect) names. Integer sums make the order of l.refs
// irrelevant.
func (l *Ledger) weigh(w tasks.WeightFunc, now int64, keep func(*effect) bool, into func(*effect) *Account) {
	if len(l.refs) == 0 {
		return
	}
	l.settle = l.fold.Resettle(l.settle[:0], l.refs, w)
	for _, s := range l.settle {
		l.fx = appendEffects(l.fx[:0], s, l.treasury)
		for i := range l.fx {
			e := &l.fx[i]
			if !keep(e) {
				continue
			}
			acc := into(e)
			acc.Balance = acc.Balance.Add(e.balance)
			acc.VerifiedProviderTasks += e.verified
			if e.lockUntil >= now {
				acc.Locked = acc.Locked.Add(AmountOf(e.lock))
			}
		}
	}
}

// effect is one agent's share of one settlement.
type effect struct {
	agent     string
	balance   Amount
	verified  int64
	lockUntil int64 // tasks.Closed when the effect locks nothing
	lock      int64
}

// appendEffects applies the §18.11 rules to one settlement. It is the only
// place credit rules live; the cache and the weight-dependent path both use
// it.
func appendEffects(out []effect, s tasks.Settlement, treasury string) []effect {
	if s.Removed || s.Amount <= 0 {
		return out // a zero reward moves, locks and verifies nothing
	}
	if s.OpenUntil != tasks.Closed {
		out = append(out, effect{agent: s.Requester, lockUntil: s.OpenUntil, lock: s.Amount})
	}
	if s.Passed && s.Provider != "" {
		fee := s.Amount / 10
		e := effect{agent: s.Provider, balance: AmountOf(s.Amount - fee), lockUntil: tasks.Closed}
		if s.Requester != s.Provider {
			e.verified = 1
		}
		out = append(out,
			effect{agent: s.Requester, balance: AmountOf(-s.Amount), lockUntil: tasks.Closed},
			e,
			effect{agent: treasury, balance: AmountOf(fee), lockUntil: tasks.Closed})
	}
	return out
}

// sync brings the cache up to the fold's current generation.
func (l *Ledger) sync() {
	changed, gen := l.fold.CreditChanges(l.gen, nil)
	for _, s := range changed {
		if old, ok := l.settled[s.TaskID]; ok {
			l.apply(old, -1)
			delete(l.settled, s.TaskID)
		}
		if old, ok := l.weighed[s.TaskID]; ok {
			l.party(old, false)
			delete(l.weighed, s.TaskID)
		}
		switch {
		case s.Removed:
		case s.WeightDependent:
			l.weighed[s.TaskID] = s
			l.party(s, true)
		default:
			l.settled[s.TaskID] = s
			l.apply(s, 1)
		}
	}
	l.gen = gen
}

func (l *Ledger) agent(id string) *agg {
	a := l.agents[id]
	if a == nil {
		a = &agg{index: map[string]int{}, weighed: map[string]tasks.TaskRef{}}
		l.agents[id] = a
	}
	return a
}

// apply adds (sign 1) or withdraws (sign -1) a weight-independent settlement.
func (l *Ledger) apply(s tasks.Settlement, sign int64) {
	l.fx = appendEffects(l.fx[:0], s, l.treasury)
	for _, e := range l.fx {
		a := l.agent(e.agent)
		if sign > 0 {
			a.balance = a.balance.Add(e.balance)
		} else {
			a.balance = a.balance.Sub(e.balance)
		}
		a.verified += sign * e.verified
		switch {
		case e.lockUntil == tasks.Closed:
		case e.lockUntil == math.MaxInt64 && sign > 0:
			a.forever = a.forever.Add(AmountOf(e.lock))
		case e.lockUntil == math.MaxInt64:
			a.forever = a.forever.Sub(AmountOf(e.lock))
		case sign > 0:
			a.index[s.TaskID] = len(a.expiring)
			a.expiring = append(a.expiring, lock{task: s.TaskID, until: e.lockUntil, amount: e.lock})
		default:
			a.dropLock(s.TaskID)
		}
		l.prune(e.agent, a)
	}
}

// party records (or forgets) a weight-dependent task with each agent it may
// move credit for.
func (l *Ledger) party(s tasks.Settlement, add bool) {
	treasury := l.treasury
	if s.Amount/10 == 0 {
		treasury = "" // no fee to collect
	}
	for _, id := range []string{s.Requester, s.Provider, treasury} {
		if id == "" {
			continue
		}
		a := l.agent(id)
		if add {
			a.weighed[s.TaskID] = s.Ref
		} else {
			delete(a.weighed, s.TaskID)
			l.prune(id, a)
		}
	}
}

// prune drops an agent whose cached position is empty.
func (l *Ledger) prune(id string, a *agg) {
	if a.balance.IsZero() && a.verified == 0 && a.forever.IsZero() && len(a.expiring) == 0 && len(a.weighed) == 0 {
		delete(l.agents, id)
	}
}

func (a *agg) dropLock(task string) {
	i, ok := a.index[task]
	if !ok {
		return
	}
	last := len(a.expiring) - 1
	if i != last {
		a.expiring[i] = a.expiring[last]
		a.index[a.expiring[i].task] = i
	}
	a.expiring = a.expiring[:last]
	delete(a.index, task)
}

func (a *agg) locked(now int64) Amount {
	sum := a.forever
	var small int64 // rewards are below 2^53, so 1024 of them fit an int64
	n := 0
	for _, lk := range a.expiring {
		if lk.until >= now {
			small += lk.amount
			if n++; n == 1024 {
				sum, small, n = sum.Add(AmountOf(small)), 0, 0
			}
		}
	}
	return sum.Add(AmountOf(small))
}
