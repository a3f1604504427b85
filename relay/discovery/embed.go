package discovery

import (
	"cmp"
	"encoding/json"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/anp2net/relay/protocol"
)

// The neighbour embedding (§12.3), published as a schema by GET /neighbors:
// EmbeddingSchema names it. A post's text is its content, or for JSON
// content the string fields claim, text, content, about, title and summary;
// it is lowercased and split on every rune that is not a letter or digit.
// Tokens of 2 to 40 bytes that are not stop words give the features
// "w|<token>" for each token, "b|<token> <next token>" for each bigram, and
// "t|<topic>" for each t tag; each feature is hashed (FNV-1a 32) into
// EmbeddingDims buckets (at most MaxPostFeatures distinct per post). An
// agent's profile vector is, over its ProfilePosts most recent posts
// (kinds 1, 2, 5, by created_at then id), the summed count c of each
// bucket weighted round((1 + ln c) × 1024), L2-normalised (the norm kept as
// an integer sum of squares). No IDF: a vector depends on its own agent's
// events only, so publishing updates the buckets of one vector.
const (
	EmbeddingSchema = "anp2.embedding.hashed-bow.v1"
	EmbeddingDims   = 1 << 20
	ProfilePosts    = 50
	MaxPostFeatures = 256
)

// stopWordList is the embedding's stop words.
const stopWordList = "the and for are but not you all any can her was one our out has have had his how its may new now old see two who did get let put say she too use that this with from they will would there their what about which when make like time just know take into year your some could them than then look only come over also back after work first well even want because these give most is it in of to on at by an be as or if we so no do my me he up us am"

// stopWords is the set of stop words, each packed by packWord, in an
// open-addressing table (0: an empty slot): a token is looked up without
// hashing a string.
var stopWords [512]uint64

// maxStopWord is the length of the longest stop word (at most 8): longer
// tokens are not looked up.
var maxStopWord int

// packWord is the bytes of t (at most 8, none zero) as a number.
func packWord(t string) uint64 {
	var p uint64
	for i := 0; i < len(t); i++ {
		p = p<<8 | uint64(t[i])
	}
	return p
}

// stopSlot is the first slot of packed word p in stopWords.
func stopSlot(p uint64) int { return int(p * 0x9e3779b97f4a7c15 >> 55) }

// isStopWord reports whether the token t is a stop word.
func isStopWord(t string) bool {
	if len(t) > maxStopWord {
		return false
	}
	p := packWord(t)
	for i := stopSlot(p); stopWords[i] != 0; i = (i + 1) % len(stopWords) {
		if stopWords[i] == p {
			return true
		}
	}
	return false
}

func init() {
	for _, w := range strings.Fields(stopWordList) {
		maxStopWord = max(maxStopWord, len(w))
		p, i := packWord(w), 0
		for i = stopSlot(p); stopWords[i] != 0 && stopWords[i] != p; i = (i + 1) % len(stopWords) {
		}
		stopWords[i] = p
	}
}

type feature struct {
	dim uint32
	w   float32
}

type postRec struct {
	at     int64
	pre    uint64 // idPrefix(id): most comparisons do not read id
	id     string
	feats  []feature // counts in w
	topics []string
}

type agentVec struct {
	idx int32
	// posts is the agent's window, its newest ProfilePosts posts, oldest
	// first by (created_at, id); its older posts are in the store.
	posts  []postRec
	counts u32map // bucket counts over the newest ProfilePosts posts
	normSq uint64 // Σ weight² over counts
}

// window is a's profile posts: its newest ProfilePosts.
func (a *agentVec) window() []postRec { return a.posts[max(0, len(a.posts)-ProfilePosts):] }

// embeddings holds each agent's posts' features, its profile counts and an
// inverted index bucket → agent → weight for the neighbour query. Weights
// are integers, weight(c) = round((1 + ln c) × 1024), and the L2 norm is
// kept as an integer sum of squares, so a post changes only the buckets it
// (and the post leaving the window) touches, and a dot product is exact in
// any order.
type embeddings struct {
	agents   map[string]*agentVec
	scratch  featureSet  // features' work space (the writer's)
	names    []string    // idx → agent_id
	vecs     []*agentVec // idx → its vector (nil once the agent has no post)
	postings *postingIndex
	strs     interner // agent ids, copied out of their events
	// st holds the post records older than each agent's window.
	st *store
}

