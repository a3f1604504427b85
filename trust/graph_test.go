package trust

import (
	"math"
	"strings"
	"testing"

	"github.com/anp2net/relay/protocol"
)

// View is the method set the relay drives every derived view through.
type View interface {
	Add(ev *protocol.Event)
	Remove(ev *protocol.Event)
	Digest(now int64) [32]byte
}

var (
	_ View = (*Graph)(nil)
	_ View = (*Moderation)(nil)
)

func TestSingleVoteByHand(t *testing.T) {
	g := NewGraph(Options{})
	addAll(g, established(1))
	g.Add(vote(1, t0, 1, "good", 2))
	s := g.Compute(t0)
	// One target: sybil(1) = 1/3; pass 1 gives trust(2) = sqrt(0+1) × 1/3 × 1,
	// pass 2 changes nothing.
	b := s.Agent(agent(2), false)
	if b.WeightedScore != 0.333333 || b.ScoreIn != 1 || b.VoterCount != 1 || b.Rank != 1 {
		t.Fatalf("target: %+v", b)
	}
	if s.Iterations != 2 || !s.Converged {
		t.Fatalf("iterations %d converged %v", s.Iterations, s.Converged)
	}
	a := s.Agent(agent(1), false)
	if a.ScoreOut != 1 || a.WeightedScore != 0 || a.Rank != 0 || len(a.Votes) != 0 {
		t.Fatalf("voter: %+v", a)
	}
	if len(b.Votes) != 1 || b.Votes[0].From != agent(1) || b.Votes[0].Reason != "good" || b.Votes[0].CreatedAt != t0 {
		t.Fatalf("votes: %+v", b.Votes)
	}
	if w := s.Weight(agent(2)); math.Abs(w-math.Sqrt(1.333333)) > 1e-12 {
		t.Fatalf("weight %v", w)
	}
}

// TestFeedbackByHand: agent 1 votes +1 on 2, 3 and 4 (sybil 1); agent 2
// votes +1 on 1 thirty days earlier (c = 0.5, sybil 1/3). The graph reduces
// to trust(1) = sqrt(1+trust(2)) × 1/3 × 0.5 and trust(2..4) =
// sqrt(1+trust(1)).
func TestFeedbackByHand(t *testing.T) {
	g := NewGraph(Options{})
	addAll(g, established(1))
	g.Add(vote(1, t0, 1, "", 2, 3, 4))
	g.Add(vote(2, t0-30*86400, 1, "", 1))
	s := g.Compute(t0)

	a, b := 0.0, 0.0
	iterations, converged := 0, false
	for iterations < MaxIterations && !converged {
		iterations++
		na, nb := math.Sqrt(1+b)/3*0.5, math.Sqrt(1+a)
		converged = math.Max(math.Abs(na-a), math.Abs(nb-b)) < Tolerance
		a, b = na, nb
	}
	// The first passes, worked by hand: 1/6, 1; then sqrt(2)/6, sqrt(7/6).
	if got := s.Agent(agent(1), false); !near(got.WeightedScore, a) || got.ScoreIn != 0.5 || got.ScoreOut != 3 {
		t.Fatalf("agent 1: %+v, want weighted %v", got.Summary, a)
	}
	for _, i := range []int{2, 3, 4} {
		if got := s.Agent(agent(i), false); !near(got.WeightedScore, b) || got.ScoreIn != 1 {
			t.Fatalf("agent %d: %+v, want weighted %v", i, got.Summary, b)
		}
	}
	if s.Iterations != iterations || s.Converged != converged {
		t.Fatalf("iterations %d/%v, want %d/%v", s.Iterations, s.Converged, iterations, converged)
	}
	// Ties on 2, 3, 4 rank by agent id; 1 ranks last.
	ids := []string{agent(2), agent(3), agent(4)}
	if strings.Compare(ids[0], ids[1]) > 0 {
		ids[0], ids[1] = ids[1], ids[0]
	}
	if strings.Compare(ids[1], ids[2]) > 0 {
		ids[1], ids[2] = ids[2], ids[1]
	}
	if strings.Compare(ids[0], ids[1]) > 0 {
		ids[0], ids[1] = ids[1], ids[0]
	}
	for r, id := range ids {
		if s.Rank(id) != r+1 {
			t.Fatalf("rank of %s is %d, want %d", id[:8], s.Rank(id), r+1)
		}
	}
	if s.Rank(agent(1)) != 4 || s.RankedCount() != 4 {
		t.Fatalf("rank of 1: %d of %d", s.Rank(agent(1)), s.RankedCount())
	}
	rows := s.TrustGraph(0, 0)
	if len(rows) != 4 || rows[0].AgentID != ids[0] || rows[3].AgentID != agent(1) {
		t.Fatalf("trust graph %+v", rows)
	}
	if page := s.TrustGraph(1, 2); len(page) != 2 || page[0].AgentID != ids[1] {
		t.Fatalf("page %+v", page)
	}
}

