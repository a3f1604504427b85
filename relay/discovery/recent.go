package discovery

import (
	"slices"

	"github.com/anp2net/relay/protocol"
)

// recentIndex lists the feed's candidate events (FeedKinds) by author and
// by topic, each list oldest first by (created_at, id), as stubs: id,
// author, time, kind and t tags — what ranking needs (§18.7). The feed
// reads its candidates here instead of querying the log, and fetches the
// bodies of the items it returns only.
type recentIndex struct {
	byAuthor map[string][]*protocol.Event
	byTopic  map[string][]*protocol.Event
}

func newRecentIndex() recentIndex {
	return recentIndex{byAuthor: map[string][]*protocol.Event{}, byTopic: map[string][]*protocol.Event{}}
}

func feedKind(k int64) bool { return slices.Contains(FeedKinds, k) }

func (x recentIndex) apply(e *protocol.Event, add bool) {
	if !feedKind(e.Kind) {
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
// same events as a log query with those conditions and limit n.
func (f *Fold) Recent(authors, topics []string, since, until int64, n int) []*protocol.Event {
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
