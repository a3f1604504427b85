package discovery

import (
	"database/sql"
	"encoding/hex"
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

// contexts is the co-presence fold. Threads, topics and cited events are
// rows of the store's ctx table (context type, ref, time, agent, and how
// many events put the agent there then): a context's members within a
// window are one range of its primary key, an agent's contexts one range
// of ctx_agent. An event rooting its own thread is a member of it like
// any other (a thread of one agent is no shared context). Declared
// capabilities grow with agents and stay in memory.
type contexts struct {
	st         *store
	capsOf     map[string][]string
	capMembers map[string]map[string]bool
}

func newContexts(st *store) contexts {
	return contexts{st: st, capsOf: map[string][]string{}, capMembers: map[string]map[string]bool{}}
}

// put adds (add) or removes one (context, time, agent) of the multiset.
// Additions are buffered; a removal writes them first.
func (c *contexts) put(typ int, ref []byte, agent string, at int64, add bool) {
	s := c.st
	if add {
		s.addCtx(ctxKey{typ, string(ref), at, s.agent(agent)})
		return
	}
	n := s.agentOf(agent)
	if n < 0 {
		return
	}
	s.flush()
	_, err := s.stmts[sCtxDec].Exec(typ, ref, at, n)
	s.fail(err)
	_, err = s.stmts[sCtxDel].Exec(typ, ref, at, n)
	s.fail(err)
	s.wrote(2)
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

// apply folds e in or out; topics and refs are its topicsOf and refsOf.
// Callers hold the fold's write lock.
func (c *contexts) apply(e *protocol.Event, topics []string, refs map[string][]string, add bool) {
	switch e.Kind {
	case protocol.KindProfile, protocol.KindCapability, protocol.KindSubscribe:
		return
	}
	if r := threadOf(e); r != "" {
		c.put(typThread, idBlob(r), e.AgentID, e.CreatedAt, add)
	}
	for _, t := range topics {
		c.put(typTopic, []byte(t), e.AgentID, e.CreatedAt, add)
	}
	for id, rels := range refs {
		if !slices.Contains(rels, "root") && !slices.Contains(rels, "reply") {
			c.put(typCite, idBlob(id), e.AgentID, e.CreatedAt, add)
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
	// The shared contexts are read once: the scores first, then the
	// contexts of the rows kept (refs only when asked for).
	score := map[string]int{}
	type pair struct {
		other string
		c     Context
	}
	var pairs []pair
	f.eachShared(agent, now-window, now, contexts, func(other string, c Context) {
		score[other] += ContextWeights[c.Type]
		if contexts {
			pairs = append(pairs, pair{other, c})
		}
	})
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
	for _, p := range pairs {
		if i, ok := row[p.other]; ok {
			out[i].Contexts = append(out[i].Contexts, p.c)
		}
	}
	for _, m := range out {
		sort.Slice(m.Contexts, func(i, j int) bool {
			a, b := m.Contexts[i], m.Contexts[j]
			return a.Type < b.Type || a.Type == b.Type && a.Ref < b.Ref
		})
	}
	return out
}

// eachShared calls fn for every (other agent, context) pair agent shares
// within [lo, hi] (capabilities whatever the time); a context's Ref is
// set only when refs is true. Callers hold the fold's read lock.
func (f *Fold) eachShared(agent string, lo, hi int64, refs bool, fn func(other string, c Context)) {
	if n := f.st.agentOf(agent); n >= 0 && !f.st.empty() {
		f.st.mu.Lock()
		f.st.ensureIndexes()
		f.st.flush()
		for _, q := range []struct {
			typ  int
			name string
			span int64
		}{{typThread, CtxThread, 0}, {typCite, CtxCitation, 0}, {typTopic, CtxTopic, TopicSpan}} {
			f.st.shared(n, q.typ, lo, hi, q.span, func(other int64, ref []byte) {
				c := Context{Type: q.name}
				if refs {
					c.Ref = refText(q.typ, ref)
				}
				fn(f.st.name(other), c)
			})
		}
		f.st.mu.Unlock()
	}
	for _, n := range f.ctx.capsOf[agent] {
		for other := range f.ctx.capMembers[n] {
			if other != agent {
				fn(other, Context{CtxCapability, n})
			}
		}
	}
}

// shared calls fn once for every (other agent, context of type typ) such
// that agent me and the other were both in the context within [lo, hi],
// and, when span > 0, at most span apart: one query per type. Callers
// hold mu.
func (s *store) shared(me int64, typ int, lo, hi, span int64, fn func(other int64, ref []byte)) {
	q := sShared
	if span > 0 {
		q = sSharedTopic
	}
	rows, err := s.stmts[q].Query(me, typ, lo, hi, span)
	if err != nil {
		s.fail(err)
		return
	}
	defer rows.Close()
	met := map[string]map[int64]bool{} // ref → the others met there
	var ref sql.RawBytes               // valid until the next row
	for rows.Next() {
		var other int64
		if err := rows.Scan(&ref, &other); err != nil {
			s.fail(err)
			return
		}
		m := met[string(ref)]
		if m == nil {
			m = map[int64]bool{}
			met[string(ref)] = m
		}
		if !m[other] {
			m[other] = true
			fn(other, ref)
		}
	}
	s.fail(rows.Err())
}

// refText is a context's ref as answers name it: an event id in hex, a
// topic as it is.
func refText(typ int, ref []byte) string {
	if typ != typTopic && len(ref) == 32 {
		return hex.EncodeToString(ref)
	}
	return string(ref)
}

func round4(x float64) float64 { return math.Round(x*1e4) / 1e4 }
