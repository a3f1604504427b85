package trust

import (
	"cmp"
	"math"
	"slices"
	"strings"
)

// trust.v1 parameters (reference-relay.md, decisions D7).
const (
	// Algorithm names the trust computation of this package.
	Algorithm = "trust.v1"
	// MaxIterations bounds the Jacobi passes.
	MaxIterations = 20
	// Tolerance stops the iteration once max |Δ| falls below it.
	Tolerance = 1e-4
	// SybilTargets is the number of distinct targets at which a voter's
	// sybil dampening reaches 1.
	SybilTargets = 3
	// NewAgentRamp and NewAgentFloor are the new-agent penalty (seed §6
	// sybil_penalty, "decays when a new agent … votes heavily"): a voter
	// first seen (its earliest kind 0 or kind 6) age seconds before the
	// evaluation time votes with NewAgentFloor + (1 − NewAgentFloor) ×
	// min(1, age / NewAgentRamp) of its weight.
	NewAgentRamp  = 14 * 86400
	NewAgentFloor = 0.5
)

// newAgentFactor is the new-agent penalty of a voter first seen at first,
// at time at.
func newAgentFactor(first, at int64) float64 {
	age := float64(max(0, at-first))
	return NewAgentFloor + (1-NewAgentFloor)*math.Min(1, age/NewAgentRamp)
}

// EvalTime returns the time trust and moderation are evaluated at for a
// request at now: now rounded down to a whole minute (now − now mod 60), so
// that every request within a minute shares one exact, reproducible result.
func EvalTime(now int64) int64 {
	if now < 0 {
		return now - ((now%60)+60)%60
	}
	return now - now%60
}

// edge is the latest vote of one (voter, target) pair, with both ends as
// indices into the sorted agent list of one computation.
type edge struct {
	voter, target int32
	rec           voteRec
}

// Compute returns the exact trust state of every vote folded in so far,
// evaluated at EvalTime(now). It does not publish the result (see Refresh).
func (g *Graph) Compute(now int64) *Snapshot {
	g.computes.Add(1)
	at := EvalTime(now)
	version, names, raw, first := g.extract()
	return g.snapshot(at, version, names, raw, first)
}

// ComputeCalls counts the Compute calls so far (At's unpublished
// computations included, background refreshes not): tests use it to show
// a path computes no trust.
func (g *Graph) ComputeCalls() int64 { return g.computes.Load() }

// snapshot is computeSnapshot without the votes of the agents
// Options.Excluded names at at; the snapshot also gives them no Weight
// and no WeightMod.
func (g *Graph) snapshot(at int64, version uint64, names []string, edges []edge, first []int64) *Snapshot {
	var ex map[string]bool
	if g.opts.Excluded != nil {
		ex = g.opts.Excluded(at)
	}
	if len(ex) > 0 {
		edges = slices.DeleteFunc(edges, func(e edge) bool { return ex[names[e.voter]] })
	}
	s := computeSnapshot(at, version, names, edges, first)
	if len(ex) > 0 {
		s.excluded = ex
	}
	return s
}

// extract copies the latest vote of every pair, and every agent's
// first-seen time (by agent index; a voter is always seen), under the read
// lock.
func (g *Graph) extract() (uint64, []string, []edge, []int64) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	edges := make([]edge, 0, len(g.pairs))
	for i := range g.pairs {
		if p := &g.pairs[i]; p.latest >= 0 {
			edges = append(edges, edge{voter: p.key.voter, target: p.key.target, rec: p.recs[p.latest]})
		}
	}
	first := make([]int64, len(g.agents.names))
	for i := range first {
		if i < len(g.seen) && len(g.seen[i]) > 0 {
			first[i] = g.seen[i][0]
		}
	}
	return g.version.Load(), g.agents.names, edges, first
}

