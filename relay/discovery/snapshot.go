package discovery

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"sync"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/state"
)

var _ state.Capturer = (*Fold)(nil)

// snapshotVersion names the Fold's saved form (SPEC §2.2): the store's
// token (store.go), the feed index's horizon, the events of the kinds the
// fold keeps whole (profiles, capabilities, beacons, subscriptions), the
// relays' announcement counts, every agent's post records (time, id,
// topics, features) and the feed index's stubs, in binary with short
// lowercase hex (ids, keys, signatures) as its bytes. The contexts and
// citations are the store's, committed at the capture under the token.
const snapshotVersion = "discovery.state/2"

// SnapshotVersion names the Fold's saved form.
func (f *Fold) SnapshotVersion() string { return snapshotVersion }

// Snapshot commits the store and writes the rest of the fold to w.
func (f *Fold) Snapshot(w io.Writer) error { return f.CaptureSnapshot()(w) }

// saved is what a capture copies of the in-memory indexes: the events
// kept whole, the relays, the post records (never changed once made: a
// slice of an agent's posts is copied, the records shared) and the stubs.
type saved struct {
	token   string
	horizon int64
	whole   []*protocol.Event
	relays  map[string]int
	posts   []agentPosts
	stubs   []stubAt
	err     error
}

type agentPosts struct {
	agent string
	posts []postRec
}

type stubAt struct {
	at int64
	s  *stub
}

var _ state.Preparer = (*Fold)(nil)

// PrepareSnapshot does before the composition's lock what the capture's
// commit would do under it: it ends bulk mode (its fsync and the switch
// to the write-ahead log) and commits the open transaction as the
// transaction's bound does (keeping the last save's token, its changes in
// the undo journal), so that the commit under the lock writes only what
// is folded in between. A failure is recorded like any store failure:
// the capture then saves no token.
func (f *Fold) PrepareSnapshot() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.st.failed.Load() != nil || f.st.closed() || f.st.empty() {
		return
	}
	f.st.fail(f.st.leaveBulk())
	if !f.st.closed() && f.st.pending > 0 {
		f.st.flush()
		f.st.fail(f.st.commitAs(f.st.committed))
	}
}

// CaptureSnapshot commits the store with a fresh token and copies the
// in-memory indexes; the function it returns encodes the copy, and may
// run while events are added and removed. A store that failed saves no
// token: the next start rebuilds the fold.
func (f *Fold) CaptureSnapshot() func(w io.Writer) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	sv := &saved{horizon: f.recent.horizon, relays: maps.Clone(f.relays)}
	if f.st.failed.Load() == nil && !f.st.closed() {
		token := newToken()
		if err := f.st.commit(token); err != nil {
			f.st.fail(err)
		} else {
			sv.token = token
		}
	}
	seen := map[*protocol.Event]bool{}
	keep := func(e *protocol.Event) {
		if !seen[e] {
			seen[e] = true
			sv.whole = append(sv.whole, e)
		}
	}
	for _, m := range []map[string][]*protocol.Event{f.profiles, f.caps} {
		for _, list := range m {
			for _, e := range list {
				keep(e)
			}
		}
	}
	for _, b := range f.beacons {
		keep(b.ev)
	}
	for _, pairs := range f.subs.byFollower {
		for _, list := range pairs {
			for _, e := range list {
				keep(e)
			}
		}
	}
	for agent, a := range f.emb.agents {
		sv.posts = append(sv.posts, agentPosts{agent, slices.Clone(a.posts)})
	}
	for _, l := range f.recent.byAuthor {
		l.each(func(r *stubRef) { sv.stubs = append(sv.stubs, stubAt{r.at, r.s}) })
	}
	return sv.encode
}

