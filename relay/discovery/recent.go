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

// stubList is one author's or topic's stubs, oldest first, in chunks of
// at most chunkStubs (a busy topic's stubs of one second arrive in random
// id order: inserting moves the rest of one chunk, not of the list); each
// stub has its created_at and its id's first 8 bytes beside it, so a
// search reads a stub only on a tie of both (events of one busy second tie
// on created_at).
type stubList struct {
	chunks []*stubChunk // in order, none empty
	firsts []stubKey    // each chunk's first stub's key, searched without reading the chunks
	n      int
}

// stubKey is a stub's created_at and idPrefix.
type stubKey struct {
	at  int64
	pre uint64
}

type stubChunk struct{ list []stubRef }

// chunkStubs is the most stubs a chunk holds: a full chunk splits in two.
const chunkStubs = 128

type stubRef struct {
	at  int64
	pre uint64 // idPrefix(ev.ID)
	ev  *protocol.Event
}

// stubPos is a place in a stubList: offset i of chunk c (i may be the
// chunk's length: the place before the next chunk's first stub).
type stubPos struct{ c, i int }

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

// search is the place of the first stub at or after (at, id), in the
// last chunk whose first stub is not after (at, id) (the first chunk
// when there is none).
func (l *stubList) search(at int64, id string) stubPos {
	pre := idPrefix(id)
	// A new stub is most often the newest, or near the end: the last
	// chunk is tried before the binary search.
	c := len(l.chunks) - 1
	if c > 0 && l.firstAfter(c, at, pre, id) {
		c = sort.Search(c, func(k int) bool { return l.firstAfter(k, at, pre, id) }) - 1
	}
	c = max(c, 0)
	if len(l.chunks) == 0 {
		return stubPos{}
	}
	list := l.chunks[c].list
	n := len(list)
	if n > 0 && list[n-1].before(at, pre, id) {
		return stubPos{c, n}
	}
	return stubPos{c, sort.Search(n, func(i int) bool { return !list[i].before(at, pre, id) })}
}

// firstAfter reports whether chunk c's first stub comes after (at, id);
// pre is idPrefix(id).
func (l *stubList) firstAfter(c int, at int64, pre uint64, id string) bool {
	switch k := l.firsts[c]; {
	case k.at != at:
		return k.at > at
	case k.pre != pre:
		return k.pre > pre
	}
	return l.chunks[c].list[0].ev.ID > id
}

// key is r's key.
func (r *stubRef) key() stubKey { return stubKey{r.at, r.pre} }

// get returns the stub at p, or nil past the end.
func (l *stubList) get(p stubPos) *stubRef {
	if p.c < len(l.chunks) && p.i == len(l.chunks[p.c].list) {
		p = stubPos{p.c + 1, 0}
	}
	if p.c >= len(l.chunks) {
		return nil
	}
	return &l.chunks[p.c].list[p.i]
}

// insert puts r at p (a place search returned).
func (l *stubList) insert(p stubPos, r stubRef) {
	l.n++
	if len(l.chunks) == 0 {
		l.chunks = []*stubChunk{{list: append(make([]stubRef, 0, 8), r)}}
		l.firsts = []stubKey{r.key()}
		return
	}
	ch := l.chunks[p.c]
	if len(ch.list) >= chunkStubs {
		if p.c == len(l.chunks)-1 && p.i == len(ch.list) {
			// After the last stub: a new chunk, so that stubs arriving in
			// order pack the chunks full.
			l.chunks = append(l.chunks, &stubChunk{list: append(make([]stubRef, 0, chunkStubs), r)})
			l.firsts = append(l.firsts, r.key())
			return
		}
		half := len(ch.list) / 2
		right := &stubChunk{list: make([]stubRef, len(ch.list)-half, chunkStubs)}
		copy(right.list, ch.list[half:])
		clear(ch.list[half:])
		ch.list = ch.list[:half]
		l.chunks = slices.Insert(l.chunks, p.c+1, right)
		l.firsts = slices.Insert(l.firsts, p.c+1, right.list[0].key())
		if p.i > half {
			p.c, ch, p.i = p.c+1, right, p.i-half
		}
	}
	ch.list = slices.Insert(ch.list, p.i, r)
	if p.i == 0 {
		l.firsts[p.c] = r.key()
	}
}

// delete removes the stub at p (one get found).
func (l *stubList) delete(p stubPos) {
	if p.i == len(l.chunks[p.c].list) {
		p = stubPos{p.c + 1, 0}
	}
	l.n--
	ch := l.chunks[p.c]
	switch ch.list = slices.Delete(ch.list, p.i, p.i+1); {
	case len(ch.list) == 0:
		l.chunks = slices.Delete(l.chunks, p.c, p.c+1)
		l.firsts = slices.Delete(l.firsts, p.c, p.c+1)
	case p.i == 0:
		l.firsts[p.c] = ch.list[0].key()
	}
}

// dropBefore drops the stubs before p, copying the chunk cut so the
// dropped stubs' memory is freed.
func (l *stubList) dropBefore(p stubPos) {
	for _, ch := range l.chunks[:p.c] {
		l.n -= len(ch.list)
	}
	l.chunks = slices.Delete(l.chunks, 0, p.c)
	l.firsts = slices.Delete(l.firsts, 0, p.c)
	if len(l.chunks) == 0 {
		return
	}
	ch := l.chunks[0]
	l.n -= p.i
	if ch.list = slices.Clone(ch.list[p.i:]); len(ch.list) == 0 {
		l.chunks = slices.Delete(l.chunks, 0, 1)
		l.firsts = slices.Delete(l.firsts, 0, 1)
	} else {
		l.firsts[0] = ch.list[0].key()
	}
}

// newest appends to out the last (at most) n stubs' events of [lo, hi).
func (l *stubList) newest(lo, hi stubPos, n int, out []*protocol.Event) []*protocol.Event {
	for c, i := hi.c, hi.i; n > 0 && c >= lo.c && c < len(l.chunks); {
		from := 0
		if c == lo.c {
			from = lo.i
		}
		if i > from {
			for _, r := range l.chunks[c].list[max(from, i-n):i] {
				out = append(out, r.ev)
			}
			n -= i - max(from, i-n)
		}
		if c--; c >= 0 {
			i = len(l.chunks[c].list)
		}
	}
	return out
}

// each calls f with every stub in order.
func (l *stubList) each(f func(*stubRef)) {
	for _, ch := range l.chunks {
		for i := range ch.list {
			f(&ch.list[i])
		}
	}
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

// after reports whether r comes after (at, id); pre is idPrefix(id).
func (r *stubRef) after(at int64, pre uint64, id string) bool {
	if r.at != at {
		return r.at > at
	}
	if r.pre != pre {
		return r.pre > pre
	}
	return r.ev.ID > id
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
			if p := l.search(horizon, ""); p != (stubPos{}) {
				if l.dropBefore(p); l.n == 0 {
					delete(m, k)
				}
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
	p, pre := l.search(e.CreatedAt, e.ID), idPrefix(e.ID)
	r := l.get(p)
	found := r != nil && r.at == e.CreatedAt && r.pre == pre && r.ev.ID == e.ID
	switch {
	case add && !found:
		l.insert(p, stubRef{e.CreatedAt, pre, e})
	case !add && found:
		if l.delete(p); l.n == 0 {
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
		out = l.newest(l.search(since, ""), l.search(until+1, ""), n, out)
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
