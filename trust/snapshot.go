package trust

import (
	"cmp"
	"math"
	"slices"
	"strings"
)

// Summary is the trust of one agent without its vote list: one row of
// GET /trust_graph. Numbers are rounded to 6 decimals.
type Summary struct {
	AgentID string `json:"agent_id"`
	// ScoreIn is Σ c(v, agent) over the latest nonzero incoming votes, with
	// c = score × exp(−ln2 × age_days / 30): decayed, not trust-weighted.
	ScoreIn float64 `json:"score_in"`
	// ScoreOut is Σ score over the agent's own latest nonzero outgoing votes,
	// raw (neither decayed nor weighted).
	ScoreOut float64 `json:"score_out"`
	// WeightedScore is the agent's trust.v1 value.
	WeightedScore float64 `json:"weighted_score"`
	// Rank is 1 for the highest WeightedScore, ties broken by agent_id, over
	// agents whose WeightedScore is nonzero; 0 for every other agent.
	Rank int `json:"rank"`
	// VoterCount is the number of distinct voters whose latest vote on the
	// agent is nonzero.
	VoterCount int `json:"voter_count"`
}

// Vote is the latest vote of one voter on an agent.
type Vote struct {
	From      string  `json:"from"`
	Score     float64 `json:"score"`
	CreatedAt int64   `json:"created_at"`
	EventID   string  `json:"event_id"`
	Reason    string  `json:"reason"`
}

// AgentTrust is the body of GET /trust/{agent_id}.
type AgentTrust struct {
	Summary
	Iterations int  `json:"iterations"`
	Converged  bool `json:"converged"`
	// Votes are the latest vote per voter, newest first (created_at, then
	// event id, descending); withdrawals (score 0) only on request.
	Votes []Vote `json:"votes"`
}

// Snapshot is an immutable trust.v1 result at one evaluation time. All its
// methods are safe for concurrent use; slices it returns are shared and must
// not be modified.
type Snapshot struct {
	// Now is the evaluation time (a whole minute, see EvalTime).
	Now int64
	// Version is the Graph version the snapshot reflects.
	Version uint64
	// Iterations is the number of Jacobi passes run; Converged reports
	// whether the last one moved no value by Tolerance or more.
	Iterations int
	Converged  bool

	index  map[string]int32
	sum    []Summary // by agent id
	votes  []Vote    // grouped by target; per target nonzero then withdrawn
	vstart []int32   // votes of agent i: votes[vstart[i]:vstart[i+1]]
	ranked []int32   // agents with a nonzero weighted score, in rank order
	graph  []int32   // agents with a nonzero incoming vote, best first
	// excluded are the agents Options.Excluded named: no Weight, no
	// WeightMod.
	excluded map[string]bool
}

func assemble(at int64, version uint64, ids []string, edges []edge, in incoming, trust []float64, iterations int, converged bool) *Snapshot {
	n := len(ids)
	s := &Snapshot{Now: at, Version: version, Iterations: iterations, Converged: converged,
		index: make(map[string]int32, n), sum: make([]Summary, n), vstart: make([]int32, n+1)}
	out := make([]float64, n)
	for _, e := range edges { // target order, so each voter's sum runs in id order
		if e.rec.score != 0 {
			out[e.voter] += e.rec.score
		}
		s.vstart[e.target+1]++
	}
	for i, id := range ids {
		s.index[id] = int32(i)
		acc := 0.0
		for j := in.start[i]; j < in.start[i+1]; j++ {
			acc += in.c[j]
		}
		s.sum[i] = Summary{AgentID: id, ScoreIn: round6(acc), ScoreOut: round6(out[i]),
			WeightedScore: round6(trust[i]), VoterCount: int(in.start[i+1] - in.start[i])}
		s.vstart[i+1] += s.vstart[i]
	}
	s.votes = buildVotes(ids, edges, s.vstart)
	s.rankAgents()
	return s
}

// buildVotes lays out every target's latest votes: nonzero ones newest
// first, then withdrawals newest first.
func buildVotes(ids []string, edges []edge, vstart []int32) []Vote {
	votes := make([]Vote, len(edges))
	for i, e := range edges {
		votes[i] = Vote{From: ids[e.voter], Score: e.rec.score, CreatedAt: e.rec.createdAt, EventID: e.rec.id, Reason: e.rec.reason}
	}
	for t := 0; t+1 < len(vstart); t++ {
		slices.SortFunc(votes[vstart[t]:vstart[t+1]], func(a, b Vote) int {
			if (a.Score == 0) != (b.Score == 0) {
				if a.Score == 0 {
					return 1
				}
				return -1
			}
			if c := cmp.Compare(b.CreatedAt, a.CreatedAt); c != 0 {
				return c
			}
			return strings.Compare(b.EventID, a.EventID)
		})
	}
	return votes
}

