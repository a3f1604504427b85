package trust

import (
	"slices"
	"strings"
)

// Digest returns SHA-256 over the canonical serialization of the snapshot
// (see writeDigest).
func (s *Snapshot) Digest() [32]byte { return canonicalDigest(s.writeDigest) }

// Digest returns SHA-256 over the canonical serialization of the trust state
// at EvalTime(now), exact for the current version (At).
func (g *Graph) Digest(now int64) [32]byte { return g.At(now).Digest() }

// writeDigest writes the canonical trust state, the RFC 8785 form of
//
//	{"agents": [Summary, …], "converged", "iterations", "now",
//	 "view": "trust.v1",
//	 "votes": [{"created_at", "event_id", "from", "score", "to"}, …]}
//
// with every agent's summary in agent id order and every latest vote per
// pair, withdrawals included (target id order, then as in AgentTrust.Votes,
// score rounded to 6 decimals).
func (s *Snapshot) writeDigest(c *canon) {
	c.raw(`{"agents":[`)
	for i := range s.sum {
		if i > 0 {
			c.raw(",")
		}
		c.summary(&s.sum[i])
		c.flush()
	}
	c.raw(`],"converged":`)
	c.bool(s.Converged)
	c.raw(`,"iterations":`)
	c.int(int64(s.Iterations))
	c.raw(`,"now":`)
	c.int(s.Now)
	c.raw(`,"view":`)
	c.str(Algorithm)
	c.raw(`,"votes":[`)
	first := true
	for t := range s.sum {
		for i := s.vstart[t]; i < s.vstart[t+1]; i++ {
			if !first {
				c.raw(",")
			}
			first = false
			c.digestVote(&s.votes[i], s.sum[t].AgentID)
			c.flush()
		}
	}
	c.raw("]}")
}

func (c *canon) summary(s *Summary) {
	c.raw(`{"agent_id":`)
	c.str(s.AgentID)
	c.raw(`,"rank":`)
	c.int(int64(s.Rank))
	c.raw(`,"score_in":`)
	c.float(s.ScoreIn)
	c.raw(`,"score_out":`)
	c.float(s.ScoreOut)
	c.raw(`,"voter_count":`)
	c.int(int64(s.VoterCount))
	c.raw(`,"weighted_score":`)
	c.float(s.WeightedScore)
	c.raw("}")
}

func (c *canon) digestVote(v *Vote, to string) {
	c.raw(`{"created_at":`)
	c.int(v.CreatedAt)
	c.raw(`,"event_id":`)
	c.str(v.EventID)
	c.raw(`,"from":`)
	c.str(v.From)
	c.raw(`,"score":`)
	c.float(round6(v.Score))
	c.raw(`,"to":`)
	c.str(to)
	c.raw("}")
}

// writeDigest writes the canonical moderation state, the RFC 8785 form of
//
//	{"active_agents", "events": [EventModeration, …], "hide_threshold",
//	 "now", "view": "moderation.v1"}
//
// with every flagged event's full state (as GET /events/{id}/flags shows
// it) in event id order.
func (s *ModSnapshot) writeDigest(c *canon) {
	events := make([]*EventModeration, 0, len(s.events))
	for _, em := range s.events {
		events = append(events, em)
	}
	slices.SortFunc(events, func(a, b *EventModeration) int { return strings.Compare(a.EventID, b.EventID) })
	c.raw(`{"active_agents":`)
	c.int(int64(s.ActiveAgents))
	c.raw(`,"events":[`)
	for i, em := range events {
		if i > 0 {
			c.raw(",")
		}
		c.eventModeration(em)
		c.flush()
	}
	c.raw(`],"hide_threshold":`)
	c.float(s.HideThreshold)
	c.raw(`,"now":`)
	c.int(s.Now)
	c.raw(`,"view":`)
	c.str(moderationView)
	c.raw("}")
}

// moderationView names the moderation digest document.
const moderationView = "moderation.v1"

// array writes list with elem; a nil slice is null, as json.Marshal writes
// it.
func array[T any](c *canon, list []T, elem func(*canon, *T)) {
	if list == nil {
		c.raw("null")
		return
	}
	c.raw("[")
	for i := range list {
		if i > 0 {
			c.raw(",")
		}
		elem(c, &list[i])
	}
	c.raw("]")
}

// eventModeration writes em with its JSON tags' omitempty rules.
func (c *canon) eventModeration(em *EventModeration) {
	c.raw(`{"appeals":`)
	array(c, em.Appeals, (*canon).appeal)
	c.raw(`,"author":`)
	c.str(em.Author)
	c.raw(`,"event_id":`)
	c.str(em.EventID)
	if em.FirstHiddenAt != 0 {
		c.raw(`,"first_hidden_at":`)
		c.int(em.FirstHiddenAt)
	}
	c.raw(`,"flag_count":`)
	c.int(int64(em.FlagCount))
	c.raw(`,"flag_weight":`)
	c.float(em.FlagWeight)
	c.raw(`,"flags":`)
	array(c, em.Flags, (*canon).flagView)
	if em.HiddenSince != 0 {
		c.raw(`,"hidden_since":`)
		c.int(em.HiddenSince)
	}
	c.raw(`,"hide_threshold":`)
	c.float(em.HideThreshold)
	c.raw(`,"history":`)
	array(c, em.History, (*canon).transition)
	if em.Pending != nil {
		c.raw(`,"pending":{"at":`)
		c.int(em.Pending.At)
		c.raw(`,"visibility":`)
		c.str(em.Pending.Visibility)
		c.raw("}")
	}
	c.raw(`,"visibility":`)
	c.str(em.Visibility)
	c.raw("}")
}

func (c *canon) appeal(a *Appeal) {
	c.raw(`{"category":`)
	c.str(a.Category)
	c.raw(`,"counted":`)
	c.bool(a.Counted)
	c.raw(`,"created_at":`)
	c.int(a.CreatedAt)
	c.raw(`,"event_id":`)
	c.str(a.EventID)
	c.raw(`,"reason":`)
	c.str(a.Reason)
	c.raw("}")
}

func (c *canon) flagView(f *FlagView) {
	c.raw(`{"appeal":`)
	c.bool(f.Appeal)
	c.raw(`,"category":`)
	c.str(f.Category)
	c.raw(`,"cosigners":`)
	c.strings(f.Cosigners)
	c.raw(`,"created_at":`)
	c.int(f.CreatedAt)
	c.raw(`,"event_id":`)
	c.str(f.EventID)
	c.raw(`,"flagger":`)
	c.str(f.Flagger)
	c.raw(`,"override":`)
	c.bool(f.Override)
	c.raw(`,"reason":`)
	c.str(f.Reason)
	c.raw(`,"sign":`)
	c.float(f.Sign)
	c.raw(`,"weight":`)
	c.float(f.Weight)
	c.raw("}")
}

func (c *canon) transition(t *Transition) {
	c.raw(`{"at":`)
	c.int(t.At)
	c.raw(`,"flag_weight":`)
	c.float(t.FlagWeight)
	c.raw(`,"visibility":`)
	c.str(t.Visibility)
	c.raw("}")
}