// postingIndex is the inverted index bucket → agent idx → its weight
// there, found through two levels of arrays (EmbeddingDims buckets in
// blocks of postingBlock), not a Go map: a post's rare buckets come and go
// with the posts in a window, and a map's deletions left tombstones to
// rehash. A bucket with one agent (most rare ones) holds it in its block
// entry; a table is allocated once two agents share the bucket.
type postingIndex struct {
	blocks [EmbeddingDims / postingBlock]*[postingBlock]postingEntry
	free   []*u32map // emptied tables to reuse (a post's rare buckets empty as often as they fill)
	// stale has a bit per bucket whose table is stale (see postingEntry),
	// read before the bucket's entry: 128 KiB that stay in cache, where
	// the entries are 16 MiB.
	stale [EmbeddingDims / 64]uint64
}

const (
	postingBlock   = 256
	maxFreeBuckets = 4096
)

// postingEntry is one bucket: its only agent in one (v == 0: none) while
// more is nil, else its table.
//
// A stale table holds the bucket's agents but not their current weights:
// the neighbour query reads no bucket of more than maxRareBucket agents,
// so a bucket that grows past staleBucket stops following its members'
// counts (a post's common words would otherwise rewrite a weight in a
// table of thousands, a cache miss each) and only records who joins and
// leaves; once it is back to maxRareBucket agents its weights are
// recomputed from their counts (refresh) and followed again.
type postingEntry struct {
	one  [1]u32slot
	more *u32map
}

// staleBucket is the size past which a bucket's table goes stale: twice
// the largest bucket the query reads, so a bucket hovering at that size
// is not recomputed at every post.
const staleBucket = 2 * maxRareBucket

// isStale reports whether dim's table is stale.
func (x *postingIndex) isStale(dim uint32) bool { return x.stale[dim/64]&(1<<(dim%64)) != 0 }

// setStale marks dim's table stale or not.
func (x *postingIndex) setStale(dim uint32, stale bool) {
	if stale {
		x.stale[dim/64] |= 1 << (dim % 64)
	} else {
		x.stale[dim/64] &^= 1 << (dim % 64)
	}
}

// members returns dim's agents (idx, weight) as table slots, the empty
// ones (v == 0) to skip, and how many agents there are.
func (x *postingIndex) members(dim uint32) ([]u32slot, int) {
	blk := x.blocks[dim/postingBlock]
	if blk == nil {
		return nil, 0
	}
	switch pe := &blk[dim%postingBlock]; {
	case pe.more != nil:
		return pe.more.slots, pe.more.n
	case pe.one[0].v != 0:
		return pe.one[:], 1
	}
	return nil, 0
}

// set sets agent who's weight in dim (0: who leaves it); stays says who
// was in dim before and still is. It reports whether dim's table must be
// refreshed: it just stopped being stale.
func (x *postingIndex) set(dim uint32, who int32, w uint32, stays bool) bool {
	if stays && x.isStale(dim) {
		return false // its members, not their weights
	}
	blk := x.blocks[dim/postingBlock]
	if blk == nil {
		if w == 0 {
			return false
		}
		blk = new([postingBlock]postingEntry)
		x.blocks[dim/postingBlock] = blk
	}
	pe, k := &blk[dim%postingBlock], uint32(who)
	if pe.more == nil {
		switch one := &pe.one[0]; {
		case one.v == 0 || one.k == k:
			*one = u32slot{k, w} // w == 0 empties it
			return false
		case w == 0:
			return false // who is not in it
		}
		// A second agent: the bucket gets a table.
		if n := len(x.free); n > 0 {
			pe.more, x.free = x.free[n-1], x.free[:n-1]
		} else {
			pe.more = &u32map{}
		}
		pe.more.set(pe.one[0].k, pe.one[0].v)
		pe.one[0] = u32slot{}
	}
	if pe.more.set(k, w); pe.more.n == 0 {
		if len(x.free) < maxFreeBuckets {
			x.free = append(x.free, pe.more)
		}
		pe.more = nil
		return false
	}
	switch stale := x.isStale(dim); {
	case stale && pe.more.n <= maxRareBucket:
		x.setStale(dim, false)
		return true
	case !stale && pe.more.n > staleBucket:
		x.setStale(dim, true)
	}
	return false
}

// refresh sets the weight of each of dim's agents (vecs by idx) from its
// count.
func (x *postingIndex) refresh(dim uint32, vecs []*agentVec) {
	t := x.blocks[dim/postingBlock][dim%postingBlock].more
	for i := range t.slots {
		if s := &t.slots[i]; s.v != 0 {
			s.v = uint32(weight(vecs[s.k].counts.get(dim)))
		}
	}
}

