package relay

import (
	"context"
	"encoding/hex"
	"fmt"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/eventlog"
	"github.com/anp2net/relay/relay/reconcile"
	"github.com/anp2net/relay/relay/state"
	"github.com/anp2net/relay/tasks"
	"github.com/anp2net/relay/trust"
)

// rebuild folds every stored event into a fresh state, in log order, and
// reports progress (done, total) every few thousand events.
func rebuild(ctx context.Context, st eventlog.Log, opts state.Options, progress func(done, total int64), also func(*protocol.Event)) (*state.State, error) {
	s := state.New(opts)
	var folded int64
	lookup := foldedLookup(st, &folded)
	var total, done int64
	err := st.Export(ctx, 0, func(through int64) error { total = through; return nil },
		func(seq int64, body []byte) error {
			folded = seq
			e, err := s.AddStored(seq, body, lookup)
			if err != nil {
				return fmt.Errorf("rebuild: event at seq %d: %w", seq, err)
			}
			if e != nil { // nil: a withheld event's tombstone
				also(e)
			}
			done++
			if progress != nil && done%5000 == 0 {
				progress(seq, total)
			}
			return nil
		})
	if err != nil {
		return nil, err
	}
	if progress != nil {
		progress(total, total)
	}
	return s, nil
}

// foldedLookup is storeLookup for a fold of the stored log in seq order:
// it finds only the events at or before *folded, as a live relay's lookup
// finds only the events committed (and folded) before. A later event is
// not there yet: the revocation is then applied when it is added, and no
// view is asked to remove an event it never saw.
func foldedLookup(st eventlog.Log, folded *int64) state.Lookup {
	return func(id string) *protocol.Event {
		se, err := st.Get(context.Background(), id)
		if err != nil || se.Seq > *folded {
			return nil
		}
		e, err := protocol.DecodeJSON(se.Body)
		if err != nil {
			return nil
		}
		return e
	}
}

// storeLookup fetches stored events for revocations (rare: kind 9 only).
func storeLookup(st eventlog.Log) state.Lookup {
	return func(id string) *protocol.Event {
		e, err := st.GetEvent(context.Background(), id)
		if err != nil {
			return nil
		}
		return e
	}
}

// apply is the store's commit hook: it folds newly committed events into
// the derived state before their publishers are answered.
func (s *Server) apply(batch []eventlog.Committed) {
	// A batch is committed at once: a kind 9 must not find a target that
	// comes after it in the batch before that target is folded.
	var folded int64
	lookup := foldedLookup(s.store, &folded)
	for _, c := range batch {
		folded = c.Seq
		s.state.Add(c.Seq, c.Event, lookup)
		s.index.Add(ItemOf(c.Event))
	}
	for _, h := range s.onCommit {
		h(batch)
	}
}

// weights returns the verifier weight function at now: the published trust
// snapshot, refreshed in the background when stale, with no weight for a
// verifier whose collusion challenge holds (§18.6.1).
func (s *Server) weights(now int64) tasks.WeightFunc { return verifierWeights(s.viewsState(), now) }

// verifierWeights is st's verifier weight function at now (the published
// trust and moderation snapshots; trust.VerifierWeight).
func verifierWeights(st *state.State, now int64) tasks.WeightFunc {
	return trust.VerifierWeight(st.Trust.Current(now), st.Moderation.Current(now))
}

// TaskSource answers task queries at the relay clock with the trust
// weights of the same state: the preferred branch's (SPEC §17.5), or the
// branch NativeTasksIn named. The A2A module reads native tasks through it.
type TaskSource struct {
	s *Server
	// st is the state of the branch asked for; nil: the preferred
	// branch's, resolved at each call.
	st *state.State
}

// taskSource is the handlers' name for TaskSource.
type taskSource = TaskSource

// state returns the state t answers from.
func (t TaskSource) state() *state.State {
	if t.st != nil {
		return t.st
	}
	return t.s.viewsState()
}

// Task returns the task with id, or false.
func (t TaskSource) Task(id string) (tasks.TaskView, bool) {
	now, st := t.s.cfg.Now().Unix(), t.state()
	return st.Tasks.Task(id, now, verifierWeights(st, now))
}

// List returns the tasks matching f, newest first.
func (t TaskSource) List(f tasks.Filter) []tasks.TaskView {
	now, st := t.s.cfg.Now().Unix(), t.state()
	return st.Tasks.List(f, now, verifierWeights(st, now))
}

// ItemOf is an event's reconciliation item.
func ItemOf(e *protocol.Event) reconcile.Item {
	it := reconcile.Item{CreatedAt: e.CreatedAt}
	hex.Decode(it.ID[:], []byte(e.ID))
	return it
}
