package reference

import (
	"slices"

	"github.com/anp2net/relay/protocol"
)

// recentIndex lists the feed's candidate events (FeedKinds) by author and
// by topic, each list oldest first by (created_at, id), as stubs: id,
// author, time, kind and t tags — what ranking needs (§18.7). The feed
// reads its candidates here instead of querying the log, and fetches the
// bodies of the items it returns only.
//
// No feed asks for events older than its widest window (maxFeedWindow)
// before its clock: Recent drops the stubs created before until −
// maxFeedWindow (horizon), at most once per prunePeriod of until, and apply
// no longer adds older ones, so the index holds about 90 days of events,
// not the whole log. The horizon follows the reader's clock, not the
// newest event (a far-future event from a peer must not empty the index),
// and only moves forward. The index feeds no digest (the feed is not
// digested, §18.7): a rebuilt index answers every query within the
// window exactly as the live one.
type recentIndex struct {
	byAuthor map[string][]*protocol.Event
	byTopic  map[string][]*protocol.Event
	horizon  int64 // stubs created before it are dropped
}

// maxFeedWindow is the widest feed window (ParseWindow's 90 d); prunePeriod
// is how far the horizon moves before the index is pruned again.
const (
	maxFeedWindow = 90 * 86400
	prunePeriod   = 3600
)

func newRecentIndex() recentIndex {
	return recentIndex{byAuthor: map[string][]*protocol.Event{}, byTopic: map[string][]*protocol.Event{}}
}

func feedKind(k int64) bool { return slices.Contains(FeedKinds, k) }

func (x *recentIndex) apply(e *protocol.Event, add bool) {
	if !feedKind(e.Kind) || add && e.CreatedAt < x.horizon {
		return
	}
	stub := &protocol.Event{ID: e.ID, AgentID: e.AgentID, CreatedAt: e.CreatedAt, Kind: e.Kind}
	for _, t := range topicsOf(e) {
		stub.Tags = append(stub.Tags, []string{"t", t})
	}
	place(x.byAuthor, e.AgentID, stub, add)
	for _, t := range topicsOf(e) {
		place(x.byTopic, t, stub, add)
	}
}

// prune drops the stubs created before horizon (copying the lists kept,
// so the dropped ones' memory is freed).
func (x *recentIndex) prune(horizon int64) {
	x.horizon = horizon
	for _, m := range []map[string][]*protocol.Event{x.byAuthor, x.byTopic} {
		for k, list := range m {
			i, _ := slices.BinarySearchFunc(list, &protocol.Event{CreatedAt: horizon}, cmpEvents)
			switch {
			case i == len(list):
				delete(m, k)
			case i > 0:
				m[k] = slices.Clone(list[i:])
			}
		}
	}
}

// pruneRecent moves the index's horizon to until − maxFeedWindow when it
// has fallen prunePeriod behind.
func (f *Fold) pruneRecent(until int64) {
	h := until - maxFeedWindow
	f.mu.RLock()
	due := h >= f.recent.horizon+prunePeriod
	f.mu.RUnlock()
	if !due {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if h >= f.recent.horizon+prunePeriod {
		f.recent.prune(h)
	}
}

// cmpEvents orders by (created_at, id).
func cmpEvents(a, b *protocol.Event) int {
	if a.CreatedAt != b.CreatedAt {
		if a.CreatedAt < b.CreatedAt {
			return -1
		}
		return 1
	}
	if a.ID < b.ID {
		return -1
	} else if a.ID > b.ID {
		return 1
	}
	return 0
}

func place(m map[string][]*protocol.Event, key string, e *protocol.Event, add bool) {
	list := m[key]
	i, found := slices.BinarySearchFunc(list, e, cmpEvents)
	switch {
	case add && !found:
		m[key] = slices.Insert(list, i, e)
	case !add && found:
		list = slices.Delete(list, i, i+1)
		if len(list) == 0 {
			delete(m, key)
		} else {
			m[key] = list
		}
	}
}

// Recent returns, newest first by (created_at, id), at most n distinct
// feed-kind events (stubs: id, agent_id, created_at, kind, t tags) created
// in [since, until] by any of authors, or carrying any of topics — the
// same events as a log query with those conditions and limit n, for any
// since ≥ until − 90 d. until is the reader's clock, which must not go
// back: older stubs are dropped (see recentIndex).
func (f *Fold) Recent(authors, topics []string, since, until int64, n int) []*protocol.Event {
	f.pruneRecent(until)
	f.mu.RLock()
	defer f.mu.RUnlock()
	var out []*protocol.Event
	take := func(list []*protocol.Event) {
		lo, _ := slices.BinarySearchFunc(list, &protocol.Event{CreatedAt: since}, cmpEvents)
		hi, _ := slices.BinarySearchFunc(list, &protocol.Event{CreatedAt: until + 1}, cmpEvents)
		out = append(out, list[max(lo, hi-n):hi]...)
	}
	for _, a := range authors {
		take(f.recent.byAuthor[a])
	}
	for _, t := range topics {
		take(f.recent.byTopic[t])
	}
	slices.SortFunc(out, func(a, b *protocol.Event) int { return cmpEvents(b, a) })
	out = slices.CompactFunc(out, func(a, b *protocol.Event) bool { return a.ID == b.ID })
	return out[:min(len(out), n)]
}
