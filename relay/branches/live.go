package branches

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/eventlog"
	"github.com/anp2net/relay/relay/state"
)

// live is the derived state of the relay's preferred branch, the one the
// view routes answer from when no branch is asked for (SPEC §17.5). It is
// built once from the log (fresh folds over the branch's events) when the
// branches first leave the relay's own state insufficient — a rollback
// activates, or the preferred branch is not main — and then kept current:
// each committed event of the branch is folded in as it commits. It is
// rebuilt only when the membership rules change (the key of the view, see
// liveKey: a rollback activating, a branch renamed), so a view read costs
// what it costs on the relay's own state.
type live struct {
	mu sync.Mutex
	st *state.State
	// key is the membership key the state was built under; through the
	// highest log sequence folded in.
	key     string
	through int64
	// strays are the fork ids tagged by events folded in while no such
	// fork existed (those events would leave the branch if the fork
	// appeared: a rebuild).
	strays map[string]bool
	// forks are the voluntary forks of the view last absorbed; outside
	// lists, per b- id, the events tagging it that were left out of the
	// branch (by sequence and id): when that fork vanishes (every event
	// tagging it revoked) those events fall back into main as revoked
	// ones and are folded in then (absorb), without a rebuild. Each list
	// is in sequence order. absorbing holds, while absorb runs, the ids
	// it has still to fold in.
	forks     map[string]bool
	outside   map[string][]seqID
	absorbing map[string]bool
	// checked is the last view stale found the state good for (views are
	// cached per minute and event set, so a commit usually sees the same).
	checked *View
	// building is set while a rebuild reads the log: commits are kept in
	// pending and folded in after it.
	building bool
	pending  []eventlog.Committed
	builds   int // rebuilds done (tests, metrics)
	// last is the state last built (st while it is current): readers get
	// it while the state is stale and a rebuild waits or runs, nil (every
	// event) when none was built yet.
	last *state.State
	// wake asks Run for a rebuild; lastStart is the wall clock of the
	// last rebuild's start (at most one per Options.LiveRebuildEvery).
	wake      chan struct{}
	lastStart time.Time

	buildMu sync.Mutex // one rebuild at a time
}

// DefaultLiveRebuildEvery is the least time between two rebuilds of the
// preferred branch's state from the log.
const DefaultLiveRebuildEvery = 10 * time.Second

// rebuildEvery is Options.LiveRebuildEvery or its default.
func (m *Module) rebuildEvery() time.Duration {
	if m.opts.LiveRebuildEvery > 0 {
		return m.opts.LiveRebuildEvery
	}
	return DefaultLiveRebuildEvery
}

// wakeLive asks Run for a rebuild (never blocks).
func (l *live) wakeLive() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// liveKey is what the membership of an event in branch depends on besides
// the event: the rolled-back spans, whether branch exists and, for a fork,
// its root. Other voluntary forks are handled apart (stale).
func liveKey(v *View, branch string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %t", branch, v.Known(branch))
	for _, sp := range v.spans {
		fmt.Fprintf(&b, "|%s %d %d", sp.id, sp.asOf, sp.until)
	}
	for _, r := range v.roots {
		if r.fork == branch { // a fork's history follows its root
			fmt.Fprintf(&b, "|root %s", r.id)
		}
	}
	return b.String()
}

// seqID names a stored event.
type seqID struct {
	seq int64
	id  string
}

// forksOf returns the voluntary forks of v.
func forksOf(v *View) map[string]bool {
	out := map[string]bool{}
	for _, b := range v.Branches {
		if b.CreatedFrom == "voluntary_fork" {
			out[b.ID] = true
		}
	}
	return out
}

// noteOutside records e, left out of the branch, under each b- id it tags.
// Callers hold l.mu.
func (l *live) noteOutside(seq int64, e *protocol.Event) {
	for _, t := range branchTags(e) {
		if strings.HasPrefix(t, "b-") {
			l.outside[t] = append(l.outside[t], seqID{seq, e.ID})
		}
	}
}

