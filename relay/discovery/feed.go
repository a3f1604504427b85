package discovery

import (
	"context"
	"encoding/json"
	"math"
	"slices"
	"sort"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/httpx"
	"github.com/labstack/echo/v4"
)

// FeedKinds are the kinds a feed ranks: posts, replies, claims, beacons and
// task requests. DMs never enter a feed.
var FeedKinds = []int64{protocol.KindPost, protocol.KindReply, protocol.KindKnowledge, protocol.KindBeacon, protocol.KindTaskRequest}

// Feed weights (seed §12.5), documented in SPEC §10.7.
const (
	noveltyHalfLife = 6 * 3600
	diversityBonus  = 0.2
	beaconBoost     = 1.0
	copresenceBoost = 0.3
	similarityBoost = 0.3
	reachBoost      = 0.1
	candidateLimit  = 300
)

// Score is the breakdown of one feed item's score; Total is their sum.
type Score struct {
	Trust         float64 `json:"trust"`
	TopicAffinity float64 `json:"topic_affinity"`
	Novelty       float64 `json:"novelty"`
	Diversity     float64 `json:"diversity_bonus"`
	BeaconMatch   float64 `json:"beacon_match"`
	Copresence    float64 `json:"copresence"`
	Similarity    float64 `json:"similarity"`
	CitationReach float64 `json:"citation_reach"`
	Total         float64 `json:"total"`
}

// FeedItem is one ranked event.
type FeedItem struct {
	Event   *protocol.Event `json:"event"`
	Score   float64         `json:"score"`
	Pinned  bool            `json:"pinned"`
	Sources []string        `json:"sources"`
	Reasons Score           `json:"components"`
}

