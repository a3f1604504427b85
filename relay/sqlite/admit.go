package sqlite

import (
	"context"
	"slices"

	"github.com/anp2net/relay/relay/eventlog/groupcommit"
)

// Admission under the writer lock (eventlog.Record.Admit, SPEC §12.1).
// The log has one writer goroutine and the hook (the derived views) runs
// on the finisher, one commit behind it. An append with an Admit rule
// runs as a control step of the writer: it waits until the finisher has
// handed every earlier commit to the hook, so the views reflect exactly
// the log as it stands, judges the rule, and commits the append alone;
// no other append can commit between the judgement and the insert.

// Admits reports that the store honours Record.Admit.
func (s *Store) Admits() bool { return true }

// admits reports whether any of recs carries an Admit rule.
func admits(recs []Record) bool {
	return slices.ContainsFunc(recs, func(r Record) bool { return r.Admit != nil })
}

// appendAdmitted stores rec if rec.Admit, judged under the writer lock
// with every earlier commit folded, lets it.
func (s *Store) appendAdmitted(ctx context.Context, rec Record) (Result, error) {
	req := groupcommit.NewRequest(rec, false)
	if err := s.control(ctx, func() error {
		s.awaitHook()
		if err := rec.Admit(); err != nil {
			return err
		}
		s.commit([]*groupcommit.Request{req})
		return nil
	}); err != nil {
		return Result{}, err
	}
	r := <-req.Done
	return r.Res, r.Err
}

// appendEach stores recs one at a time, those with an Admit rule through
// appendAdmitted (a publish batch holding one: no group commit for it).
func (s *Store) appendEach(ctx context.Context, recs []Record) ([]Result, error) {
	out := make([]Result, len(recs))
	var firstErr error
	for i, rec := range recs {
		var err error
		if rec.Admit != nil {
			out[i], err = s.appendAdmitted(ctx, rec)
		} else {
			out[i], err = s.Append(ctx, rec)
		}
		if err != nil && firstErr == nil {
			firstErr = err
		}
	}
	return out, firstErr
}

// awaitHook returns once the finisher has run the hook over every batch
// committed so far. Only the writer goroutine calls it.
func (s *Store) awaitHook() {
	b := make(chan struct{})
	s.finished <- finishJob{barrier: b}
	<-b
}
