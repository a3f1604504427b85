package trust

import (
	"cmp"
	"slices"
	"strings"
)

// ReceivedVote is one row of GET /agents/{agent_id}/trust_received.
type ReceivedVote struct {
	Voter     string  `json:"voter"`
	Score     float64 `json:"score"`
	Reason    string  `json:"reason"`
	CreatedAt int64   `json:"created_at"`
	EventID   string  `json:"event_id"`
}

// Received is the §5.4.1 recent-vote digest of one agent. The relay adds
// "ts" and "filter".
type Received struct {
	AgentID string `json:"agent_id"`
	// Count is the number of votes returned.
	Count int `json:"count"`
	// ScoreSum is the sum of the returned raw scores, rounded to 6 decimals.
	ScoreSum float64        `json:"score_sum"`
	Votes    []ReceivedVote `json:"votes"`
}

// TrustReceived returns the §5.4.1 digest of the votes agentID received:
// the latest vote of each voter, when nonzero (a withdrawal is no vote),
// created at or after since and scoring at least minScore, newest first
// (created_at, then event id, descending), at most limit rows (limit ≤ 0:
// all). Scores are raw: no decay, no weighting. Reasons are truncated to
// MaxReasonRunes runes. It reads the live state, not a snapshot.
func (g *Graph) TrustReceived(agentID string, since int64, minScore float64, limit int) Received {
	out := Received{AgentID: agentID, Votes: []ReceivedVote{}}
	g.mu.RLock()
	target, ok := g.agents.lookup(agentID)
	if ok {
		for _, voter := range g.inbound[target] {
			p := g.pair(pairKey{voter, target}, false)
			if p.latest < 0 {
				continue
			}
			r := &p.recs[p.latest]
			if r.score == 0 || r.createdAt < since || r.score < minScore {
				continue
			}
			out.Votes = append(out.Votes, ReceivedVote{Voter: g.agents.names[voter], Score: r.score,
				Reason: r.reason, CreatedAt: r.createdAt, EventID: r.id})
		}
	}
	g.mu.RUnlock()
	slices.SortFunc(out.Votes, func(a, b ReceivedVote) int {
		if c := cmp.Compare(b.CreatedAt, a.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(b.EventID, a.EventID)
	})
	if limit > 0 && len(out.Votes) > limit {
		out.Votes = out.Votes[:limit]
	}
	sum := 0.0
	for _, v := range out.Votes {
		sum += v.Score
	}
	out.Count, out.ScoreSum = len(out.Votes), round6(sum)
	return out
}
