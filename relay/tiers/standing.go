package tiers

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/httpx"
	"github.com/anp2net/relay/relay/state"
	"github.com/anp2net/relay/tasks"
	"github.com/anp2net/relay/trust"
	"github.com/labstack/echo/v4"
)

// Standing-based PoW bypass (seed §8.2, SPEC §12.1).

// DefaultStandingThreshold is seed §8.2's STANDING_POW_BYPASS_THRESHOLD.
const DefaultStandingThreshold = 100

// StandingOptions configure the standing-based PoW bypass.
type StandingOptions struct {
	// Bypass turns the bypass on (serve --standing-pow-bypass).
	Bypass bool
	// Threshold is the confirmed provider tasks an agent needs
	// (--standing-pow-threshold, default 100).
	Threshold int
	// MinVerifiers is how many distinct neutral verifiers of positive
	// trust must have passed a task for it to count toward standing
	// (--standing-min-verifiers, default 1). Two or more is the
	// multi-verifier consensus §8.2's deployment gate asks for.
	MinVerifiers int
}

// DefaultStandingOptions is the bypass off, seed §8.2's threshold of 100
// and one verifier (no multi-verifier consensus).
func DefaultStandingOptions() StandingOptions {
	return StandingOptions{Threshold: DefaultStandingThreshold, MinVerifiers: 1}
}

// ErrNoMultiVerifier is Validate's refusal to turn the bypass on without
// multi-verifier consensus.
var ErrNoMultiVerifier = errors.New("--standing-pow-bypass needs multi-verifier consensus (seed §8.2 deployment gate, §18.6.1): set --standing-min-verifiers to 2 or more")

// Validate refuses a threshold or verifier count below 1 and, with the
// bypass on, fewer than two verifiers (ErrNoMultiVerifier).
func (o StandingOptions) Validate() error {
	if o.Threshold < 1 {
		return fmt.Errorf("--standing-pow-threshold must be at least 1, got %d", o.Threshold)
	}
	if o.MinVerifiers < 1 {
		return fmt.Errorf("--standing-min-verifiers must be at least 1, got %d", o.MinVerifiers)
	}
	if o.Bypass && o.MinVerifiers < 2 {
		return ErrNoMultiVerifier
	}
	return nil
}

// Standing is GET /agents/{agent_id}/standing: an agent's standing.v1 and
// whether it may skip the mandatory proof of work.
type Standing struct {
	AgentID string `json:"agent_id"`
	// VerifiedProviderTasks is the credit view's count (§5.4).
	VerifiedProviderTasks int64 `json:"verified_provider_tasks"`
	// ConfirmedProviderTasks counts those passed by at least MinVerifiers
	// neutral verifiers of positive trust.
	ConfirmedProviderTasks int `json:"confirmed_provider_tasks"`
	// HiddenEvents counts the agent's events moderation hides now.
	HiddenEvents  int  `json:"hidden_events"`
	Threshold     int  `json:"threshold"`
	MinVerifiers  int  `json:"min_verifiers"`
	MeetsStanding bool `json:"meets_threshold"`
	BypassEnabled bool `json:"pow_bypass_enabled"`
	// PoWBypass is true when a kind 0 or 50 by the agent may omit the
	// mandatory proof of work now.
	PoWBypass bool `json:"pow_bypass"`
}

// ConfigureStanding sets the bypass options after Validate; call it
// before the relay serves.
func (m *Module) ConfigureStanding(o StandingOptions) error {
	if err := o.Validate(); err != nil {
		return err
	}
	m.standingOpts = o
	return nil
}

