package discovery

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"encoding/hex"
	"slices"
	"sort"
	"unsafe"

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
	strs     interner
}

// stub is a feed event as the index keeps it: its id's bytes, its
// author, kind and topics (interned strings, copied out of the parsed
// event, so that the index keeps no event body alive). Its body is read
// from the log when a feed returns it.
type stub struct {
	id     [32]byte
	agent  string
	kind   int64
	topics []string
}

// event is s's stub event: id, agent_id, created_at, kind and a ["t",
// topic] tag per topic.
func (s *stub) event(at int64) *protocol.Event {
	if len(s.topics) > 1 {
		e := &protocol.Event{ID: hex.EncodeToString(s.id[:]), AgentID: s.agent, CreatedAt: at, Kind: s.kind}
		for _, t := range s.topics {
			e.Tags = append(e.Tags, []string{"t", t})
		}
		return e
	}
	// One allocation for the event, its id and its one tag (the common
	// case): a feed reads hundreds of stubs per request.
	x := &stubEvent{ev: protocol.Event{AgentID: s.agent, CreatedAt: at, Kind: s.kind}}
	hex.Encode(x.hex[:], s.id[:])
	x.ev.ID = unsafe.String(&x.hex[0], len(x.hex))
	if len(s.topics) == 1 {
		x.tag = [2]string{"t", s.topics[0]}
		x.tags[0] = x.tag[:]
		x.ev.Tags = x.tags[:]
	}
	return &x.ev
}

// stubEvent is a stub event with its id's text and one tag in one
// allocation (the id's bytes are never changed once made).
type stubEvent struct {
	ev   protocol.Event
	hex  [64]byte
	tags [1][]string
	tag  [2]string
}

// interner shares the strings that recur in the fold's in-memory indexes
// (agents, topics), each copied once out of the event it came from.
type interner map[string]string

func (in interner) of(s string) string {
	if v, ok := in[s]; ok {
		return v
	}
	s = cloneString(s)
	in[s] = s
	return s
}

// all interns every string of list in place.
func (in interner) all(list []string) []string {
	for i, s := range list {
		list[i] = in.of(s)
	}
	return list
}

// idKey is a 64-hex id's bytes ("" and anything else: zero, before every
// id).
func idKey(id string) (k [32]byte) {
	if len(id) == 64 {
		hex.Decode(k[:], []byte(id))
	}
	return k
}

// keyPrefix is k's first 8 bytes as a big-endian number: keys in that
// order are in id order.
func keyPrefix(k *[32]byte) uint64 { return binary.BigEndian.Uint64(k[:8]) }

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
	pre uint64 // keyPrefix(&s.id)
	s   *stub
}

// stubPos is a place in a stubList: offset i of chunk c (i may be the
// chunk's length: the place before the next chunk's first stub).
type stubPos struct{ c, i int }

// idPrefix is id's first 8 bytes (characters) as a big-endian number
// (zero-padded): ids in that order are in string order.
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
func (l *stubList) search(at int64, id *[32]byte) stubPos {
	pre := keyPrefix(id)
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
func (l *stubList) firstAfter(c int, at int64, pre uint64, id *[32]byte) bool {
	switch k := l.firsts[c]; {
	case k.at != at:
		return k.at > at
	case k.pre != pre:
		return k.pre > pre
	}
	return string(l.chunks[c].list[0].s.id[:]) > string(id[:])
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
func (l *stubList) newest(lo, hi stubPos, n int, out []stubRef) []stubRef {
	for c, i := hi.c, hi.i; n > 0 && c >= lo.c && c < len(l.chunks); {
		from := 0
		if c == lo.c {
			from = lo.i
		}
		if i > from {
			out = append(out, l.chunks[c].list[max(from, i-n):i]...)
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
func (r *stubRef) before(at int64, pre uint64, id *[32]byte) bool {
	if r.at != at {
		return r.at < at
	}
	if r.pre != pre {
		return r.pre < pre
	}
	return string(r.s.id[:]) < string(id[:])
}

// maxFeedWindow is the widest feed window (ParseWindow's 90 d); prunePeriod
// is how far the horizon moves before the index is pruned again.
const (
	maxFeedWindow = 90 * 86400
	prunePeriod   = 3600
)

func newRecentIndex(strs interner) recentIndex {
	return recentIndex{byAuthor: map[string]*stubList{}, byTopic: map[string]*stubList{}, strs: strs}
}

func feedKind(k int64) bool { return slices.Contains(FeedKinds, k) }

// apply folds e in or out; topics are its topicsOf.
func (x *recentIndex) apply(e *protocol.Event, topics []string, add bool) {
	if !feedKind(e.Kind) || add && e.CreatedAt < x.horizon {
		return
	}
	x.put(&stub{id: idKey(e.ID), agent: e.AgentID, kind: e.Kind, topics: topics}, e.CreatedAt, add)
}

// put adds or removes s, created at at, interning its strings when added.
func (x *recentIndex) put(s *stub, at int64, add bool) {
	if add {
		s.agent, s.topics = x.strs.of(s.agent), x.strs.all(slices.Clone(s.topics))
	}
	place(x.byAuthor, s.agent, s, at, add)
	for _, t := range s.topics {
		place(x.byTopic, t, s, at, add)
	}
}

// prune drops the stubs created before horizon (copying the lists kept,
// so the dropped ones' memory is freed).
func (x *recentIndex) prune(horizon int64) {
	x.horizon = horizon
	for _, m := range []map[string]*stubList{x.byAuthor, x.byTopic} {
		for k, l := range m {
			if p := l.search(horizon, &[32]byte{}); p != (stubPos{}) {
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

func place(m map[string]*stubList, key string, s *stub, at int64, add bool) {
	l := m[key]
	if l == nil {
		if !add {
			return
		}
		l = &stubList{}
		m[key] = l
	}
	p, pre := l.search(at, &s.id), keyPrefix(&s.id)
	r := l.get(p)
	found := r != nil && r.at == at && r.pre == pre && r.s.id == s.id
	switch {
	case add && !found:
		l.insert(p, stubRef{at, pre, s})
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
	var refs []stubRef
	take := func(l *stubList) {
		if l == nil {
			return
		}
		refs = l.newest(l.search(since, &[32]byte{}), l.search(until+1, &[32]byte{}), n, refs)
	}
	for _, a := range authors {
		take(f.recent.byAuthor[a])
	}
	for _, t := range topics {
		take(f.recent.byTopic[t])
	}
	slices.SortFunc(refs, func(a, b stubRef) int {
		return cmp.Or(cmp.Compare(b.at, a.at), bytes.Compare(b.s.id[:], a.s.id[:]))
	})
	refs = slices.CompactFunc(refs, func(a, b stubRef) bool { return a.s.id == b.s.id })
	if len(refs) == 0 {
		return nil // as before the stubs were compact: no candidate is nil, not an empty list
	}
	out := make([]*protocol.Event, 0, min(len(refs), n))
	for _, r := range refs[:min(len(refs), n)] {
		out = append(out, r.s.event(r.at))
	}
	return out
}
