package tasks

import (
	"math"
	"sort"

	"github.com/anp2net/relay/protocol"
)

// Closed is the OpenUntil of a task that is not open at any time.
const Closed = math.MinInt64

// Settlement is what one anp2_credit task means for credit (§18.11), read
// off the same derivation as Task.
type Settlement struct {
	TaskID    string
	Requester string
	Provider  string // author of the winning accept; "" when none
	Amount    int64  // reward.amount in whole credits
	Passed    bool   // the consensus verdict is passed
	// OpenUntil: the task is pending, accepted or completed at every
	// now <= OpenUntil and at no later time. Closed when it is never open;
	// math.MaxInt64 when it stays open.
	OpenUntil int64
	// WeightDependent is true when Passed or OpenUntil may change with the
	// weight function (a high-stakes task with at least 3 counting
	// verifiers); false when they are the same under every weight function.
	WeightDependent bool
	// Removed is true when the task's kind 50 is no longer in the fold; the
	// task then contributes nothing.
	Removed bool
	// Ref settles the task again under other weights (Resettle).
	Ref TaskRef
}

// TaskRef is a handle on one task, for settling it again without a lookup.
type TaskRef struct{ t *task }

// Generation returns a counter that grows with every change to the fold.
func (f *Fold) Generation() uint64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.gen
}

// CreditChanges returns the settlements of every anp2_credit task changed
// after generation since (all of them when since is 0), under weights w, and
// the generation they reflect.
func (f *Fold) CreditChanges(since uint64, w WeightFunc) ([]Settlement, uint64) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	var out []Settlement
	log := f.creditLog
	i := sort.Search(len(log), func(i int) bool { return log[i].gen > since })
	for _, e := range log[i:] {
		if e.gen == e.t.gen {
			s := f.settlement(e.t, w)
			s.TaskID = hexID(e.t.id)
			out = append(out, s)
		}
	}
	return out, f.gen
}

// Settlements returns the settlements of the given anp2_credit tasks under
// weights w, in the same order; an unknown id gives a Removed settlement.
func (f *Fold) Settlements(ids []string, w WeightFunc) []Settlement {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]Settlement, len(ids))
	for i, id := range ids {
		if t := f.lookup(id); t != nil && t.inCredit {
			out[i] = f.settlement(t, w)
			out[i].TaskID = id
		} else {
			out[i] = Settlement{TaskID: id, Removed: true}
		}
	}
	return out
}

// Resettle appends to dst the settlements of refs under weights w, in the
// same order, leaving TaskID empty (the caller knows it): the
// allocation-free path for weight-dependent tasks.
func (f *Fold) Resettle(dst []Settlement, refs []TaskRef, w WeightFunc) []Settlement {
	f.mu.RLock()
	defer f.mu.RUnlock()
	for _, r := range refs {
		dst = append(dst, f.settlement(r.t, w))
	}
	return dst
}

// settlement derives t's settlement; TaskID is left for the caller.
func (f *Fold) settlement(t *task, w WeightFunc) Settlement {
	s := Settlement{Ref: TaskRef{t}}
	if t.request == nil || t.request.Reward.PaymentMethod != protocol.PaymentANP2Credit {
		s.Removed = true
		return s
	}
	d := t.derive()
	final := f.finalOutcome(d, w)
	tl := f.buildTimeline(t, d, final, nil, math.MinInt64, false)
	s.Requester = f.names[t.req.agent]
	s.Amount = t.request.Reward.Credits
	if d.accept != nil {
		s.Provider = f.names[d.accept.agent]
	}
	s.Passed = final.verdict == protocol.VerdictPassed
	s.OpenUntil = Closed
	if tl.status.Open() {
		s.OpenUntil = tl.expiry
	}
	s.WeightDependent = d.highStakes && d.verifiers >= 3
	return s
}
