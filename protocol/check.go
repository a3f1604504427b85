package protocol

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
	id, _ := e.IDBytes()
	if err := c.PoW.Check(e, id); err != nil {
		return err
	}
	if errs := CheckKind(e); len(errs) > 0 {
		return errs[0]
	}
	return nil
}
