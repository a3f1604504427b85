package trust

import (
	"context"
	"time"
)

// Current returns the latest published moderation snapshot for a request at
// now. Like Graph.Current it never computes on the request path except when
// nothing is published yet or the published snapshot trails EvalTime(now)
// by more than MaxLag; otherwise a stale snapshot (new minute, new flags,
// new trust votes after MinInterval) triggers one background refresh.
// Changes that are not flags (activity, hence the threshold) are picked up
// at the next minute or with the next flag.
func (m *Moderation) Current(now int64) *ModSnapshot {
	at := EvalTime(now)
	s := m.snap.Load()
	if s == nil || at-s.Now > m.opts.MaxLag {
		return m.Refresh(now)
	}
	if s.Now != at || m.changed(s) && time.Since(time.Unix(0, m.lastStart.Load())) >= m.opts.MinInterval {
		m.kick(now)
	}
	return s
}

func (m *Moderation) changed(s *ModSnapshot) bool {
	return s.flagVersion != m.flagVersion.Load() || s.TrustVersion != m.g.version.Load()
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

// Refresh computes, publishes and returns the exact snapshot at
// EvalTime(now) (refreshing the Graph's snapshot too), unless the published
// one already reflects the current state at that time. OnPublish runs
// before it returns.
func (m *Moderation) Refresh(now int64) *ModSnapshot { return m.refresh(now, false) }

func (m *Moderation) refresh(now int64, background bool) *ModSnapshot {
	at := EvalTime(now)
	m.refreshMu.Lock()
	defer m.refreshMu.Unlock()
	prev := m.snap.Load()
	if prev != nil && background && prev.Now > at {
		return prev
	}
	ts := m.g.Refresh(at)
	if prev != nil && prev.Now == at && prev.Version == m.version.Load() && prev.TrustVersion == ts.Version {
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

// Run refreshes both views every interval (clock gives unix seconds) until
// ctx is done, so that time-driven changes (decay, debounced transitions)
// are published, with their OnPublish notices, even when nobody reads.
func (m *Moderation) Run(ctx context.Context, clock func() int64, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		m.Refresh(clock())
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
