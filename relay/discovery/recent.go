package discovery

import (
	"slices"
	"sort"

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
	byAuthor map[string]*stubList
	byTopic  map[string]*stubList
	horizon  int64 // stubs created before it are dropped
}

// stubList is one author's or topic's stubs, oldest first; each with its
// created_at and its id's first 8 bytes beside it, so a search reads a
// stub only on a tie of both (events of one busy second tie on created_at).
type stubList struct{ list []stubRef }

type stubRef struct {
	at  int64
	pre uint64 // idPrefix(ev.ID)
	ev  *protocol.Event
}

// idPrefix is id's first 8 bytes as a big-endian number (zero-padded):
// ids in that order are in string order.
func idPrefix(id string) uint64 {
	var p uint64
	for i := range 8 {
		p <<= 8
		if i < len(id) {
			p |= uint64(id[i])
		}
	}
	return p
}

// search is the index of the first stub at or after (at, id).
func (l *stubList) search(at int64, id string) int {
	n, pre := len(l.list), idPrefix(id)
	// A new stub is most often the newest, or near the end: gallop back
	// from the end before the binary search.
	lo, hi := 0, n
	for step := 1; hi > 0; step *= 2 {
		k := max(0, n-step)
		if l.list[k].before(at, pre, id) {
			lo = k + 1
			break
		}
		hi = k
	}
	return lo + sort.Search(hi-lo, func(i int) bool { return !l.list[lo+i].before(at, pre, id) })
}

// before reports whether r comes before (at, id); pre is idPrefix(id).
func (r *stubRef) before(at int64, pre uint64, id string) bool {
	if r.at != at {
		return r.at < at
	}
	if r.pre != pre {
		return r.pre < pre
	}
	return r.ev.ID < id
}

// maxFeedWindow is the widest feed window (ParseWindow's 90 d); prunePeriod
// is how far the horizon moves before the index is pruned again.
const (
	maxFeedWindow = 90 * 86400
	prunePeriod   = 3600
)

func newRecentIndex() recentIndex {
	return recentIndex{byAuthor: map[string]*stubList{}, byTopic: map[string]*stubList{}}
}

func feedKind(k int64) bool { return slices.Contains(FeedKinds, k) }

// apply folds e in or out; topics are its topicsOf.
func (x *recentIndex) apply(e *protocol.Event, topics []string, add bool) {
	if !feedKind(e.Kind) || add && e.CreatedAt < x.horizon {
		return
	}
	stub := newStub(e, topics)
	place(x.byAuthor, e.AgentID, stub, add)
	for _, t := range topics {
		place(x.byTopic, t, stub, add)
	}
}

// stub1 is a stub with one t tag, allocated at once.
type stub1 struct {
	ev   protocol.Event
	tags [1][]string
	tag  [2]string
}

// newStub is e's stub: its id, author, time, kind and a ["t", topic] tag
// per topic (no tags when none).
func newStub(e *protocol.Event, topics []string) *protocol.Event {
	if len(topics) == 1 {
		s := &stub1{ev: protocol.Event{ID: e.ID, AgentID: e.AgentID, CreatedAt: e.CreatedAt, Kind: e.Kind}, tag: [2]string{"t", topics[0]}}
		s.tags[0] = s.tag[:]
		s.ev.Tags = s.tags[:]
		return &s.ev
	}
	stub := &protocol.Event{ID: e.ID, AgentID: e.AgentID, CreatedAt: e.CreatedAt, Kind: e.Kind}
	for _, t := range topics {
		stub.Tags = append(stub.Tags, []string{"t", t})
	}
	return stub
}

// prune drops the stubs created before horizon (copying the lists kept,
// so the dropped ones' memory is freed).
func (x *recentIndex) prune(horizon int64) {
	x.horizon = horizon
	for _, m := range []map[string]*stubList{x.byAuthor, x.byTopic} {
		for k, l := range m {
			i := l.search(horizon, "")
			switch {
			case i == len(l.list):
				delete(m, k)
			case i > 0:
				l.list = slices.Clone(l.list[i:])
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

func place(m map[string]*stubList, key string, e *protocol.Event, add bool) {
	l := m[key]
	if l == nil {
		if !add {
			return
		}
		l = &stubList{}
		m[key] = l
	}
	i, pre := l.search(e.CreatedAt, e.ID), idPrefix(e.ID)
	found := i < len(l.list) && l.list[i].at == e.CreatedAt && l.list[i].pre == pre && l.list[i].ev.ID == e.ID
	switch {
	case add && !found:
		l.list = slices.Insert(l.list, i, stubRef{e.CreatedAt, pre, e})
	case !add && found:
		if l.list = slices.Delete(l.list, i, i+1); len(l.list) == 0 {
			delete(m, key)
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
	take := func(l *stubList) {
		if l == nil {
			return
		}
		lo, hi := l.search(since, ""), l.search(until+1, "")
		for _, r := range l.list[max(lo, hi-n):hi] {
			out = append(out, r.ev)
		}
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