func newEmbeddings(strs interner) embeddings {
	return embeddings{agents: map[string]*agentVec{}, postings: new(postingIndex), strs: strs}
}

func weight(c uint32) uint64 {
	if c < uint32(len(weights)) {
		return weights[c]
	}
	return uint64(math.Round((1 + math.Log(float64(c))) * 1024))
}

// weights caches weight(c) for small counts.
var weights = func() (t [4096]uint64) {
	for c := 1; c < len(t); c++ {
		t[c] = uint64(math.Round((1 + math.Log(float64(c))) * 1024))
	}
	return t
}()

// apply folds a post (topics are its topicsOf) in or out of its author's
// vector. Posts are kept oldest first, so a new post is appended; entering
// the window and pushing its oldest post out of it are counted as one
// change per bucket (the buckets both posts share do not move).
func (m *embeddings) apply(e *protocol.Event, topics []string, add bool) {
	a := m.agents[e.AgentID]
	if a == nil {
		if !add {
			return
		}
		a = m.newAgent(e.AgentID)
	}
	// i is the first post after e in (created_at, id) order. Every post
	// in memory is in the window; the older ones are in the store.
	n, pre := len(a.posts), idPrefix(e.ID)
	i := n
	if n > 0 && postAfter(&a.posts[n-1], e.CreatedAt, pre, e.ID) {
		i = sort.Search(n, func(i int) bool { return postAfter(&a.posts[i], e.CreatedAt, pre, e.ID) })
	}
	exists := i > 0 && a.posts[i-1].pre == pre && a.posts[i-1].id == e.ID
	switch {
	case add && !exists:
		p := postRec{at: e.CreatedAt, pre: pre, id: cloneString(e.ID), feats: features(e, topics, &m.scratch), topics: topics}
		if n >= ProfilePosts && i == 0 {
			m.st.putPost(e.AgentID, &p) // older than the window
			return
		}
		a.posts = slices.Insert(a.posts, i, p)
		var out []feature
		if n >= ProfilePosts { // the oldest leaves the window for the store
			m.st.putPost(e.AgentID, &a.posts[0])
			out = a.posts[0].feats
			a.posts = slices.Delete(a.posts, 0, 1)
		}
		m.change(a, p.feats, out)
	case !add && exists:
		gone := a.posts[i-1]
		a.posts = slices.Delete(a.posts, i-1, i)
		var back []feature
		if n >= ProfilePosts {
			if p := m.st.popPost(e.AgentID, m.strs); p != nil { // back into the window
				a.posts = slices.Insert(a.posts, 0, *p)
				back = p.feats
			}
		}
		m.change(a, back, gone.feats)
		if len(a.posts) == 0 {
			delete(m.agents, e.AgentID) // its slot stays, with no postings
			m.vecs[a.idx] = nil
		}
	case !add && n >= ProfilePosts && i == 0:
		m.st.delPost(e.AgentID, e.CreatedAt, e.ID) // older than the window
	}
}

// newAgent adds agent's vector, empty.
func (m *embeddings) newAgent(agent string) *agentVec {
	agent = m.strs.of(agent)
	a := &agentVec{idx: int32(len(m.names))}
	m.names = append(m.names, agent)
	m.vecs = append(m.vecs, a)
	m.agents[agent] = a
	return a
}

// restore adds agent's posts (oldest first), as its saved state lists
// them, counting its window into its vector.
func (m *embeddings) restore(agent string, posts []postRec) {
	a := m.agents[agent]
	if a == nil {
		a = m.newAgent(agent)
	}
	a.posts = posts
	for _, p := range a.window() {
		m.change(a, p.feats, nil)
	}
}

// postAfter reports whether p comes after (at, id) in (created_at, id)
// order; pre is idPrefix(id).
func postAfter(p *postRec, at int64, pre uint64, id string) bool {
	if p.at != at {
		return p.at > at
	}
	if p.pre != pre {
		return p.pre > pre
	}
	return p.id > id
}

