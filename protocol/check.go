package protocol

import "github.com/anp2net/relay/protocol/sigverify"

// Checker runs every publish-time rule on a decoded envelope, in the order
// the relay applies them: limits, id, signature, proof of work, kind rules.
type Checker struct {
	Limits Limits
	PoW    PoWPolicy
}

// DefaultChecker uses DefaultLimits and DefaultPoWPolicy.
func DefaultChecker() Checker {
	return Checker{Limits: DefaultLimits(), PoW: DefaultPoWPolicy()}
}

// CheckAll returns every violation of e at time now (dry-run). The signature
// and PoW are checked only when the id is right, since both are defined
// over the true id.
func (c Checker) CheckAll(e *Event, now int64) []error {
	errs := c.Limits.Check(e, now)
	if err := e.CheckID(); err != nil {
		errs = append(errs, err)
	} else {
		if err := e.CheckSig(); err != nil {
			errs = append(errs, err)
		}
		id, _ := e.IDBytes()
		if err := c.PoW.Check(e, id); err != nil {
			errs = append(errs, err)
		}
	}
	return append(errs, CheckKind(e)...)
}

// CheckFirst returns the first violation of e at time now, or nil.
func (c Checker) CheckFirst(e *Event, now int64) error {
	if errs := c.Limits.Check(e, now); len(errs) > 0 {
		return errs[0]
	}
	if err := e.CheckID(); err != nil {
		return err
	}
	return c.CheckAfterID(e)
}

// CheckAfterID runs the rules that follow the id check: signature, PoW and
// kind rules. It assumes e.CheckID passed.
func (c Checker) CheckAfterID(e *Event) error {
	if err := e.CheckSig(); err != nil {
		return err
	}
	return c.checkAfterSig(e)
}

// CheckFirstBatch sets errs[i] to CheckFirst(evs[i], now) for every i
// with a non-nil evs[i] and a nil errs[i] (others are left alone). The
// signatures that get that far are verified together
// (sigverify.Cache.VerifyBatch), which is faster than one at a time; the
// answers, and which rule an event fails first, are CheckFirst's.
func (c Checker) CheckFirstBatch(evs []*Event, now int64, errs []error) {
	c.checkBatch(evs, now, errs, c.checkAfterSig)
}

// checkBatch runs limits, id and signature on each event not yet judged,
// verifying the signatures together, then after on those whose signature
// holds; it fills errs[i] with each event's first violation.
func (c Checker) checkBatch(evs []*Event, now int64, errs []error, after func(*Event) error) {
	jobs := make([]sigverify.Job, 0, len(evs))
	at := make([]int, 0, len(evs))
	for i, e := range evs {
		if e == nil || errs[i] != nil {
			continue
		}
		if lerrs := c.Limits.Check(e, now); len(lerrs) > 0 {
			errs[i] = lerrs[0]
			continue
		}
		if err := e.CheckID(); err != nil {
			errs[i] = err
			continue
		}
		pub, sig, id, err := e.sigParts()
		if err != nil {
			errs[i] = err
			continue
		}
		jobs = append(jobs, sigverify.Job{Pub: pub, Msg: id, Sig: sig})
		at = append(at, i)
	}
	ok := make([]bool, len(jobs))
	sigverify.Default.VerifyBatch(jobs, ok)
	for n, i := range at {
		if !ok[n] {
			errs[i] = errBadSig()
			continue
		}
		errs[i] = after(evs[i])
	}
}

// checkAfterSig runs the rules after the signature: PoW and kind rules.
func (c Checker) checkAfterSig(e *Event) error {
	if err := c.checkPoW(e); err != nil {
		return err
	}
	if errs := CheckKind(e); len(errs) > 0 {
		return errs[0]
	}
	return nil
}