// Eligible is the bypass's pre-check, run on the publish's goroutine
// outside any lock, on the preferred branch's state (SPEC §17.5): the
// credit view's verified_provider_tasks under the published trust bounds
// the confirmed count from above, so most agents are refused without
// listing their tasks; the others get the exact standing at now (trust
// computed here if the published snapshot is not the one at now), which
// is remembered with the state version it was read at for Confirm.
func (m *Module) Eligible(agent string, now int64) bool {
	st := m.core.Views()
	if st.Stale() { // a branch state awaiting its rebuild: Confirm would refuse
		return false
	}
	if st.Credit.Account(agent, now, st.Trust.Current(now).Weight).VerifiedProviderTasks < int64(m.standingOpts.Threshold) {
		return false
	}
	version := st.Version() // before any read: an Add in progress bumps it after
	ts := st.Trust.At(now)
	ok := m.standing(st, agent, now, ts, modWith(st, ts)).PoWBypass
	if ok {
		m.verdicts.put(agent, verdict{st: st, version: version, now: now, ts: ts})
	}
	return ok
}

// Confirm is the exact check, run by the log's writer with every earlier
// commit folded (the preferred branch's live state included: it is folded
// by a commit hook, and the writer waits for the hooks). It never computes
// trust: when the state's version is the one the pre-check read at, the
// pre-check's verdict stands; when only other events were folded since
// and the trust graph is unchanged, the standing is computed again with
// the pre-check's trust snapshot (moderation and tasks only); when the
// trust graph changed, or the preferred branch's state is another one or
// stale (no longer fed while its rebuild waits), the bypass is refused
// for this publish (pow_required: a retry is judged afresh by the
// pre-check). SPEC §12.1.
func (m *Module) Confirm(agent string, now int64) bool {
	st := m.core.Views()
	v, found := m.verdicts.get(agent)
	ok := false
	switch {
	case !found || v.st != st || v.now != now || st.Stale():
		m.confirmStale.Add(1)
	case st.Version() == v.version:
		ok = true
		m.confirmStood.Add(1)
	case st.Trust.Version() == v.ts.Version:
		ok = m.standing(st, agent, now, v.ts, modWith(st, v.ts)).PoWBypass
		m.confirmRecomputed.Add(1)
	default:
		m.confirmStale.Add(1)
	}
	if ok {
		m.bypassed.Add(1)
	} else {
		m.refusedAtCommit.Add(1)
	}
	return ok
}

// modWith returns st's moderation at ts.Now weighing flaggers with ts: the
// published snapshot when it is exactly that, else one computed with ts
// (no trust computation).
func modWith(st *state.State, ts *trust.Snapshot) *trust.ModSnapshot {
	if l := st.Moderation.Latest(); l != nil && l.Now == ts.Now && l.TrustVersion == ts.Version && l.Version == st.Moderation.Version() {
		return l
	}
	return st.Moderation.ComputeWith(ts)
}

// verdict is a passing pre-check: the state it read (the preferred
// branch's), that state's version before the reads, the publish's now and
// the exact trust snapshot at now it used.
type verdict struct {
	st      *state.State
	version uint64
	now     int64
	ts      *trust.Snapshot
}

// verdicts keeps the latest passing pre-check per agent (agents of high
// standing only, so it stays small). Any of them serves any publish of
// the agent at the same now: Confirm checks the versions, not whose
// pre-check it was.
type verdicts struct {
	mu sync.Mutex
	m  map[string]verdict
}

func (vs *verdicts) put(agent string, v verdict) {
	vs.mu.Lock()
	defer vs.mu.Unlock()
	if vs.m == nil {
		vs.m = map[string]verdict{}
	}
	vs.m[agent] = v
}

func (vs *verdicts) get(agent string) (verdict, bool) {
	vs.mu.Lock()
	defer vs.mu.Unlock()
	v, ok := vs.m[agent]
	return v, ok
}

