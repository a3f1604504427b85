package reference

import (
	"math"
	"slices"
	"sort"

	"github.com/anp2net/relay/protocol"
)

// Context types of co-presence (§12.2) and their weights in the score.
const (
	CtxThread     = "thread"
	CtxCitation   = "citation"
	CtxTopic      = "topic"
	CtxCapability = "capability"

	// TopicSpan is how close in time two agents' posts on a topic must be.
	TopicSpan = 86400
)

// ContextWeights weigh each shared context in the co-presence score, in
// tenths (summed as integers, so a score never depends on summation order).
var ContextWeights = map[string]int{CtxThread: 10, CtxCitation: 8, CtxTopic: 5, CtxCapability: 3}

// ctxIndex holds when each agent appeared in each context (sorted times).
type ctxIndex struct {
	byAgent map[string]map[string][]int64
	byRef   map[string]map[string][]int64
}

func newIndex() ctxIndex {
	return ctxIndex{byAgent: map[string]map[string][]int64{}, byRef: map[string]map[string][]int64{}}
}

func (x ctxIndex) apply(agent, ref string, at int64, add bool) {
	edit(x.byAgent, agent, ref, at, add)
	edit(x.byRef, ref, agent, at, add)
}

func edit(m map[string]map[string][]int64, a, b string, at int64, add bool) {
	inner := m[a]
	if inner == nil {
		if !add {
			return
		}
		inner = map[string][]int64{}
		m[a] = inner
	}
	times := inner[b]
	i, found := slices.BinarySearch(times, at)
	if add {
		times = slices.Insert(times, i, at)
	} else if found {
		times = slices.Delete(times, i, i+1)
	}
	if len(times) == 0 {
		delete(inner, b)
		if len(inner) == 0 {
			delete(m, a)
		}
		return
	}
	inner[b] = times
}

// contexts is the co-presence fold: threads, topics, cited events and
// declared capabilities, per agent and per context.
type contexts struct {
	thread, topic, cite ctxIndex
	capsOf              map[string][]string
	capMembers          map[string]map[string]bool
}

func newContexts() contexts {
	return contexts{thread: newIndex(), topic: newIndex(), cite: newIndex(),
		capsOf: map[string][]string{}, capMembers: map[string]map[string]bool{}}
}

// threadOf is the thread root e belongs to: its ["e", id, "root"] tag, else
// a reply's first e tag, else e itself when it is a post, claim or task
// request that others may answer ("" when none).
func threadOf(e *protocol.Event) string {
	var first string
	for _, t := range e.Tags {
		if len(t) >= 2 && t[0] == "e" && protocol.IsHex64(t[1]) {
			if len(t) >= 3 && t[2] == "root" {
				return t[1]
			}
			if first == "" {
				first = t[1]
			}
		}
	}
	switch {
	case e.Kind == protocol.KindReply && first != "":
		return first
	case isPost(e) || e.Kind == protocol.KindTaskRequest:
		return e.ID
	}
	return ""
}

func (c *contexts) apply(e *protocol.Event, add bool) {
	switch e.Kind {
	case protocol.KindProfile, protocol.KindCapability, protocol.KindSubscribe:
		return
	}
	if r := threadOf(e); r != "" {
		c.thread.apply(e.AgentID, r, e.CreatedAt, add)
	}
	for _, t := range topicsOf(e) {
		c.topic.apply(e.AgentID, t, e.CreatedAt, add)
	}
	for id, rels := range refsOf(e) {
		if !slices.Contains(rels, "root") && !slices.Contains(rels, "reply") {
			c.cite.apply(e.AgentID, id, e.CreatedAt, add)
		}
	}
}

func (c *contexts) setCaps(agent string, old, now []string) {
	for _, n := range old {
		if m := c.capMembers[n]; m != nil {
			delete(m, agent)
			if len(m) == 0 {
				delete(c.capMembers, n)
			}
		}
	}
	for _, n := range now {
		if c.capMembers[n] == nil {
			c.capMembers[n] = map[string]bool{}
		}
		c.capMembers[n][agent] = true
	}
	if len(now) == 0 {
		delete(c.capsOf, agent)
	} else {
		c.capsOf[agent] = now
	}
}

// Context is one shared context of two agents.
type Context struct {
	Type string `json:"type"`
	Ref  string `json:"ref"`
}

// Met is one agent of a co-presence answer.
type Met struct {
	AgentID  string    `json:"agent_id"`
	Contexts []Context `json:"contexts"`
	Score    float64   `json:"score"`
}