func TestNegativeVoteSilencesVoter(t *testing.T) {
	g := NewGraph(Options{})
	addAll(g, established(1, 2, 3, 4))
	// Agents 1, 2, 3 each vote −1 on 4, 5 and 6 (sybil 1): trust(4) = −3
	// after pass 1. Agent 4's own vote on 7 then weighs sqrt(max(0, −3+1)) = 0.
	for _, v := range []int{1, 2, 3} {
		g.Add(vote(v, t0, -1, "", 4, 5, 6))
	}
	g.Add(vote(4, t0, 1, "", 7))
	s := g.Compute(t0)
	if got := s.Agent(agent(4), false); got.WeightedScore != -3 || got.ScoreIn != -3 || got.VoterCount != 3 {
		t.Fatalf("agent 4: %+v", got.Summary)
	}
	if got := s.Agent(agent(7), false); got.WeightedScore != 0 || got.ScoreIn != 1 || got.Rank != 0 || got.VoterCount != 1 {
		t.Fatalf("agent 7: %+v", got.Summary)
	}
	if s.Weight(agent(4)) != 0 || s.Weight(agent(99)) != 1 {
		t.Fatalf("weights %v %v", s.Weight(agent(4)), s.Weight(agent(99)))
	}
	// Negative scores still rank (after every positive one).
	if s.Rank(agent(4)) == 0 || s.RankedCount() != 3 {
		t.Fatalf("rank %d of %d", s.Rank(agent(4)), s.RankedCount())
	}
}

func TestLatestVoteWins(t *testing.T) {
	first := vote(1, t0-300, 1, "first", 2)
	second := vote(1, t0-200, -0.5, "second", 2)
	withdraw := vote(1, t0-100, 0, "withdrawn", 2)
	for _, order := range [][]*protocol.Event{{first, second, withdraw}, {withdraw, first, second}, {second, withdraw, first}} {
		g := NewGraph(Options{})
		for _, e := range order[:2] {
			g.Add(e)
		}
		for _, e := range order[2:] {
			g.Add(e)
		}
		s := g.Compute(t0)
		got := s.Agent(agent(2), false)
		if got.VoterCount != 0 || got.ScoreIn != 0 || len(got.Votes) != 0 || s.GraphLen() != 0 {
			t.Fatalf("withdrawn vote still counts: %+v", got)
		}
		all := s.Agent(agent(2), true)
		if len(all.Votes) != 1 || all.Votes[0].Score != 0 || all.Votes[0].EventID != withdraw.ID {
			t.Fatalf("include_withdrawn: %+v", all.Votes)
		}
		if out := s.Agent(agent(1), false); out.ScoreOut != 0 {
			t.Fatalf("score_out counts a withdrawal: %+v", out.Summary)
		}
		// Revoking the withdrawal brings back the −0.5 vote.
		g.Remove(withdraw)
		s = g.Compute(t0)
		got = s.Agent(agent(2), false)
		if len(got.Votes) != 1 || got.Votes[0].Score != -0.5 || got.Votes[0].Reason != "second" || !near(got.ScoreIn, -0.5*math.Exp(-math.Ln2*200/86400/30)) {
			t.Fatalf("after revoke: %+v", got)
		}
		if out := s.Agent(agent(1), false); out.ScoreOut != -0.5 {
			t.Fatalf("score_out %+v", out.Summary)
		}
		g.Remove(second)
		g.Remove(second) // a second removal changes nothing
		if got = g.Compute(t0).Agent(agent(2), false); got.Votes[0].Score != 1 {
			t.Fatalf("after second revoke: %+v", got.Votes)
		}
		g.Remove(first)
		if got = g.Compute(t0).Agent(agent(2), true); len(got.Votes) != 0 {
			t.Fatalf("after last revoke: %+v", got.Votes)
		}
	}
}

func TestSameSecondVotesOrderByID(t *testing.T) {
	a := vote(1, t0, 1, "a", 2)
	b := vote(1, t0, -1, "b", 2)
	want := a
	if b.ID > a.ID {
		want = b
	}
	for _, order := range [][2]*protocol.Event{{a, b}, {b, a}} {
		g := NewGraph(Options{})
		g.Add(order[0])
		g.Add(order[1])
		if got := g.Compute(t0).Agent(agent(2), false).Votes; len(got) != 1 || got[0].EventID != want.ID {
			t.Fatalf("latest of a same-second pair: %+v, want %s", got, want.ID)
		}
	}
}