// change adds the features in (sorted by bucket) to a's counts and
// subtracts the features out, one bucket at a time.
func (m *embeddings) change(a *agentVec, in, out []feature) {
	for len(in) > 0 || len(out) > 0 {
		var dim uint32
		var delta int64
		switch {
		case len(out) == 0 || len(in) > 0 && in[0].dim < out[0].dim:
			dim, delta, in = in[0].dim, int64(in[0].w), in[1:]
		case len(in) == 0 || out[0].dim < in[0].dim:
			dim, delta, out = out[0].dim, -int64(out[0].w), out[1:]
		default:
			dim, delta = in[0].dim, int64(in[0].w)-int64(out[0].w)
			in, out = in[1:], out[1:]
		}
		if delta != 0 {
			m.count(a, dim, delta)
		}
	}
}

// count changes a's count of one bucket by delta, updating the norm and
// the index.
func (m *embeddings) count(a *agentVec, dim uint32, delta int64) {
	if a.counts.slots == nil {
		// A post brings about ten buckets and its agent's next posts more:
		// start at 64 slots rather than doubling from 2.
		a.counts.resize(64)
	}
	old, now := a.counts.add(dim, delta)
	wo, wn := weight(old), weight(now)
	a.normSq = a.normSq - wo*wo + wn*wn
	if m.postings.set(dim, a.idx, uint32(wn), old != 0 && now != 0) {
		m.postings.refresh(dim, m.vecs)
	}
}

// FNV-1a 32, the features' hash.
const (
	fnvOffset = 2166136261
	fnvPrime  = 16777619
)

func fnvAdd(h uint32, s string) uint32 {
	for i := 0; i < len(s); i++ {
		h ^= uint32(s[i])
		h *= fnvPrime
	}
	return h
}

// featureSet counts a post's features by bucket, at most MaxPostFeatures
// distinct buckets (a feature in a new bucket past them, or any feature
// once they are full, is not counted: the order features are added in is
// the schema's). A short list is searched in place; a long one through a
// map.
type featureSet struct {
	list []feature
	at   map[uint32]int
}

func (s *featureSet) add(h uint32) {
	if len(s.list) >= MaxPostFeatures {
		return
	}
	d := h % EmbeddingDims
	if s.at != nil {
		if i, ok := s.at[d]; ok {
			s.list[i].w++
			return
		}
		s.at[d] = len(s.list)
	} else {
		for i := range s.list {
			if s.list[i].dim == d {
				s.list[i].w++
				return
			}
		}
		if len(s.list) == 32 {
			s.at = make(map[uint32]int, 2*32)
			for i, f := range s.list {
				s.at[f.dim] = i
			}
			s.at[d] = len(s.list)
		}
	}
	s.list = append(s.list, feature{d, 1})
}

func (s *featureSet) full() bool { return len(s.list) >= MaxPostFeatures }

func (s *featureSet) word(t string) { s.add(fnvAdd(fnvAdd(fnvOffset, "w|"), t)) }

func (s *featureSet) bigram(t, next string) {
	s.add(fnvAdd(fnvAdd(fnvAdd(fnvAdd(fnvOffset, "b|"), t), " "), next))
}

// features returns the hashed feature counts of one post (see
// EmbeddingSchema), by bucket; topics are e's topicsOf, s a work space.
func features(e *protocol.Event, topics []string, s *featureSet) []feature {
	s.list, s.at = s.list[:0], nil
	text := postText(e)
	if isASCII(text) {
		// Lowercase ASCII letters and digits are the tokens' runes: the
		// tokens are slices of the lowercased text, hashed as they come.
		lower := strings.ToLower(text)
		prev := ""
		for i := 0; i < len(lower) && !s.full(); {
			for i < len(lower) && !asciiTokenByte(lower[i]) {
				i++
			}
			j := i
			for j < len(lower) && asciiTokenByte(lower[j]) {
				j++
			}
			if t := lower[i:j]; len(t) >= 2 && len(t) <= 40 && !isStopWord(t) {
				if prev != "" {
					s.bigram(prev, t)
				}
				s.word(t)
				prev = t
			}
			i = j
		}
	} else {
		toks := Tokens(text)
		for i, t := range toks {
			s.word(t)
			if i+1 < len(toks) {
				s.bigram(t, toks[i+1])
			}
		}
	}
	for _, t := range topics {
		s.add(fnvAdd(fnvAdd(fnvOffset, "t|"), strings.ToLower(t)))
	}
	out := slices.Clone(s.list)
	if len(out) > 32 {
		slices.SortFunc(out, func(a, b feature) int { return cmp.Compare(a.dim, b.dim) })
		return out
	}
	for i := 1; i < len(out); i++ { // a post's few features: an insertion sort
		for j := i; j > 0 && out[j].dim < out[j-1].dim; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

func asciiTokenByte(c byte) bool { return 'a' <= c && c <= 'z' || '0' <= c && c <= '9' }

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// Tokens splits text into the embedding's tokens.
func Tokens(text string) []string {
	var out []string
	for _, t := range strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	}) {
		if len(t) >= 2 && len(t) <= 40 && !isStopWord(t) {
			out = append(out, t)
		}
	}
	return out
}