// rankAgents orders agents by weighted score, highest first, ties by id.
func (s *Snapshot) rankAgents() {
	for i := range s.sum {
		if s.sum[i].VoterCount > 0 {
			s.graph = append(s.graph, int32(i))
		}
	}
	byScore := func(a, b int32) int {
		if c := cmp.Compare(s.sum[b].WeightedScore, s.sum[a].WeightedScore); c != 0 {
			return c
		}
		return cmp.Compare(a, b) // positions are in agent id order
	}
	slices.SortFunc(s.graph, byScore)
	for i := range s.sum {
		if s.sum[i].WeightedScore != 0 {
			s.ranked = append(s.ranked, int32(i))
		}
	}
	slices.SortFunc(s.ranked, byScore)
	for r, i := range s.ranked {
		s.sum[i].Rank = r + 1
	}
}

// Summary returns the trust of agentID; ok is false (and the summary zero
// apart from AgentID) when no latest vote involves the agent.
func (s *Snapshot) Summary(agentID string) (sum Summary, ok bool) {
	i, ok := s.index[agentID]
	if !ok {
		return Summary{AgentID: agentID}, false
	}
	return s.sum[i], true
}

// Agent returns the GET /trust/{agent_id} body for agentID. Votes leaves out
// withdrawals (score 0) unless includeWithdrawn. An unknown agent gets zero
// scores, rank 0 and no votes.
func (s *Snapshot) Agent(agentID string, includeWithdrawn bool) AgentTrust {
	sum, ok := s.Summary(agentID)
	at := AgentTrust{Summary: sum, Iterations: s.Iterations, Converged: s.Converged, Votes: []Vote{}}
	if !ok {
		return at
	}
	i := s.index[agentID]
	votes := s.votes[s.vstart[i]:s.vstart[i+1]]
	if !includeWithdrawn {
		k := slices.IndexFunc(votes, func(v Vote) bool { return v.Score == 0 })
		if k >= 0 {
			votes = votes[:k]
		}
	}
	at.Votes = votes[:len(votes):len(votes)]
	return at
}

// WeightedScore returns the agent's weighted score (0 when unknown).
func (s *Snapshot) WeightedScore(agentID string) float64 {
	if i, ok := s.index[agentID]; ok {
		return s.sum[i].WeightedScore
	}
	return 0
}

// Rank returns the agent's rank (1 = highest weighted score), or 0 when its
// weighted score is zero.
func (s *Snapshot) Rank(agentID string) int {
	if i, ok := s.index[agentID]; ok {
		return s.sum[i].Rank
	}
	return 0
}

// Weight returns the voting weight of an agent, sqrt(max(0, weighted_score
// + 1)): 1 for an agent nobody voted on, 0 at weighted score −1 or below.
// M-of-N verifier consensus (§18.6.1) uses it as verifier_weight.
func (s *Snapshot) Weight(agentID string) float64 {
	if s.excluded[agentID] {
		return 0
	}
	return math.Sqrt(math.Max(0, s.WeightedScore(agentID)+1))
}

// RankedCount returns the number of agents with a nonzero weighted score,
// the population over which ranks and top-percent membership are taken.
func (s *Snapshot) RankedCount() int { return len(s.ranked) }

// InTopPercent reports whether the agent is in the top percent% by rank:
// rank ≥ 1 and rank ≤ ceil(percent × RankedCount / 100). §7.1 uses 1 and
// §7.4 uses 5.
func (s *Snapshot) InTopPercent(agentID string, percent int) bool {
	r := s.Rank(agentID)
	return r > 0 && r <= (percent*len(s.ranked)+99)/100
}

// GraphLen returns the number of agents in the trust graph listing: those
// with at least one nonzero incoming latest vote.
func (s *Snapshot) GraphLen() int { return len(s.graph) }

// TrustGraph returns the GET /trust_graph rows from offset: agents with a
// nonzero incoming latest vote, highest weighted score first, ties by
// agent_id. limit ≤ 0 means all remaining rows.
func (s *Snapshot) TrustGraph(offset, limit int) []Summary {
	if offset < 0 {
		offset = 0
	}
	if offset > len(s.graph) {
		offset = len(s.graph)
	}
	end := len(s.graph)
	if limit > 0 && offset+limit < end {
		end = offset + limit
	}
	out := make([]Summary, 0, end-offset)
	for _, i := range s.graph[offset:end] {
		out = append(out, s.sum[i])
	}
	return out
}
