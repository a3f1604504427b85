package relay

import (
	"context"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/eventlog"
)

// AppendMirrored stores recs; in a bulk load without an fsync per
// transaction (the peer can send them again, and EndBulk commits durably).
func (s *Server) AppendMirrored(ctx context.Context, recs []eventlog.Record, bulk bool) error {
	append := s.store.AppendBatch
	if bulk {
		append = s.store.LoadBatch
	}
	_, err := append(ctx, recs)
	return err
}

// IngestMirrored verifies events on every core as mirrored events and
// appends the valid ones in one group commit. It returns how many were
// stored (new or duplicate) and how many were rejected.
func (s *Server) IngestMirrored(ctx context.Context, evs []*protocol.Event) (accepted, rejected int, err error) {
	recs, rejected := s.VerifyMirrored(evs)
	if _, err := s.store.AppendBatch(ctx, recs); err != nil {
		return 0, rejected, err
	}
	return len(recs), rejected, nil
}

// VerifyMirrored checks events as mirrored events and returns the records
// of the valid ones and the number rejected.
func (s *Server) VerifyMirrored(evs []*protocol.Event) ([]eventlog.Record, int) {
	errs := make([]error, len(evs))
	bodies := make([][]byte, len(evs))
	s.CheckMirrored(evs, errs, bodies)
	now := s.now()
	recs := make([]eventlog.Record, 0, len(evs))
	for i, e := range evs {
		if errs[i] == nil {
			recs = append(recs, eventlog.Record{Event: e, Body: bodies[i], RawType: "json", ReceivedAt: now})
		}
	}
	return recs, len(evs) - len(recs)
}

// CheckMirrored verifies evs on every core as mirrored events (SPEC §6.2):
// envelope, limits, id, signature and PoW (protocol.Checker.CheckStored),
// without the freshness window, rate limits, log-dependent rules or kind
// content rules (D15: the folds judge content); never kind 11. It fills
// errs[i] for each bad event; entries already set, or with a nil event,
// are left alone. When bodies is not nil, it also encodes each good
// event's body into it, on the same cores.
func (s *Server) CheckMirrored(evs []*protocol.Event, errs []error, bodies [][]byte) {
	checker := s.cfg.Checker
	checker.Limits.MaxAge = 0
	now := s.now()
	// In author order, a worker verifies an author's events one after
	// another, while that author's key table is in the cache.
	order := make([]int, len(evs))
	for i := range order {
		order[i] = i
	}
	author := func(i int) string {
		if evs[i] == nil {
			return ""
		}
		return evs[i].AgentID
	}
	slices.SortFunc(order, func(a, b int) int { return strings.Compare(author(a), author(b)) })
	var wg sync.WaitGroup
	// Workers take the next 64 events in author order until none are
	// left (so none waits on another that got the slower keys); their
	// signatures are verified together (CheckStoredBatch).
	var next atomic.Int64
	for range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			bevs, berrs := make([]*protocol.Event, 0, 64), make([]error, 0, 64)
			for {
				lo := int(next.Add(64)) - 64
				if lo >= len(order) {
					return
				}
				group := order[lo:min(lo+64, len(order))]
				bevs, berrs = bevs[:0], berrs[:0]
				for _, i := range group {
					if errs[i] == nil && evs[i] != nil && evs[i].Kind == protocol.KindHealth {
						errs[i] = protocol.Errorf(CodeNotMirrored, "kind 11 health beats are never mirrored")
					}
					bevs, berrs = append(bevs, evs[i]), append(berrs, errs[i])
				}
				checker.CheckStoredBatch(bevs, now, berrs)
				for k, i := range group {
					if errs[i] = berrs[k]; errs[i] == nil && evs[i] != nil && bodies != nil {
						bodies[i] = protocol.AppendJSON(nil, evs[i])
					}
				}
			}
		}()
	}
	wg.Wait()
}
