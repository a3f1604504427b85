package discovery

import (
	"encoding/json"
	"hash/fnv"
	"math"
	"slices"
	"sort"
	"strings"
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
// bucket weighted 1 + ln(c), L2-normalised. No IDF: a vector depends on
// its own agent's events only, so publishing updates one vector.
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
	idx   int32
	posts []postRec // newest first by (created_at, id)
	vec   []feature // the profile vector, by dim
}

// posting is one agent's weight in one bucket, valid while ver is the
// agent's current vector version (older entries are skipped, then dropped
// when a list is compacted).
type posting struct {
	who int32
	ver uint32
	w   uint16
}

// embeddings holds each agent's posts' features, its profile vector and an
// inverted index bucket → postings for the neighbour query. Weights in the
// index are fixed-point (w × 65535), so a dot product is an exact integer
// sum whatever order the postings are in.
type embeddings struct {
	agents   map[string]*agentVec
	names    []string // idx → agent_id
	vers     []uint32 // idx → current vector version
	postings map[uint32]*bucket
}

// bucket is one dimension's postings and how many of them are superseded.
type bucket struct {
	list  []posting
	stale int
	live  int // agents whose current vector uses the bucket
}

func newEmbeddings() embeddings {
	return embeddings{agents: map[string]*agentVec{}, postings: map[uint32]*bucket{}}
}

func (m *embeddings) apply(e *protocol.Event, add bool) {
	a := m.agents[e.AgentID]
	if a == nil {
		if !add {
			return
		}
		a = &agentVec{idx: int32(len(m.names))}
		m.names = append(m.names, e.AgentID)
		m.vers = append(m.vers, 0)
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
	case !add && exists:
		a.posts = slices.Delete(a.posts, i, i+1)
	default:
		return
	}
	if i >= ProfilePosts {
		return // outside the profile window: the vector is unchanged
	}
	m.setVector(a, profileVector(a.posts))
	if len(a.posts) == 0 {
		delete(m.agents, e.AgentID) // its slot stays, with no live postings
	}
}

// setVector replaces a's vector: its old postings become stale and are
// dropped from a bucket once they are half of it.
func (m *embeddings) setVector(a *agentVec, vec []feature) {
	for _, f := range a.vec {
		b := m.postings[f.dim]
		b.live--
		if b.stale++; b.stale*2 >= len(b.list) {
			m.compact(f.dim, b, a.idx)
		}
	}
	a.vec = vec
	m.vers[a.idx]++
	for _, f := range vec {
		b := m.postings[f.dim]
		if b == nil {
			b = &bucket{}
			m.postings[f.dim] = b
		}
		b.list = append(b.list, posting{who: a.idx, ver: m.vers[a.idx], w: quantize(f.w)})
		b.live++
	}
}

// compact drops the stale entries of one bucket (and those of skip, whose
// version is about to change).
func (m *embeddings) compact(dim uint32, b *bucket, skip int32) {
	list := b.list[:0]
	for _, p := range b.list {
		if p.who != skip && p.ver == m.vers[p.who] {
			list = append(list, p)
		}
	}
	if len(list) == 0 {
		delete(m.postings, dim)
		return
	}
	b.list, b.stale = slices.Clip(list), 0
}

func quantize(w float32) uint16 { return uint16(math.Round(float64(min(max(w, 0), 1)) * 65535)) }

// profileVector is the L2-normalised 1 + ln(count) vector of the newest
// ProfilePosts posts.
func profileVector(posts []postRec) []feature {
	counts := map[uint32]float64{}
	for _, p := range posts[:min(len(posts), ProfilePosts)] {
		for _, f := range p.feats {
			counts[f.dim] += float64(f.w)
		}
	}
	vec := make([]feature, 0, len(counts))
	for d := range counts {
		vec = append(vec, feature{dim: d})
	}
	sort.Slice(vec, func(i, j int) bool { return vec[i].dim < vec[j].dim })
	norm := 0.0
	for _, f := range vec {
		w := 1 + math.Log(counts[f.dim])
		norm += w * w
	}
	norm = math.Sqrt(norm)
	for i := range vec {
		vec[i].w = float32((1 + math.Log(counts[vec[i].dim])) / norm)
	}
	return vec
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

// Candidate selection of the neighbour query (SPEC §10.5).
const (
	// rareBucketShare: a bucket used by more than 1/rareBucketShare of the
	// agents (and more than minRareBucket) does not bring candidates.
	rareBucketShare = 100
	minRareBucket   = 64
	// rescored is how many candidates per requested neighbour are scored
	// exactly.
	rescored = 10
)

// Neighbors returns the k agents whose profile vectors have the highest
// cosine similarity with agent's (sim > 0, rounded to 4 decimals; ties by
// agent_id), each with its three most used topics among its profile
// posts. Candidates are the agents sharing a rare bucket with agent (used
// by at most max(64, agents/100) agents), ranked by their dot product over
// rare buckets; the best 10·k are scored exactly over every bucket. Agents
// whose discoverability is not public are left out.
func (f *Fold) Neighbors(agent string, k int) []Neighbor {
	f.mu.RLock()
	defer f.mu.RUnlock()
	me := f.emb.agents[agent]
	if me == nil {
		return []Neighbor{}
	}
	limit := max(minRareBucket, len(f.emb.agents)/rareBucketShare)
	partial := make([]uint64, len(f.emb.names))
	var touched []int32
	for _, q := range me.vec {
		b := f.emb.postings[q.dim]
		if b == nil || b.live > limit {
			continue
		}
		qw := uint64(quantize(q.w))
		for _, p := range b.list {
			if p.ver != f.emb.vers[p.who] || p.who == me.idx {
				continue
			}
			if partial[p.who] == 0 {
				touched = append(touched, p.who)
			}
			partial[p.who] += qw * uint64(p.w)
		}
	}
	better := func(a, b Neighbor) bool { return a.Sim > b.Sim || a.Sim == b.Sim && a.AgentID < b.AgentID }
	cands := topK(touched, rescored*k, func(who int32) Neighbor {
		return Neighbor{AgentID: f.emb.names[who], Sim: float64(partial[who])}
	}, better, func(n Neighbor) bool { return f.discoverability(n.AgentID) == Public })
	scored := make([]int32, len(cands))
	for i, c := range cands {
		scored[i] = f.emb.agents[c.AgentID].idx
	}
	top := topK(scored, k, func(who int32) Neighbor {
		dot := dotQuantized(me.vec, f.emb.agents[f.emb.names[who]].vec)
		return Neighbor{AgentID: f.emb.names[who], Sim: round4(min(float64(dot)/(65535.0*65535.0), 1))}
	}, better, func(n Neighbor) bool { return n.Sim > 0 })
	for i := range top {
		top[i].SampleTopics = sampleTopics(f.emb.agents[top[i].AgentID].posts, 3)
	}
	return top
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

// dotQuantized is the fixed-point dot product of two vectors sorted by
// bucket.
func dotQuantized(a, b []feature) uint64 {
	var sum uint64
	for i, j := 0, 0; i < len(a) && j < len(b); {
		switch {
		case a[i].dim < b[j].dim:
			i++
		case a[i].dim > b[j].dim:
			j++
		default:
			sum += uint64(quantize(a[i].w)) * uint64(quantize(b[j].w))
			i, j = i+1, j+1
		}
	}
	return sum
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