// Copresence returns the agents agent has met in [now−window, now]: those
// who posted in a thread it posted in, posted on a topic within TopicSpan
// of its own post on it, cited an event it cited (other than as a thread
// root or reply), all within the window, or declare a capability it
// declares. score = s/(1+s) with s = Σ ContextWeights over the shared
// contexts, rounded to 4 decimals; highest first, then by agent_id.
// Agents whose discoverability is not public are left out (§12.8).
func (f *Fold) Copresence(agent string, now, window int64, limit int) []Met {
	return f.copresence(agent, now, window, limit, true)
}

// CopresenceScores is Copresence without the contexts (one pass over the
// shared contexts instead of two): what the feed needs.
func (f *Fold) CopresenceScores(agent string, now, window int64, limit int) []Met {
	return f.copresence(agent, now, window, limit, false)
}

func (f *Fold) copresence(agent string, now, window int64, limit int, contexts bool) []Met {
	f.mu.RLock()
	defer f.mu.RUnlock()
	// First the scores alone, then the contexts of the rows kept.
	score := map[string]int{}
	f.eachShared(agent, now-window, now, func(other string, c Context) { score[other] += ContextWeights[c.Type] })
	out := make([]Met, 0, min(len(score), limit+1))
	better := func(a, b Met) bool { return a.Score > b.Score || a.Score == b.Score && a.AgentID < b.AgentID }
	for other, tenths := range score {
		s := float64(tenths) / 10
		if len(f.disc) > 0 && f.discoverability(other) != Public {
			continue
		}
		m := Met{AgentID: other, Score: round4(s / (1 + s))}
		if len(out) == limit && !better(m, out[limit-1]) {
			continue
		}
		i := sort.Search(len(out), func(i int) bool { return better(m, out[i]) })
		out = slices.Insert(out, i, m)
		if len(out) > limit {
			out = out[:limit]
		}
	}
	if !contexts {
		return out
	}
	row := make(map[string]int, len(out))
	for i, m := range out {
		row[m.AgentID] = i
	}
	f.eachShared(agent, now-window, now, func(other string, c Context) {
		if i, ok := row[other]; ok {
			out[i].Contexts = append(out[i].Contexts, c)
		}
	})
	for _, m := range out {
		sort.Slice(m.Contexts, func(i, j int) bool {
			a, b := m.Contexts[i], m.Contexts[j]
			return a.Type < b.Type || a.Type == b.Type && a.Ref < b.Ref
		})
	}
	return out
}

// eachShared calls fn for every (other agent, context) pair agent shares
// within [lo, hi] (capabilities whatever the time).
func (f *Fold) eachShared(agent string, lo, hi int64, fn func(other string, c Context)) {
	shared := func(idx ctxIndex, typ string, near func(a, b []int64) bool) {
		for ref, mine := range idx.byAgent[agent] {
			if !anyIn(mine, lo, hi) {
				continue
			}
			for other, theirs := range idx.byRef[ref] {
				if other != agent && near(mine, theirs) {
					fn(other, Context{typ, ref})
				}
			}
		}
	}
	inWindow := func(_, b []int64) bool { return anyIn(b, lo, hi) }
	shared(f.ctx.thread, CtxThread, inWindow)
	shared(f.ctx.cite, CtxCitation, inWindow)
	shared(f.ctx.topic, CtxTopic, func(a, b []int64) bool { return closeIn(a, b, lo, hi, TopicSpan) })
	for _, n := range f.ctx.capsOf[agent] {
		for other := range f.ctx.capMembers[n] {
			if other != agent {
				fn(other, Context{CtxCapability, n})
			}
		}
	}
}

// anyIn reports whether sorted times holds a value in [lo, hi].
func anyIn(times []int64, lo, hi int64) bool {
	i, _ := slices.BinarySearch(times, lo)
	return i < len(times) && times[i] <= hi
}

// closeIn reports whether sorted a and b hold values in [lo, hi] at most
// span apart.
func closeIn(a, b []int64, lo, hi, span int64) bool {
	i, _ := slices.BinarySearch(a, lo)
	for ; i < len(a) && a[i] <= hi; i++ {
		if anyIn(b, max(lo, a[i]-span), min(hi, a[i]+span)) {
			return true
		}
	}
	return false
}

func round4(x float64) float64 { return math.Round(x*1e4) / 1e4 }