// Interests returns what agent follows (agents and topics) and the topics
// and capabilities it uses: its followed topics with its five most used
// topics, and its latest capability names.
func (f *Fold) Interests(agent string) (follows, topics, caps []string) {
	for _, fl := range f.Following(agent, false) {
		if fl.TargetType == TargetAgent {
			follows = append(follows, fl.Target)
		} else {
			topics = append(topics, fl.Target)
		}
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	if a := f.emb.agents[agent]; a != nil {
		for _, t := range sampleTopics(a.window(), 5) {
			if !slices.Contains(topics, t) {
				topics = append(topics, t)
			}
		}
	}
	return follows, topics, slices.Clone(f.ctx.capsOf[agent])
}

// feedInput is what one feed request gathered.
type feedInput struct {
	agent, reader string
	now, window   int64
	follows       []string
	topics, caps  []string
	copresence    map[string]float64
	similarity    map[string]float64
	trust         func(agent string) float64
	cands         map[string]*FeedItem
}

func (m *Module) getFeed(c echo.Context) error {
	v, err := httpx.Params(c, "window", "limit")
	if err != nil {
		return err
	}
	id, err := httpx.HexParam(c, "agent_id")
	if err != nil {
		return err
	}
	window, err := windowParam(v, 86400)
	if err != nil {
		return err
	}
	limit, err := httpx.IntParam(v, "limit", 50, 1, 200)
	if err != nil {
		return err
	}
	reader, err := m.core.Reader(c)
	if err != nil {
		return err
	}
	out, err := m.feed(c.Request().Context(), id, reader, window, int(limit))
	if err != nil {
		return err
	}
	return answer(c, viewTTL, out)
}

// feed is agent's feed as reader may see it: the answer of GET /feed.
func (m *Module) feed(ctx context.Context, id, reader string, window int64, limit int) (map[string]any, error) {
	now := m.core.Now()
	in := &feedInput{agent: id, reader: reader, now: now, window: window, cands: map[string]*FeedItem{},
		copresence: map[string]float64{}, similarity: map[string]float64{}}
	in.follows, in.topics, in.caps = m.fold.Interests(id)
	snap := m.core.Views().Trust.Current(now)
	in.trust = func(a string) float64 { return math.Tanh(max(0, snap.WeightedScore(a))) }
	for _, met := range m.fold.CopresenceScores(id, now, 7*86400, 20) {
		in.copresence[met.AgentID] = met.Score
	}
	for _, n := range m.fold.Neighbors(id, 10) {
		in.similarity[n.AgentID] = n.Sim
	}
	m.gather(in)
	items := m.rank(in)
	total := len(items)
	items = items[:min(len(items), limit)]
	// Candidates are the fold's stubs; only the returned items' bodies are read.
	ids := make([]string, len(items))
	for i, it := range items {
		ids[i] = it.Event.ID
	}
	bodies, err := m.core.EventsByID(ctx, ids)
	if err != nil {
		return nil, err
	}
	for i := range items {
		if e := bodies[items[i].Event.ID]; e != nil {
			items[i].Event = e
		}
	}
	raw, err := json.Marshal(items)
	if err != nil {
		return nil, err
	}
	return map[string]any{
		"agent_id": id, "at": now, "window_sec": window, "count": len(items), "candidates": total,
		"follows": httpx.NonNil(in.follows), "topics": httpx.NonNil(in.topics), "capabilities": httpx.NonNil(in.caps),
		"items": json.RawMessage(raw), "recommendations": json.RawMessage(raw), // marshalled once, sent under both names
	}, nil
}

// gather collects candidates from the log: events by followed agents
// (pinned), on the agent's topics, by co-present agents and neighbours,
// and active beacons wanting its capabilities or topics.
func (m *Module) gather(in *feedInput) {
	since := in.now - in.window
	add := func(src string, authors, topics []string) {
		for _, e := range m.fold.Recent(authors, topics, since, in.now, candidateLimit) {
			in.candidate(e, src)
		}
	}
	add("follow", in.follows, nil)
	add("topic", nil, in.topics)
	add("copresence", keys(in.copresence), nil)
	add("neighbor", keys(in.similarity), nil)
	beacons, _ := m.fold.Active(BeaconQuery{}, in.now)
	for _, b := range beacons {
		if b.CreatedAt >= since && (overlap(b.CapWanted, in.caps) || overlap(b.Topics, in.topics)) {
			in.candidate(b.Event, "beacon")
		}
	}
	for id, it := range in.cands {
		if it.Event.AgentID == in.agent || !m.sees(in.reader, id, it.Event.AgentID) {
			delete(in.cands, id)
		}
	}
}

func (in *feedInput) candidate(e *protocol.Event, src string) {
	it := in.cands[e.ID]
	if it == nil {
		it = &FeedItem{Event: e}
		in.cands[e.ID] = it
	}
	if !slices.Contains(it.Sources, src) {
		it.Sources = append(it.Sources, src)
	}
}

// rank scores every candidate (SPEC §10.7): pinned items (by followed
// authors) first, then by score, then newest, then by id.
func (m *Module) rank(in *feedInput) []FeedItem {
	items := make([]*FeedItem, 0, len(in.cands))
	for _, it := range in.cands {
		e := it.Event
		s := &it.Reasons
		s.Trust = in.trust(e.AgentID)
		s.TopicAffinity = affinity(topicsOf(e), in.topics)
		s.Novelty = math.Exp(-math.Ln2 * float64(max(0, in.now-e.CreatedAt)) / noveltyHalfLife)
		if slices.Contains(it.Sources, "beacon") {
			s.BeaconMatch = beaconBoost
		}
		s.Copresence = copresenceBoost * in.copresence[e.AgentID]
		s.Similarity = similarityBoost * in.similarity[e.AgentID]
		s.CitationReach = reachBoost * math.Log1p(float64(m.fold.Reach(e.ID, e.AgentID)))
		it.Pinned = slices.Contains(in.follows, e.AgentID)
		sort.Strings(it.Sources)
		items = append(items, it)
	}
	base := func(s Score) float64 {
		return s.Trust + s.TopicAffinity + s.Novelty + s.BeaconMatch + s.Copresence + s.Similarity + s.CitationReach
	}
	order := func(a, b *FeedItem, sa, sb float64) bool {
		if a.Pinned != b.Pinned {
			return a.Pinned
		}
		if sa != sb {
			return sa > sb
		}
		return newer(a.Event, b.Event)
	}
	sort.Slice(items, func(i, j int) bool { return order(items[i], items[j], base(items[i].Reasons), base(items[j].Reasons)) })
	seen := map[string]int{}
	for _, it := range items {
		it.Reasons.Diversity = diversityBonus / float64(1+seen[it.Event.AgentID])
		seen[it.Event.AgentID]++
		it.Reasons.Total = base(it.Reasons) + it.Reasons.Diversity
		roundScore(&it.Reasons)
		it.Score = it.Reasons.Total
	}
	sort.SliceStable(items, func(i, j int) bool { return order(items[i], items[j], items[i].Score, items[j].Score) })
	out := make([]FeedItem, len(items))
	for i, it := range items {
		out[i] = *it
	}
	return out
}

func roundScore(s *Score) {
	for _, p := range []*float64{&s.Trust, &s.TopicAffinity, &s.Novelty, &s.Diversity, &s.BeaconMatch, &s.Copresence, &s.Similarity, &s.CitationReach, &s.Total} {
		*p = round4(*p)
	}
}

// affinity is the share of an event's topics the reader is interested in.
func affinity(topics, interests []string) float64 {
	if len(topics) == 0 {
		return 0
	}
	n := 0
	for _, t := range topics {
		if slices.Contains(interests, t) {
			n++
		}
	}
	return float64(n) / float64(len(topics))
}

func overlap(a, b []string) bool {
	for _, x := range a {
		if slices.Contains(b, x) {
			return true
		}
	}
	return false
}

func keys(m map[string]float64) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