// postText is a post's text: its content, or for JSON object content
// (or null) its string fields claim, text, content, about, title and
// summary joined by spaces.
func postText(e *protocol.Event) string {
	if !jsonObjectOrNull(e.Content) {
		return e.Content // json.Unmarshal into a map would fail
	}
	var obj map[string]any
	if json.Unmarshal([]byte(e.Content), &obj) != nil {
		return e.Content
	}
	var parts []string
	for _, k := range []string{"claim", "text", "content", "about", "title", "summary"} {
		if s, ok := obj[k].(string); ok {
			parts = append(parts, s)
		}
	}
	return strings.Join(parts, " ")
}

// jsonObjectOrNull reports whether s, past JSON whitespace, starts as an
// object or null: only those unmarshal into a map without an error.
func jsonObjectOrNull(s string) bool {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case ' ', '\t', '\n', '\r':
			continue
		case '{', 'n':
			return true
		}
		return false
	}
	return false
}

// Neighbor is one row of GET /neighbors.
type Neighbor struct {
	AgentID      string   `json:"agent_id"`
	Sim          float64  `json:"sim"`
	SampleTopics []string `json:"sample_topics"`
}

var partialPool = sync.Pool{New: func() any { return new([]uint64) }}

// Candidate selection of the neighbour query (SPEC §10.5).
const (
	// rareBucketShare: a bucket used by more than 1/rareBucketShare of the
	// agents (and more than minRareBucket) does not bring candidates.
	rareBucketShare = 100
	minRareBucket   = 64
	// maxRareBucket caps that threshold, so the candidate set a query
	// walks is bounded at any network size (at most 256 agents per bucket).
	maxRareBucket = 256
	// rescored is how many candidates per requested neighbour are scored
	// exactly.
	rescored = 4
)

// Neighbors returns the k agents whose profile vectors have the highest
// cosine similarity with agent's (sim > 0, rounded to 4 decimals; ties by
// agent_id), each with its three most used topics among its profile
// posts. Candidates are the agents sharing a rare bucket with agent (used
// by at most max(64, agents/100) agents), ranked by their dot product over
// rare buckets; the best 4·k are scored exactly over every bucket. Agents
// whose discoverability is not public are left out.
func (f *Fold) Neighbors(agent string, k int) []Neighbor {
	f.mu.RLock()
	defer f.mu.RUnlock()
	me := f.emb.agents[agent]
	if me == nil || me.normSq == 0 {
		// No post yet: the agent is represented by its profile (§12.6).
		me = f.profileVec(agent)
		if me == nil {
			return []Neighbor{}
		}
	}
	limit := min(maxRareBucket, max(minRareBucket, len(f.emb.agents)/rareBucketShare))
	type dimWeight struct {
		dim uint32
		w   uint64
	}
	mine := make([]dimWeight, 0, me.counts.len())
	// One partial dot product per slot, from a pool: at 100,000 agents a
	// fresh one is 800 KB of garbage per query; only touched slots are
	// non-zero and they are cleared before the buffer goes back.
	buf := partialPool.Get().(*[]uint64)
	if len(*buf) < len(f.emb.names) {
		*buf = make([]uint64, len(f.emb.names)+len(f.emb.names)/4)
	}
	partial := *buf
	var touched []int32
	defer func() {
		for _, who := range touched {
			partial[who] = 0
		}
		partialPool.Put(buf)
	}()
	for _, s := range me.counts.slots {
		if s.v == 0 {
			continue
		}
		w := weight(s.v)
		mine = append(mine, dimWeight{s.k, w})
		slots, n := f.emb.postings.members(s.k)
		if n > limit {
			continue
		}
		for _, p := range slots {
			who := int32(p.k)
			if p.v == 0 || who == me.idx {
				continue
			}
			if partial[who] == 0 {
				touched = append(touched, who)
			}
			partial[who] += w * uint64(p.v)
		}
	}
	better := func(a, b Neighbor) bool { return a.Sim > b.Sim || a.Sim == b.Sim && a.AgentID < b.AgentID }
	cands := topK(touched, rescored*k, func(who int32) Neighbor {
		// ranked by the partial cosine (the agent's own norm is common to all)
		// (slices by index: no string-keyed lookup per candidate)
		return Neighbor{AgentID: f.emb.names[who], Sim: float64(partial[who]) / math.Sqrt(float64(f.emb.vecs[who].normSq))}
	}, better, func(n Neighbor) bool { return len(f.disc) == 0 || f.discoverability(n.AgentID) == Public })
	scored := make([]int32, len(cands))
	for i, c := range cands {
		scored[i] = f.emb.agents[c.AgentID].idx
	}
	top := topK(scored, k, func(who int32) Neighbor {
		other := f.emb.vecs[who]
		var dot uint64
		for _, m := range mine {
			dot += m.w * weight(other.counts.get(m.dim))
		}
		sim := float64(dot) / math.Sqrt(float64(me.normSq)) / math.Sqrt(float64(other.normSq))
		return Neighbor{AgentID: f.emb.names[who], Sim: round4(min(sim, 1))}
	}, better, func(n Neighbor) bool { return n.Sim > 0 })
	for i := range top {
		top[i].SampleTopics = sampleTopics(f.emb.agents[top[i].AgentID].window(), 3)
	}
	return top
}