// absorb folds in the events of the forks that vanished since the last
// call which now belong to branch (SPEC §17.3: their tags name no branch
// any more), fetching them from the log, in sequence order. Callers hold
// l.mu.
func (m *Module) absorb(v *View, branch string) {
	l := &m.live
	var todo []seqID
	for f := range l.forks {
		if v.Known(f) {
			continue
		}
		if l.absorbing == nil {
			l.absorbing = map[string]bool{}
		}
		for _, r := range l.outside[f] {
			if !l.absorbing[r.id] && r.seq <= l.through {
				l.absorbing[r.id] = true
				todo = append(todo, r)
			}
		}
		delete(l.outside, f)
	}
	slices.SortFunc(todo, func(a, b seqID) int { return cmp.Compare(a.seq, b.seq) })
	lookup := m.liveLookup(v, branch)
	for _, r := range todo {
		delete(l.absorbing, r.id) // folded in from here (or in no branch)
		e, err := m.core.Log().GetEvent(context.Background(), r.id)
		if err != nil || e == nil || !inBranch(v, branch, e) {
			continue
		}
		for _, g := range strayForks(v, e) {
			l.strays[g] = true
		}
		l.st.Add(r.seq, e, lookup)
	}
	l.absorbing = nil
	l.forks = forksOf(v)
}

// folded reports whether the stored event e at seq is folded into the
// live state, given that it is one of the branch's events: the events up
// to l.through are, except those still listed outside the branch (a
// vanished fork's, until absorb folds them in). Callers hold l.mu.
func (l *live) folded(seq int64, e *protocol.Event) bool {
	if seq > l.through || l.absorbing[e.ID] {
		return false
	}
	for _, t := range branchTags(e) {
		list := l.outside[t]
		i, found := slices.BinarySearchFunc(list, seq, func(r seqID, s int64) int { return cmp.Compare(r.seq, s) })
		if found && list[i].id == e.ID {
			return false
		}
	}
	return true
}

// stale reports whether the live state cannot answer for branch under v,
// and otherwise remembers v as checked. Callers hold l.mu.
func (l *live) stale(v *View, branch string) bool {
	if l.st != nil && v == l.checked {
		return false
	}
	if l.st == nil || l.key != liveKey(v, branch) {
		return true
	}
	// A fork vanishing needs no rebuild: it vanishes only when every
	// event tagging it is revoked, and those events, falling back into
	// main as revoked ones, are folded in by absorb; no other event changes
	// membership (SPEC §17.3: a fork's line is main or a pre-rollback
	// branch, never a fork).
	for f := range l.strays {
		if v.Known(f) { // a fork appeared that events folded in tag
			return true
		}
	}
	l.checked = v
	return false
}

// inBranch reports whether e is one of branch's events under v, as the
// per-branch states count them (kind 11 is ephemeral).
func inBranch(v *View, branch string, e *protocol.Event) bool {
	return e.Kind != protocol.KindHealth && v.In(e, branch)
}

// strayForks returns the b- ids e tags that v does not know.
func strayForks(v *View, e *protocol.Event) []string {
	var out []string
	for _, t := range branchTags(e) {
		if strings.HasPrefix(t, "b-") && !v.Known(t) {
			out = append(out, t)
		}
	}
	return out
}

// feed folds the committed events of branch under v not yet folded in, in
// sequence order: a revocation finds only the events before it (not one
// later in the same batch). Callers hold l.mu.
func (m *Module) feed(v *View, branch string, batch []eventlog.Committed) {
	l := &m.live
	lookup := m.liveLookup(v, branch)
	for _, c := range batch {
		if c.Seq <= l.through {
			continue
		}
		l.through = c.Seq
		if !inBranch(v, branch, c.Event) {
			l.noteOutside(c.Seq, c.Event)
			continue
		}
		for _, f := range strayForks(v, c.Event) {
			l.strays[f] = true
		}
		l.st.Add(c.Seq, c.Event, lookup)
	}
}