// encode writes sv, its lists sorted (so that a fold saves alike
// whatever its maps' order), to w.
func (sv *saved) encode(w io.Writer) error {
	slices.SortFunc(sv.whole, func(a, b *protocol.Event) int { return cmpEvents(a, b) })
	slices.SortFunc(sv.posts, func(a, b agentPosts) int { return cmp.Compare(a.agent, b.agent) })
	slices.SortFunc(sv.stubs, func(a, b stubAt) int {
		return cmp.Or(cmp.Compare(a.at, b.at), bytes.Compare(a.s.id[:], b.s.id[:]))
	})
	relays := slices.Sorted(maps.Keys(sv.relays))
	b := appendText(nil, sv.token)
	b = binary.AppendVarint(b, sv.horizon)
	b = binary.AppendUvarint(b, uint64(len(sv.whole)))
	for _, e := range sv.whole {
		b = appendEvent(b, e)
	}
	b = binary.AppendUvarint(b, uint64(len(relays)))
	for _, r := range relays {
		b = appendText(b, r)
		b = binary.AppendUvarint(b, uint64(sv.relays[r]))
	}
	flush := func() error {
		if len(b) < 1<<20 {
			return nil
		}
		_, err := w.Write(b)
		b = b[:0]
		return err
	}
	b = binary.AppendUvarint(b, uint64(len(sv.posts)))
	for _, a := range sv.posts {
		b = appendText(b, a.agent)
		b = binary.AppendUvarint(b, uint64(len(a.posts)))
		for _, p := range a.posts {
			b = binary.AppendVarint(b, p.at)
			b = appendText(b, p.id)
			b = appendTexts(b, p.topics)
			b = binary.AppendUvarint(b, uint64(len(p.feats)))
			for _, ft := range p.feats {
				b = binary.AppendUvarint(b, uint64(ft.dim))
				b = binary.AppendUvarint(b, uint64(ft.w))
			}
			if err := flush(); err != nil {
				return err
			}
		}
	}
	b = binary.AppendUvarint(b, uint64(len(sv.stubs)))
	for _, st := range sv.stubs {
		b = binary.AppendVarint(b, st.at)
		b = append(b, st.s.id[:]...)
		b = appendText(b, st.s.agent)
		b = binary.AppendVarint(b, st.s.kind)
		b = appendTexts(b, st.s.topics)
		if err := flush(); err != nil {
			return err
		}
	}
	_, err := w.Write(b)
	return err
}

// appendEvent appends e whole: kind, created_at, id, agent_id, sig,
// content and tags.
func appendEvent(b []byte, e *protocol.Event) []byte {
	b = binary.AppendVarint(b, e.Kind)
	b = binary.AppendVarint(b, e.CreatedAt)
	b = appendText(b, e.ID)
	b = appendText(b, e.AgentID)
	b = appendText(b, e.Sig)
	b = appendText(b, e.Content)
	b = binary.AppendUvarint(b, uint64(len(e.Tags)))
	for _, t := range e.Tags {
		b = appendTexts(b, t)
	}
	return b
}

// appendTexts appends a count and each text.
func appendTexts(b []byte, list []string) []byte {
	b = binary.AppendUvarint(b, uint64(len(list)))
	for _, s := range list {
		b = appendText(b, s)
	}
	return b
}

// appendText appends s: a uvarint 2n+1 and n bytes for lowercase hex of
// even length n×2 up to 128 (ids, keys, signatures: their bytes), else
// 2×len(s) and s.
func appendText(b []byte, s string) []byte {
	if len(s) > 0 && len(s) <= 128 && len(s)%2 == 0 && isLowerHex(s) {
		b = binary.AppendUvarint(b, uint64(len(s)/2)<<1|1)
		n := len(b)
		b = append(b, make([]byte, len(s)/2)...)
		hex.Decode(b[n:], []byte(s))
		return b
	}
	b = binary.AppendUvarint(b, uint64(len(s))<<1)
	return append(b, s...)
}

func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

var errSaved = errors.New("discovery: damaged saved form")

// savedReader reads what Snapshot wrote, failing on anything it could not
// have written.
type savedReader struct {
	b   []byte
	err error
	// intern shares the strings that recur (agents, tag names, topics).
	intern map[string]string
}

func (r *savedReader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = errSaved
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *savedReader) varint() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.err = errSaved
		return 0
	}
	r.b = r.b[n:]
	return v
}

// count reads a number of items, each at least one byte long.
func (r *savedReader) count() int {
	n := r.uvarint()
	if n > uint64(len(r.b)) {
		r.err = errSaved
		return 0
	}
	return int(n)
}

// text reads one appendText; interned ones are shared.
func (r *savedReader) text(interned bool) string {
	h := r.uvarint()
	n := h >> 1
	if r.err != nil || n > uint64(len(r.b)) {
		r.err = errSaved
		return ""
	}
	raw := r.b[:n]
	r.b = r.b[n:]
	if interned && h&1 == 0 {
		if s, ok := r.intern[string(raw)]; ok {
			return s
		}
	}
	var s string
	if h&1 == 1 {
		s = hex.EncodeToString(raw)
		if v, ok := r.intern[s]; interned && ok {
			return v
		}
	} else {
		s = string(raw)
	}
	if interned {
		r.intern[s] = s
	}
	return s
}

// texts reads one appendTexts (interned).
func (r *savedReader) texts() []string {
	n := r.count()
	if n == 0 {
		return nil
	}
	out := make([]string, n)
	for i := range out {
		out[i] = r.text(true)
	}
	return out
}