// profileVec is the vector of an agent with no post yet (§12.6): the
// features (as for a post) of its latest profile's text — the string
// fields about, description, bio, summary, title and text — with its
// declared capability names (latest kind 4, else the profile's
// capabilities) as words and its profile's t tags and topics or interests
// lists as topics. Its idx is -1 (no slot); nil when there is nothing.
func (f *Fold) profileVec(agent string) *agentVec {
	p := latest(f.profiles[agent])
	caps := f.ctx.capsOf[agent]
	if p == nil && len(caps) == 0 {
		return nil
	}
	var parts []string
	e := &protocol.Event{}
	if p != nil {
		var obj map[string]any
		json.Unmarshal([]byte(p.Content), &obj)
		for _, k := range []string{"about", "description", "bio", "summary", "title", "text"} {
			if s, ok := obj[k].(string); ok {
				parts = append(parts, s)
			}
		}
		for _, k := range []string{"topics", "interests"} {
			if l, ok := obj[k].([]any); ok {
				for _, t := range l {
					if s, ok := t.(string); ok && s != "" {
						e.Tags = append(e.Tags, []string{"t", s})
					}
				}
			}
		}
		for _, t := range topicsOf(p) {
			e.Tags = append(e.Tags, []string{"t", t})
		}
		if len(caps) == 0 {
			caps = protocol.CapabilityNames(p)
		}
	}
	parts = append(parts, caps...)
	e.Content = strings.Join(parts, " ")
	v := &agentVec{idx: -1}
	for _, ft := range features(e, topicsOf(e), &featureSet{}) {
		v.counts.set(ft.dim, uint32(ft.w))
		w := weight(uint32(ft.w))
		v.normSq += w * w
	}
	if v.normSq == 0 {
		return nil
	}
	return v
}

// topK returns the k best of the rows made from who that keep holds for,
// best first.
func topK(who []int32, k int, row func(int32) Neighbor, better func(a, b Neighbor) bool, keep func(Neighbor) bool) []Neighbor {
	top := make([]Neighbor, 0, k+1)
	for _, w := range who {
		n := row(w)
		if len(top) == k && !better(n, top[k-1]) || !keep(n) {
			continue
		}
		i := sort.Search(len(top), func(i int) bool { return better(n, top[i]) })
		top = slices.Insert(top, i, n)
		if len(top) > k {
			top = top[:k]
		}
	}
	return top
}

// sampleTopics is the n topics most used in window (a's profile posts).
func sampleTopics(window []postRec, n int) []string {
	count := map[string]int{}
	for _, p := range window {
		for _, t := range p.topics {
			count[t]++
		}
	}
	out := make([]string, 0, len(count))
	for t := range count {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool {
		return count[out[i]] > count[out[j]] || count[out[i]] == count[out[j]] && out[i] < out[j]
	})
	return out[:min(len(out), n)]
}

// SampleTopics returns agent's three most used topics among its profile
// posts.
func (f *Fold) SampleTopics(agent string) []string {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if a := f.emb.agents[agent]; a != nil {
		return sampleTopics(a.window(), 3)
	}
	return []string{}
}