func TestVoteTargetsAndSelfVotes(t *testing.T) {
	g := NewGraph(Options{})
	addAll(g, established(1))
	e := vote(1, t0, 1, "", 2, 3, 2, 1) // duplicate target and a self-vote
	e.Tags = append(e.Tags, []string{"p", "not-hex"})
	e.Sign(key(1))
	g.Add(e)
	g.Add(vote(5, t0, 1, "", 5)) // only a self-vote: ignored
	s := g.Compute(t0)
	// Two real targets: sybil(1) = 2/3.
	for _, i := range []int{2, 3} {
		if got := s.Agent(agent(i), false); got.WeightedScore != 0.666667 || got.VoterCount != 1 {
			t.Fatalf("agent %d: %+v", i, got.Summary)
		}
	}
	if got := s.Agent(agent(1), false); got.ScoreOut != 2 || got.VoterCount != 0 {
		t.Fatalf("self-vote counted: %+v", got.Summary)
	}
	if _, ok := s.Summary(agent(5)); ok {
		t.Fatal("an agent with only a self-vote appears in the graph")
	}
}

func TestIgnoresOtherKindsAndBadContent(t *testing.T) {
	g := NewGraph(Options{})
	g.Add(post(1, t0, `{"score":1}`))
	bad := signed(1, t0, protocol.KindTrustVote, `{"score":2}`, [][]string{{"p", agent(2)}})
	g.Add(bad)
	if g.Version() != 0 || g.Compute(t0).GraphLen() != 0 {
		t.Fatal("a post or an invalid vote changed the graph")
	}
}

func TestDecayAndEvalTime(t *testing.T) {
	if EvalTime(t0+59) != t0 || EvalTime(t0) != t0 || EvalTime(t0-1) != t0-60 {
		t.Fatal("EvalTime does not round down to the minute")
	}
	g := NewGraph(Options{})
	g.Add(vote(1, t0-60*86400, 1, "", 2))    // two half-lives: 0.25
	g.Add(vote(3, t0+120, 1, "", 2))         // from the future: age 0
	g.Add(vote(4, t0-15*86400, -0.8, "", 2)) // −0.8/sqrt(2)
	want := 0.25 + 1 - 0.8/math.Sqrt2
	for _, now := range []int64{t0, t0 + 30, t0 + 59} {
		s := g.Compute(now)
		if s.Now != t0 || !near(s.Agent(agent(2), false).ScoreIn, want) {
			t.Fatalf("at %d: now %d score_in %v, want %v", now, s.Now, s.Agent(agent(2), false).ScoreIn, want)
		}
	}
	if g.Digest(t0+1) != g.Digest(t0+59) || g.Digest(t0) == g.Digest(t0+60) {
		t.Fatal("digest is not a function of the evaluation minute")
	}
}

func TestDetExpMatchesMath(t *testing.T) {
	for x := -50.0; x <= 5; x += 0.00137 {
		got, want := detExp(x), math.Exp(x)
		if math.Abs(got-want) > 2*math.Abs(want)*0x1p-52 {
			t.Fatalf("detExp(%v) = %v, math.Exp = %v", x, got, want)
		}
	}
	if detExp(0) != 1 || detExp(-800) != 0 || !math.IsInf(detExp(800), 1) || !math.IsNaN(detExp(math.NaN())) {
		t.Fatal("special cases")
	}
	if decay(30*86400) != 0.5 || decay(-5) != 1 || decay(0) != 1 {
		t.Fatalf("decay at the half-life: %v", decay(30*86400))
	}
}

func TestTopPercent(t *testing.T) {
	g := NewGraph(Options{})
	// 21 targets with distinct weighted scores: agent 100+i gets votes from i+1
	// distinct voters, each voting on three targets (sybil 1).
	for i := 0; i < 21; i++ {
		for v := 0; v <= i; v++ {
			g.Add(vote(200+v*30+i, t0, 1, "", 100+i, 400, 401))
		}
	}
	s := g.Compute(t0)
	// 23 ranked agents: 400 and 401 (every vote) first, then 120 down to 100.
	// Top 5% is ceil(1.15) = 2 ranks, top 10% is ceil(2.3) = 3.
	if n := s.RankedCount(); n != 23 {
		t.Fatalf("%d ranked", n)
	}
	for _, c := range []struct {
		agent, percent int
		want           bool
	}{{400, 5, true}, {401, 5, true}, {120, 5, false}, {120, 10, true}, {119, 10, false},
		{100, 100, true}, {100, 95, false}, {999, 100, false}} {
		if got := s.InTopPercent(agent(c.agent), c.percent); got != c.want {
			t.Fatalf("agent %d (rank %d) in top %d%%: %v", c.agent, s.Rank(agent(c.agent)), c.percent, got)
		}
	}
	if s.Rank(agent(120)) != 3 || s.Rank(agent(100)) != 23 {
		t.Fatalf("ranks %d %d", s.Rank(agent(120)), s.Rank(agent(100)))
	}
}