// event reads one appendEvent, checked for the shape every stored event
// has.
func (r *savedReader) event() *protocol.Event {
	e := &protocol.Event{Kind: r.varint(), CreatedAt: r.varint(), ID: r.text(false), AgentID: r.text(true), Sig: r.text(false),
		Content: r.text(false)}
	if nt := r.count(); nt > 0 {
		e.Tags = make([][]string, nt)
		for i := range e.Tags {
			e.Tags[i] = r.texts()
			if e.Tags[i] == nil {
				e.Tags[i] = []string{}
			}
		}
	}
	if r.err == nil && !validSaved(e.ID, e.AgentID, e.CreatedAt, e.Kind) {
		r.err = fmt.Errorf("%w: event %s", errSaved, e.ID)
	}
	return e
}

func validSaved(id, agent string, at, kind int64) bool {
	return protocol.IsHex64(id) && protocol.IsHex64(agent) && at >= 0 && at <= protocol.MaxSafeInteger &&
		kind >= 0 && kind <= protocol.MaxSafeInteger
}

// Restore replaces the state of f, which has seen no event, with what
// Snapshot wrote: the store is adopted when its committed token is the
// saved one (else it is emptied and Restore fails: the relay then folds
// the log into the fold), and the in-memory indexes are rebuilt from the
// saved records, with no event to parse and no read of the log. On an
// error f reads as empty.
func (f *Fold) Restore(rd io.Reader, _ func(id string) *protocol.Event) error {
	data, err := io.ReadAll(rd)
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	g := newFold(f.st)
	r := &savedReader{b: data, intern: map[string]string(g.strs)}
	token := r.text(false)
	g.recent.horizon = r.varint()
	var windows []agentPosts
	var stubs []stubAt
	for range r.count() {
		if e := r.event(); r.err == nil {
			if e.Kind != protocol.KindProfile && e.Kind != protocol.KindCapability && e.Kind != protocol.KindBeacon &&
				e.Kind != protocol.KindSubscribe {
				r.err = fmt.Errorf("%w: kind %d kept whole", errSaved, e.Kind)
				break
			}
			g.applyKind(e, true)
		}
	}
	for range r.count() {
		agent := r.text(true)
		if n := r.uvarint(); r.err == nil && n > 0 && protocol.IsHex64(agent) {
			g.relays[agent] = int(n)
		} else if r.err == nil {
			r.err = errSaved
		}
	}
	for range r.count() {
		if r.err != nil {
			break
		}
		agent := r.text(true)
		posts := make([]postRec, r.count())
		for i := range posts {
			p := postRec{at: r.varint(), id: r.text(false), topics: r.texts(), feats: make([]feature, r.count())}
			for j := range p.feats {
				p.feats[j] = feature{uint32(r.uvarint()), float32(r.uvarint())}
			}
			p.pre = idPrefix(p.id)
			if r.err == nil && (!validSaved(p.id, agent, p.at, 0) || !sortedFeatures(p.feats) ||
				i > 0 && !postAfter(&p, posts[i-1].at, posts[i-1].pre, posts[i-1].id)) {
				r.err = fmt.Errorf("%w: post %s", errSaved, p.id)
			}
			posts[i] = p
		}
		if r.err == nil && len(posts) > 0 {
			windows = append(windows, agentPosts{agent, posts})
		}
	}
	for range r.count() {
		at := r.varint()
		s := &stub{}
		if len(r.b) < 32 {
			r.err = errSaved
			break
		}
		copy(s.id[:], r.b)
		r.b = r.b[32:]
		s.agent, s.kind, s.topics = r.text(true), r.varint(), r.texts()
		if r.err == nil && (!validSaved(hex.EncodeToString(s.id[:]), s.agent, at, s.kind) || !feedKind(s.kind)) {
			r.err = fmt.Errorf("%w: stub", errSaved)
		}
		if r.err != nil {
			break
		}
		stubs = append(stubs, stubAt{at, s})
	}
	if r.err == nil && len(r.b) != 0 {
		r.err = errSaved
	}
	if r.err != nil {
		return r.err
	}
	if err := f.st.adopt(token); err != nil {
		return err
	}
	// The neighbour vectors and the feed index share nothing but strings
	// interned already (read only now): built side by side.
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for _, w := range windows {
			g.emb.restore(w.agent, w.posts)
		}
	}()
	for _, st := range stubs {
		g.recent.put(st.s, st.at, true)
	}
	wg.Wait()
	f.beacons, f.subs, f.ctx, f.emb = g.beacons, g.subs, g.ctx, g.emb
	f.profiles, f.disc, f.caps, f.relays, f.recent, f.strs = g.profiles, g.disc, g.caps, g.relays, g.recent, g.strs
	f.invite.Store(g.invite.Load())
	return nil
}

// sortedFeatures reports whether a post's features are by bucket, each
// in range and counted.
func sortedFeatures(fs []feature) bool {
	for i, ft := range fs {
		if ft.dim >= EmbeddingDims || ft.w < 1 || i > 0 && fs[i-1].dim >= ft.dim {
			return false
		}
	}
	return true
}