// onCommit keeps the live state current (the core's commit hook). With no
// live state (the relay's own state answers) it costs one lock.
func (m *Module) onCommitLive(batch []eventlog.Committed) {
	l := &m.live
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.building {
		l.pending = append(l.pending, batch...)
		return
	}
	if l.st == nil {
		return
	}
	v, b := m.fold.Current(m.core.Now()), m.preferred()
	if l.stale(v, b) {
		if l.st != nil {
			l.st.MarkStale()
		}
		l.st = nil // readers get last until Run rebuilds it
		l.wakeLive()
		return
	}
	m.feed(v, b, batch)
	m.absorb(v, b)
}

// liveLookup fetches a stored event for a revocation the live state folds
// in, only when it is one of branch's events already folded in: a
// revocation does not reach outside its branch, and one that meets its
// target first (a batch or a mirror holding them in that order, or a
// vanished fork's event not absorbed yet) is applied when the target is
// folded in, so that no view is asked to remove an event it never saw.
// Callers hold l.mu.
func (m *Module) liveLookup(v *View, branch string) state.Lookup {
	l := &m.live
	return func(id string) *protocol.Event {
		se, err := m.core.Log().Get(context.Background(), id)
		if err != nil || se.Seq > l.through {
			return nil
		}
		if _, _, withheld := eventlog.WithheldOf(se.Body); withheld {
			return nil
		}
		e, err := protocol.DecodeJSON(se.Body)
		if err != nil || !inBranch(v, branch, e) || !l.folded(se.Seq, e) {
			return nil
		}
		return e
	}
}

// liveFor returns the live state when it holds branch's events under v
// (branch is the preferred one and the membership is the same), else nil.
func (m *Module) liveFor(v *View, branch string) *state.State {
	if branch != m.preferred() {
		return nil
	}
	l := &m.live
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.building || l.stale(v, branch) {
		return nil
	}
	return l.st
}

// Default implements relay.Branches for the view routes without a branch
// parameter: the state of the relay's preferred branch at now, or nil when
// the relay's own state (every event) is that state — the preferred
// branch is main and the relay has one branch (no activated rollback, no
// voluntary fork), which costs one cached view lookup. It never reads the
// log nor waits for a rebuild: when the live state is stale it asks Run
// for one (at most one per Options.LiveRebuildEvery) and answers from the
// state last built meanwhile, or from every event when none was built.
func (m *Module) Default(ctx context.Context, now int64) (*state.State, error) {
	v, b := m.fold.Current(now), m.preferred()
	if b == "main" && v.Simple() {
		return nil, nil
	}
	l := &m.live
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.building && !l.stale(v, b) {
		return l.st, nil
	}
	l.wakeLive()
	if l.last != nil {
		l.last.MarkStale() // no longer fed: exact checks refuse it
	}
	return l.last, nil
}

// rebuild rebuilds the live state when it is stale and the last rebuild
// started at least rebuildEvery ago; it returns how long to wait before
// trying again (0: nothing to do). Run calls it.
func (m *Module) rebuild(ctx context.Context) (time.Duration, error) {
	now := m.core.Now()
	v, b := m.fold.Current(now), m.preferred()
	if b == "main" && v.Simple() {
		return 0, nil
	}
	l := &m.live
	l.mu.Lock()
	if !l.stale(v, b) {
		l.mu.Unlock()
		return 0, nil
	}
	if wait := m.rebuildEvery() - time.Since(l.lastStart); wait > 0 {
		l.mu.Unlock()
		return wait, nil
	}
	l.lastStart = time.Now()
	l.mu.Unlock()
	return 0, m.buildLive(ctx, v, b)
}

