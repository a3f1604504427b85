package relay

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/eventlog"
)

// PoWBypass decides seed §8.2's standing-based PoW bypass (SPEC §12.1): an
// agent whose standing meets the threshold may publish a kind 0 or 50
// without the mandatory proof of work. The relay asks Eligible first, from
// published snapshots, outside any lock; only when it says yes does the
// publish reach the log's writer, where Confirm judges the exact standing
// with every earlier commit folded, before the insert and with no other
// append in between (eventlog.Record.Admit).
type PoWBypass interface {
	// Eligible is the cheap pre-check at now.
	Eligible(agent string, now int64) bool
	// Confirm is the exact check at now, under the writer lock.
	Confirm(agent string, now int64) bool
}

// admitter is a log that runs eventlog.Record.Admit under its writer lock.
type admitter interface{ Admits() bool }

// SetPoWBypass installs the standing-based PoW bypass. It fails when the
// log cannot judge a rule under its writer lock (the PostgreSQL log, whose
// writers are several processes) or when a bypass is already installed.
func (s *Server) SetPoWBypass(b PoWBypass) error {
	if a, ok := s.store.(admitter); !ok || !a.Admits() {
		return errors.New("the standing-based PoW bypass needs a log that judges standing under its writer lock (the SQLite log)")
	}
	if s.powBypass != nil {
		return fmt.Errorf("a PoW bypass is already installed")
	}
	s.powBypass = b
	return nil
}

// checkAfterID runs the signature, PoW and kind rules (step 5–7 of SPEC
// §1.3). When the only fault is a missing or too-low mandatory proof of
// work (pow_required, pow_below_minimum) and a bypass is installed, the
// kind rules are still applied and, if the author is eligible, it returns
// the rule the log's writer must confirm before the insert; that rule
// answers the original PoW error when the exact standing falls short.
func (s *Server) checkAfterID(e *protocol.Event, now time.Time) (admit func() error, err error) {
	err = s.cfg.Checker.CheckAfterID(e)
	if err == nil || s.powBypass == nil || !bypassable(err) {
		return nil, err
	}
	// The signature held: PoW is judged after it.
	if errs := protocol.CheckKind(e); len(errs) > 0 {
		return nil, errs[0]
	}
	if !s.powBypass.Eligible(e.AgentID, now.Unix()) {
		return nil, err
	}
	powErr, agent, at := err, e.AgentID, now.Unix()
	return func() error {
		if !s.powBypass.Confirm(agent, at) {
			return powErr
		}
		return nil
	}, nil
}

// bypassable reports whether err is a shortfall of mandatory proof of
// work, the only fault the bypass forgives (a malformed pow tag or one
// claiming more bits than the id has stays an error).
func bypassable(err error) bool {
	code := protocol.CodeOf(err)
	return code == protocol.CodePoWRequired || code == protocol.CodePoWBelowMinimum
}

// bypassDryRun drops a forgivable PoW shortfall from a dry run's
// violations when the author passes the bypass's pre-check and the
// signature holds (the commit-time check may still refuse it).
func (s *Server) bypassDryRun(e *protocol.Event, now time.Time, errs []error) []error {
	if s.powBypass == nil || !slices.ContainsFunc(errs, bypassable) || e.CheckSig() != nil ||
		!s.powBypass.Eligible(e.AgentID, now.Unix()) {
		return errs
	}
	return slices.DeleteFunc(errs, bypassable)
}

// appendPublished appends a publish batch's records: those without an
// admission rule in one group commit, each with one alone (Append judges
// it under the writer lock), so a refusal answers that event only. errs[i]
// is record i's refusal; err is a failure of the log.
func (s *Server) appendPublished(ctx context.Context, recs []eventlog.Record) (results []eventlog.Result, errs []error, err error) {
	results, errs = make([]eventlog.Result, len(recs)), make([]error, len(recs))
	var plain []eventlog.Record
	var at []int
	for i, rec := range recs {
		if rec.Admit == nil {
			plain, at = append(plain, rec), append(at, i)
		}
	}
	if len(plain) > 0 {
		res, err := s.store.AppendBatch(ctx, plain)
		if err != nil {
			return nil, nil, err
		}
		for k, i := range at {
			results[i] = res[k]
		}
	}
	for i, rec := range recs {
		if rec.Admit == nil {
			continue
		}
		res, err := s.store.Append(ctx, rec)
		var pe *protocol.Error
		switch {
		case errors.As(err, &pe):
			errs[i] = err
		case err != nil:
			return nil, nil, err
		}
		results[i] = res
	}
	return results, errs, nil
}