// standing computes agent's standing.v1 in st at now under the trust
// snapshot ts and moderation snapshot ms.
func (m *Module) standing(st *state.State, agent string, now int64, ts *trust.Snapshot, ms *trust.ModSnapshot) Standing {
	o := m.standingOpts
	out := Standing{AgentID: agent, Threshold: o.Threshold, MinVerifiers: o.MinVerifiers, BypassEnabled: o.Bypass}
	out.VerifiedProviderTasks = st.Credit.Account(agent, now, ts.Weight).VerifiedProviderTasks
	out.HiddenEvents = len(ms.HiddenBy(agent))
	if out.VerifiedProviderTasks >= int64(o.Threshold) {
		out.ConfirmedProviderTasks = m.confirmed(st, agent, now, ts)
	}
	out.MeetsStanding = out.ConfirmedProviderTasks >= o.Threshold && out.HiddenEvents == 0
	out.PoWBypass = o.Bypass && out.MeetsStanding
	return out
}

// confirmed counts the credit tasks agent provided for someone else, with
// a positive amount, whose consensus is passed and which at least
// MinVerifiers distinct neutral verifiers of positive trust passed.
func (m *Module) confirmed(st *state.State, agent string, now int64, ts *trust.Snapshot) int {
	views := st.Tasks.List(tasks.Filter{Provider: agent}, now, ts.Weight)
	ids := make([]string, len(views))
	for i, v := range views {
		ids[i] = v.TaskID
	}
	settled := st.Tasks.Settlements(ids, ts.Weight)
	n := 0
	for i, v := range views {
		s := settled[i]
		if s.Removed || !s.Passed || s.Amount <= 0 || s.Provider != agent || s.Requester == agent {
			continue
		}
		if passedBy(v, ts) >= m.standingOpts.MinVerifiers {
			n++
		}
	}
	return n
}

// passedBy counts the distinct verifiers of positive trust whose counting
// verdict on v is passed.
func passedBy(v tasks.TaskView, ts *trust.Snapshot) int {
	seen := map[string]bool{}
	for _, d := range v.Verdicts {
		if d.Counts && d.Verdict == protocol.VerdictPassed && !seen[d.Verifier] &&
			ts.WeightedScore(d.Verifier) > 0 && ts.Weight(d.Verifier) > 0 {
			seen[d.Verifier] = true
		}
	}
	return len(seen)
}

// getStanding is GET /agents/{agent_id}/standing, from published
// snapshots (what the pre-check sees).
func (m *Module) getStanding(c echo.Context) error {
	id, err := httpx.AgentOnly(c)
	if err != nil {
		return err
	}
	now := m.core.Now()
	st := m.core.Views()
	return c.JSON(http.StatusOK, m.standing(st, id, now, st.Trust.Current(now), st.Moderation.Current(now)))
}

// bypassCounters are the bypass's figures on GET /metrics.
type bypassCounters struct {
	bypassed, refusedAtCommit atomic.Int64
	// How Confirm decided: the pre-check's verdict stood, the standing was
	// computed again with the pre-check's trust, or refused (trust or the
	// preferred branch's state changed since the pre-check).
	confirmStood, confirmRecomputed, confirmStale atomic.Int64
}

// ConfirmCounts returns how many Confirm calls let the pre-check's verdict
// stand, computed the standing again without trust, and refused a stale
// verdict (tests, metrics).
func (m *Module) ConfirmCounts() (stood, recomputed, stale int64) {
	return m.confirmStood.Load(), m.confirmRecomputed.Load(), m.confirmStale.Load()
}

// writeMetrics appends the bypass's counters to GET /metrics.
func (m *Module) writeMetrics(w io.Writer) {
	fmt.Fprintf(w, "# HELP anp2_pow_bypassed_total Publishes admitted without the mandatory PoW by standing (seed §8.2).\n# TYPE anp2_pow_bypassed_total counter\nanp2_pow_bypassed_total %d\n", m.bypassed.Load())
	fmt.Fprintf(w, "# HELP anp2_pow_bypass_refused_at_commit_total Publishes whose standing passed the pre-check but not the check under the writer lock.\n# TYPE anp2_pow_bypass_refused_at_commit_total counter\nanp2_pow_bypass_refused_at_commit_total %d\n", m.refusedAtCommit.Load())
}
