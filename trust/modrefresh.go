package trust

import (
	"context"
	"time"
)

// Current returns the latest published moderation snapshot for a request at
// now. Like Graph.Current it never computes on the request path except when
// nothing is published yet or the published snapshot trails now by more
// than MaxLag; otherwise a stale snapshot (see stale) triggers one
// background refresh, at most every MinInterval for new events.
func (m *Moderation) Current(now int64) *ModSnapshot {
	s := m.snap.Load()
	if s == nil || now-s.Now > m.opts.MaxLag {
		return m.Refresh(now)
	}
	if m.due(s, now) {
		m.kick(now)
	}
	return s
}

// due reports whether s should be replaced by a snapshot at now: it is
// stale by time (now has reached a later minute, or the instant a flag dated
// after s.Now or a debounced transition takes effect), or flags or trust
// votes changed and MinInterval has passed since the last refresh began.
// Changes that are neither (activity, hence the threshold) are picked up at
// the next minute or with the next flag.
func (m *Moderation) due(s *ModSnapshot, now int64) bool {
	if now < s.Now {
		return false
	}
	if EvalTime(now) > s.Now || s.wake != 0 && now >= s.wake {
		return true
	}
	changed := s.flagVersion != m.flagVersion.Load() || s.TrustVersion != m.g.version.Load()
	return changed && time.Since(time.Unix(0, m.lastStart.Load())) >= m.opts.MinInterval
}

// Latest returns the latest published snapshot without refreshing, or nil
// before the first refresh.
func (m *Moderation) Latest() *ModSnapshot { return m.snap.Load() }

// Hidden reports whether eventID is hidden in the latest published snapshot
// (false before the first one). It is O(1) and never refreshes.
func (m *Moderation) Hidden(eventID string) bool {
	s := m.snap.Load()
	return s != nil && s.Hidden(eventID)
}

// Refresh computes, publishes and returns the exact snapshot at now (to the
// second), refreshing the Graph's snapshot at the same time too, unless the
// published one already reflects the current state at now. OnPublish runs
// before it returns.
func (m *Moderation) Refresh(now int64) *ModSnapshot { return m.refresh(now, false) }

func (m *Moderation) refresh(now int64, background bool) *ModSnapshot {
	m.refreshMu.Lock()
	defer m.refreshMu.Unlock()
	prev := m.snap.Load()
	if prev != nil && background && prev.Now > now {
		return prev
	}
	ts := m.g.Refresh(now)
	if prev != nil && prev.Now == now && prev.Version == m.version.Load() && prev.TrustVersion == ts.Version {
		return prev
	}
	m.lastStart.Store(time.Now().UnixNano())
	s := m.compute(ts)
	s.diff(prev)
	if prev != nil {
		s.Seq = prev.Seq + 1
	} else {
		s.Seq = 1
	}
	m.snap.Store(s)
	if m.opts.OnPublish != nil {
		m.opts.OnPublish(s)
	}
	return s
}

func (m *Moderation) kick(now int64) {
	if !m.refreshing.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer m.refreshing.Store(false)
		m.refresh(now, true)
	}()
}

// Run publishes a fresh snapshot of both views whenever the published one
// is due (see due), checking every tick (clock gives unix seconds), until
// ctx is done. So committed flags and votes show within MinInterval plus a
// tick plus one computation, and time-driven changes (decay, debounced
// transitions, flags dated a little ahead) are published, with their
// OnPublish notices, even when nobody reads. A check is two atomic loads.
func (m *Moderation) Run(ctx context.Context, clock func() int64, tick time.Duration) {
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		now := clock()
		if s := m.snap.Load(); s == nil || m.due(s, now) {
			m.Refresh(now)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
