package reference

import (
	"encoding/json"
	"hash/fnv"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"unicode"

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

var stopWords = map[string]bool{}

func init() {
	for _, w := range strings.Fields("the and for are but not you all any can her was one our out has have had his how its may new now old see two who did get let put say she too use that this with from they will would there their what about which when make like time just know take into year your some could them than then look only come over also back after work first well even want because these give most is it in of to on at by an be as or if we so no do my me he up us am") {
		stopWords[w] = true
	}
}

type feature struct {
	dim uint32
	w   float32
}

type postRec struct {
	at     int64
	id     string
	feats  []feature // counts in w
	topics []string
}

type agentVec struct {
	idx    int32
	posts  []postRec         // newest first by (created_at, id)
	counts map[uint32]uint32 // bucket counts over the newest ProfilePosts posts
	normSq uint64            // Σ weight² over counts
}

// embeddings holds each agent's posts' features, its profile counts and an
// inverted index bucket → agent → weight for the neighbour query. Weights
// are integers, weight(c) = round((1 + ln c) × 1024), and the L2 norm is
// kept as an integer sum of squares, so a post changes only the buckets it
// (and the post leaving the window) touches, and a dot product is exact in
// any order.
type embeddings struct {
	agents   map[string]*agentVec
	names    []string    // idx → agent_id
	vecs     []*agentVec // idx → its vector (nil once the agent has no post)
	postings map[uint32]map[int32]uint32
}

func newEmbeddings() embeddings {
	return embeddings{agents: map[string]*agentVec{}, postings: map[uint32]map[int32]uint32{}}
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

func (m *embeddings) apply(e *protocol.Event, add bool) {
	a := m.agents[e.AgentID]
	if a == nil {
		if !add {
			return
		}
		a = &agentVec{idx: int32(len(m.names)), counts: map[uint32]uint32{}}
		m.names = append(m.names, e.AgentID)
		m.vecs = append(m.vecs, a)
		m.agents[e.AgentID] = a
	}
	i := sort.Search(len(a.posts), func(i int) bool {
		p := a.posts[i]
		return p.at < e.CreatedAt || p.at == e.CreatedAt && p.id <= e.ID
	})
	exists := i < len(a.posts) && a.posts[i].id == e.ID
	switch {
	case add && !exists:
		a.posts = slices.Insert(a.posts, i, postRec{at: e.CreatedAt, id: e.ID, feats: features(e), topics: topicsOf(e)})
		if i < ProfilePosts {
			m.count(a, a.posts[i].feats, 1)
			if len(a.posts) > ProfilePosts {
				m.count(a, a.posts[ProfilePosts].feats, -1) // pushed out of the window
			}
		}
	case !add && exists:
		gone := a.posts[i]
		a.posts = slices.Delete(a.posts, i, i+1)
		if i < ProfilePosts {
			m.count(a, gone.feats, -1)
			if len(a.posts) >= ProfilePosts {
				m.count(a, a.posts[ProfilePosts-1].feats, 1) // back into the window
			}
		}
		if len(a.posts) == 0 {
			delete(m.agents, e.AgentID) // its slot stays, with no postings
			m.vecs[a.idx] = nil
		}
	}
}

// count adds (sign 1) or subtracts (-1) one post's features from a's
// counts, updating the norm and the index for each bucket it changes.
func (m *embeddings) count(a *agentVec, feats []feature, sign int) {
	for _, f := range feats {
		old := a.counts[f.dim]
		now := uint32(int64(old) + int64(sign)*int64(f.w))
		wo, wn := weight(old), weight(now)
		a.normSq = a.normSq - wo*wo + wn*wn
		b := m.postings[f.dim]
		if now == 0 {
			delete(a.counts, f.dim)
			delete(b, a.idx)
			if len(b) == 0 {
				delete(m.postings, f.dim)
			}
			continue
		}
		a.counts[f.dim] = now
		if b == nil {
			b = map[int32]uint32{}
			m.postings[f.dim] = b
		}
		b[a.idx] = uint32(wn)
	}
}

// features returns the hashed feature counts of one post (see
// EmbeddingSchema), by bucket.
func features(e *protocol.Event) []feature {
	counts := map[uint32]float32{}
	add := func(s string) {
		if len(counts) >= MaxPostFeatures {
			return
		}
		h := fnv.New32a()
		h.Write([]byte(s))
		counts[h.Sum32()%EmbeddingDims]++
	}
	toks := Tokens(postText(e))
	for i, t := range toks {
		add("w|" + t)
		if i+1 < len(toks) {
			add("b|" + t + " " + toks[i+1])
		}
	}
	for _, t := range topicsOf(e) {
		add("t|" + strings.ToLower(t))
	}
	out := make([]feature, 0, len(counts))
	for d, c := range counts {
		out = append(out, feature{d, c})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].dim < out[j].dim })
	return out
}

// Tokens splits text into the embedding's tokens.
func Tokens(text string) []string {
	var out []string
	for _, t := range strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	}) {
		if len(t) >= 2 && len(t) <= 40 && !stopWords[t] {
			out = append(out, t)
		}
	}
	return out
}

func postText(e *protocol.Event) string {
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
	mine := make([]dimWeight, 0, len(me.counts))
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
	for dim, c := range me.counts {
		w := weight(c)
		mine = append(mine, dimWeight{dim, w})
		b := f.emb.postings[dim]
		if len(b) > limit {
			continue
		}
		for who, ow := range b {
			if who == me.idx {
				continue
			}
			if partial[who] == 0 {
				touched = append(touched, who)
			}
			partial[who] += w * uint64(ow)
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
			dot += m.w * weight(other.counts[m.dim])
		}
		sim := float64(dot) / math.Sqrt(float64(me.normSq)) / math.Sqrt(float64(other.normSq))
		return Neighbor{AgentID: f.emb.names[who], Sim: round4(min(sim, 1))}
	}, better, func(n Neighbor) bool { return n.Sim > 0 })
	for i := range top {
		top[i].SampleTopics = sampleTopics(f.emb.agents[top[i].AgentID].posts, 3)
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
	v := &agentVec{idx: -1, counts: map[uint32]uint32{}}
	for _, ft := range features(e) {
		v.counts[ft.dim] = uint32(ft.w)
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

func sampleTopics(posts []postRec, n int) []string {
	count := map[string]int{}
	for _, p := range posts[:min(len(posts), ProfilePosts)] {
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
		return sampleTopics(a.posts, 3)
	}
	return []string{}
}