func TestTrustReceived(t *testing.T) {
	g := NewGraph(Options{})
	long := strings.Repeat("é", 150)
	g.Add(vote(1, t0-500, 1, long, 9))
	g.Add(vote(2, t0-400, 0.5, "ok", 9))
	g.Add(vote(3, t0-300, -0.25, "meh", 9))
	g.Add(vote(4, t0-200, 0.75, "old", 9))
	g.Add(vote(4, t0-100, 0, "withdrawn", 9)) // 4's latest is a withdrawal
	g.Add(vote(5, t0-50, 0.1, "new", 8))      // another target
	r := g.TrustReceived(agent(9), 0, -1, 0)
	if r.Count != 3 || r.ScoreSum != 1.25 || r.Votes[0].Voter != agent(3) || r.Votes[2].Voter != agent(1) {
		t.Fatalf("all: %+v", r)
	}
	if got := r.Votes[2].Reason; len([]rune(got)) != MaxReasonRunes {
		t.Fatalf("reason has %d runes", len([]rune(got)))
	}
	if r = g.TrustReceived(agent(9), t0-450, -1, 0); r.Count != 2 || r.ScoreSum != 0.25 {
		t.Fatalf("since: %+v", r)
	}
	if r = g.TrustReceived(agent(9), 0, 0.5, 0); r.Count != 2 || r.ScoreSum != 1.5 {
		t.Fatalf("min_score: %+v", r)
	}
	if r = g.TrustReceived(agent(9), 0, -1, 1); r.Count != 1 || r.Votes[0].Voter != agent(3) || r.ScoreSum != -0.25 {
		t.Fatalf("limit: %+v", r)
	}
	if r = g.TrustReceived(agent(77), 0, -1, 0); r.Count != 0 || r.Votes == nil {
		t.Fatalf("unknown agent: %+v", r)
	}
}

func TestAtReusesOnlyAnExactSnapshot(t *testing.T) {
	g := NewGraph(Options{})
	g.Add(vote(1, t0, 1, "", 2))
	if s := g.Refresh(t0 + 10); s.Now != t0+10 {
		t.Fatalf("Refresh evaluated at %d, not at the second asked", s.Now-t0)
	}
	pub := g.Refresh(t0)
	if g.At(t0+50) != pub || g.Latest() != pub || g.Refresh(t0) != pub {
		t.Fatal("At or Refresh recomputed the published snapshot")
	}
	if s := g.At(t0 + 60); s == pub || s.Now != t0+60 || g.Latest() != pub {
		t.Fatal("At served another minute, or published")
	}
	g.Add(vote(3, t0, 1, "", 2))
	if s := g.At(t0); s == pub || s.Version != g.Version() || s.Agent(agent(2), false).VoterCount != 2 {
		t.Fatal("At served a stale version")
	}
}

func addAll(g *Graph, evs []*protocol.Event) {
	for _, e := range evs {
		g.Add(e)
	}
}

// TestNewAgentPenaltyByHand: a voter first seen (its earliest kind 0 or
// counted vote) age seconds before the evaluation time votes with 0.5 +
// 0.5 × min(1, age / 14 days) of its weight (seed §6 sybil_penalty); its
// ramp starts at its earliest sighting, moves with a revocation of it, and
// ends after NewAgentRamp.
func TestNewAgentPenaltyByHand(t *testing.T) {
	g := NewGraph(Options{})
	v := vote(1, t0, 1, "", 2, 3, 4) // sybil 1
	g.Add(v)
	for _, c := range []struct {
		at   int64
		want float64
	}{{t0, 0.5}, {t0 + 7*86400, 0.75}, {t0 + 14*86400, 1}, {t0 + 60*86400, 1}} {
		// The vote decays too: c = exp(−ln2 × age_days / 30).
		want := c.want * math.Exp(-math.Ln2*float64(c.at-t0)/86400/30)
		if got := g.Compute(c.at).WeightedScore(agent(2)); !near(got, want) {
			t.Fatalf("at +%d d: %v, want %v", (c.at-t0)/86400, got, want)
		}
	}
	old := signed(1, t0-7*86400, protocol.KindProfile, `{"name":"one"}`, nil)
	g.Add(old) // first seen a week earlier: 0.75 at t0
	if got := g.Compute(t0).WeightedScore(agent(2)); !near(got, 0.75) {
		t.Fatalf("with an older profile: %v", got)
	}
	g.Remove(old) // revoked: back to the vote's date
	if got := g.Compute(t0).WeightedScore(agent(2)); !near(got, 0.5) {
		t.Fatalf("after revoking the profile: %v", got)
	}
}