// computeSnapshot runs trust.v1 over the latest votes at time at. Every
// ordering that reaches a floating-point sum is by agent id, so the result
// depends on the set of votes only.
func computeSnapshot(at int64, version uint64, names []string, edges []edge, first []int64) *Snapshot {
	ids, remap := canonicalAgents(names, edges)
	penalty := make([]float64, len(ids))
	for i, pos := range remap {
		if int(pos) < len(ids) && ids[pos] == names[i] {
			penalty[pos] = newAgentFactor(first[i], at)
		}
	}
	for i := range edges {
		edges[i].voter, edges[i].target = remap[edges[i].voter], remap[edges[i].target]
	}
	n := len(ids)
	edges = sortEdges(n, edges)
	in := buildIncoming(n, edges, at, penalty)
	trust, iterations, converged := jacobi(n, in)
	return assemble(at, version, ids, edges, in, trust, iterations, converged)
}

// canonicalAgents returns the agents named by edges sorted by id, and the
// map from table index to position in that order (meaningless for agents
// no edge names).
func canonicalAgents(names []string, edges []edge) ([]string, []int32) {
	used := make([]bool, len(names))
	for _, e := range edges {
		used[e.voter], used[e.target] = true, true
	}
	var order []int32
	for i, u := range used {
		if u {
			order = append(order, int32(i))
		}
	}
	slices.SortFunc(order, func(a, b int32) int { return strings.Compare(names[a], names[b]) })
	remap := make([]int32, len(names))
	ids := make([]string, len(order))
	for pos, i := range order {
		remap[i] = int32(pos)
		ids[pos] = names[i]
	}
	return ids, remap
}

// sortEdges orders edges by (target, voter): a counting sort on the target,
// then a sort of each target's (few) voters.
func sortEdges(n int, edges []edge) []edge {
	start := make([]int32, n+1)
	for _, e := range edges {
		start[e.target+1]++
	}
	for i := 0; i < n; i++ {
		start[i+1] += start[i]
	}
	out := make([]edge, len(edges))
	fill := slices.Clone(start[:n])
	for _, e := range edges {
		out[fill[e.target]] = e
		fill[e.target]++
	}
	for t := 0; t < n; t++ {
		slices.SortFunc(out[start[t]:start[t+1]], func(a, b edge) int { return cmp.Compare(a.voter, b.voter) })
	}
	return out
}

// incoming is the nonzero-vote graph in compressed form: the contributions
// c(v, T) into T are c[start[T]:start[T+1]] from voters v[...], voters in
// id order. sybil is per voter: the distinct-target dampening times the
// new-agent penalty.
type incoming struct {
	start []int32
	v     []int32
	c     []float64
	sybil []float64
}

func buildIncoming(n int, edges []edge, at int64, penalty []float64) incoming {
	in := incoming{start: make([]int32, n+1), sybil: make([]float64, n)}
	targets := make([]int32, n)
	for _, e := range edges {
		if e.rec.score == 0 {
			continue
		}
		targets[e.voter]++
		in.start[e.target+1]++
		in.v = append(in.v, e.voter)
		in.c = append(in.c, e.rec.score*decay(at-e.rec.createdAt))
	}
	for i := 0; i < n; i++ {
		in.start[i+1] += in.start[i]
		in.sybil[i] = float64(math.Min(1, float64(targets[i])/SybilTargets) * penalty[i])
	}
	return in
}

// jacobi iterates trust_new[T] = Σ_v sqrt(max(0, trust[v]+1)) × sybil(v) ×
// c(v, T) from trust = 0, at most MaxIterations passes, stopping when
// max |Δ| < Tolerance.
func jacobi(n int, in incoming) (trust []float64, iterations int, converged bool) {
	prev, next, w := make([]float64, n), make([]float64, n), make([]float64, n)
	for iterations < MaxIterations {
		iterations++
		for v := 0; v < n; v++ {
			w[v] = float64(math.Sqrt(math.Max(0, prev[v]+1)) * in.sybil[v])
		}
		delta := 0.0
		for t := 0; t < n; t++ {
			acc := 0.0
			for j := in.start[t]; j < in.start[t+1]; j++ {
				acc += float64(w[in.v[j]] * in.c[j])
			}
			next[t] = acc
			delta = math.Max(delta, math.Abs(acc-prev[t]))
		}
		prev, next = next, prev
		if delta < Tolerance {
			converged = true
			break
		}
	}
	return prev, iterations, converged
}
