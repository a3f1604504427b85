package protocol

// Stored-event checks (D15, SPEC §6.2). An event that reaches the log from a
// peer, a mirror or an import is judged on what makes it authentic and
// bounded — envelope and limits, id, signature, proof of work — but not on
// its kind's content rules: relays must converge on one set, and the folds
// decide, with a reason, whether malformed content counts. Direct publishes
// keep every rule (Checker.CheckFirst).

// CheckStored returns the first violation of e at time now among the rules a
// stored event must pass (limits, id, signature, PoW; no kind rules), or nil.
// The freshness window is the caller's choice: set c.Limits.MaxAge to 0 for
// history.
func (c Checker) CheckStored(e *Event, now int64) error {
	if errs := c.Limits.Check(e, now); len(errs) > 0 {
		return errs[0]
	}
	if err := e.CheckID(); err != nil {
		return err
	}
	if err := e.CheckSig(); err != nil {
		return err
	}
	return c.checkPoW(e)
}

// CheckStoredBatch sets errs[i] to CheckStored(evs[i], now) for every i with
// a non-nil evs[i] and a nil errs[i] (others are left alone), verifying the
// signatures together as CheckFirstBatch does.
func (c Checker) CheckStoredBatch(evs []*Event, now int64, errs []error) {
	c.checkBatch(evs, now, errs, c.checkPoW)
}

// checkPoW is the one rule after the signature that a stored event must
// pass: its proof of work.
func (c Checker) checkPoW(e *Event) error {
	id, _ := e.IDBytes()
	return c.PoW.Check(e, id)
}