// buildLive rebuilds the live state of branch under v from the log, then
// folds in what was committed meanwhile.
func (m *Module) buildLive(ctx context.Context, v *View, branch string) error {
	l := &m.live
	l.buildMu.Lock()
	defer l.buildMu.Unlock()
	l.mu.Lock()
	if !l.stale(v, branch) {
		l.mu.Unlock()
		return nil
	}
	l.st, l.building, l.pending = nil, true, nil
	l.mu.Unlock()
	type seqEvent struct {
		seq int64
		e   *protocol.Event
	}
	var evs []seqEvent
	var through int64
	strays := map[string]bool{}
	outside := map[string][]seqID{}
	var err error
	if v.Known(branch) { // an unknown branch has no events: no read
		err = m.core.Log().Export(ctx, 0, func(t int64) error { through = t; return nil }, func(seq int64, body []byte) error {
			if _, _, withheld := eventlog.WithheldOf(body); withheld {
				return nil // a tombstone is in no view (SPEC §21.8)
			}
			e, err := protocol.DecodeJSON(body)
			if err != nil {
				return fmt.Errorf("live branch state: event at seq %d: %w", seq, err)
			}
			if inBranch(v, branch, e) {
				evs = append(evs, seqEvent{seq, e})
				for _, f := range strayForks(v, e) {
					strays[f] = true
				}
			} else {
				for _, t := range branchTags(e) {
					if strings.HasPrefix(t, "b-") {
						outside[t] = append(outside[t], seqID{seq, e.ID})
					}
				}
			}
			return nil
		})
	} else {
		through, err = m.head(ctx)
	}
	var st *state.State
	if err == nil { // folded outside l.mu: readers and commits go on meanwhile
		st = state.New(m.stateOptions())
		for _, se := range evs {
			st.Preload(se.e)
		}
		for _, se := range evs {
			st.Add(se.seq, se.e, nil)
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.building = false
	pending := l.pending
	l.pending = nil
	if err != nil {
		return err
	}
	l.st, l.last, l.key, l.through, l.strays, l.checked = st, st, liveKey(v, branch), through, strays, v
	l.forks, l.outside = forksOf(v), outside
	l.builds++
	m.feed(v, branch, pending)
	m.absorb(m.fold.Current(m.core.Now()), branch)
	return nil
}

// head returns the log's highest sequence.
func (m *Module) head(ctx context.Context) (int64, error) {
	var through int64
	err := m.core.Log().Export(ctx, 0, func(t int64) error { through = t; return errStop }, nil)
	if errors.Is(err, errStop) {
		err = nil
	}
	return through, err
}

var errStop = errors.New("stop")

// stateOptions are the options of a branch's fresh state: the relay's
// treasury and fresh copies of its registered folds.
func (m *Module) stateOptions() state.Options {
	opts := state.Options{Treasury: m.core.Config().Treasury}
	if m.opts.Folds != nil {
		opts.Folds = m.opts.Folds()
	}
	return opts
}

// Run builds the live state in the background when the branches make it
// necessary (at start after a rollback, when a rollback activates, when a
// read or a commit finds it stale), at most once per
// Options.LiveRebuildEvery, so that reads never wait for a rebuild.
func (m *Module) Run(ctx context.Context) {
	t := time.NewTicker(2 * time.Second)
	defer t.Stop()
	for {
		wait, err := m.rebuild(ctx)
		if err != nil && ctx.Err() == nil {
			m.core.Config().Logger.Warn("branches: building the preferred branch's state", "err", err)
		}
		var later <-chan time.Time
		if wait > 0 {
			later = time.After(wait)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-m.live.wake:
		case <-later:
		}
	}
}

// LiveBuilds returns how many times the preferred branch's state was
// rebuilt from the log.
func (m *Module) LiveBuilds() int {
	m.live.mu.Lock()
	defer m.live.mu.Unlock()
	return m.live.builds
}
