package trust

import "time"

// Published snapshots. Queries never compute per request: they read the
// latest published Snapshot through an atomic pointer. A published snapshot
// is stale when votes changed since it was computed or when now has reached
// a later minute than its Now; Current then triggers a background refresh
// (at most one at a time, and for changed votes at most every MinInterval)
// evaluated at the exact second, and readers keep getting the previous
// snapshot meanwhile. Current computes synchronously only when nothing is
// published yet or the published snapshot trails now by more than MaxLag.

// Current returns the latest published snapshot for a request at now,
// refreshing as described above. Its Now and Version say what it reflects.
func (g *Graph) Current(now int64) *Snapshot {
	s := g.snap.Load()
	if s == nil || now-s.Now > g.opts.MaxLag {
		return g.Refresh(now)
	}
	if EvalTime(now) > s.Now || s.Version != g.version.Load() && g.intervalPassed() {
		g.kick(now)
	}
	return s
}

// At returns the exact snapshot at EvalTime(now) for the current version:
// the published one when it is exactly that, otherwise a fresh Compute
// (not published). Derivations that must be exact for a time (task
// consensus weights, digests, replays) use it.
func (g *Graph) At(now int64) *Snapshot {
	if s := g.snap.Load(); s != nil && s.Now == EvalTime(now) && s.Version == g.version.Load() {
		return s
	}
	return g.Compute(now)
}

// Latest returns the latest published snapshot without refreshing, or nil
// before the first refresh.
func (g *Graph) Latest() *Snapshot { return g.snap.Load() }

// Refresh computes, publishes and returns the exact snapshot at now (to the
// second, not rounded) for the current version, unless the published one
// already is that snapshot.
func (g *Graph) Refresh(now int64) *Snapshot { return g.refresh(now, false) }

// refresh is Refresh; in the background it leaves alone a snapshot published
// meanwhile for a later time.
func (g *Graph) refresh(now int64, background bool) *Snapshot {
	g.refreshMu.Lock()
	defer g.refreshMu.Unlock()
	if s := g.snap.Load(); s != nil && (s.Now == now && s.Version == g.version.Load() || background && s.Now > now) {
		return s
	}
	g.lastStart.Store(time.Now().UnixNano())
	version, names, raw, first := g.extract()
	s := g.snapshot(now, version, names, raw, first)
	g.snap.Store(s)
	return s
}

func (g *Graph) intervalPassed() bool {
	return time.Since(time.Unix(0, g.lastStart.Load())) >= g.opts.MinInterval
}

// kick starts a background Refresh unless one is running.
func (g *Graph) kick(now int64) {
	if !g.refreshing.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer g.refreshing.Store(false)
		g.refresh(now, true)
	}()
}
