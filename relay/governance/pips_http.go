package governance

import (
	"encoding/json"
	"math"
	"net/http"
	"slices"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay"
	"github.com/anp2net/relay/relay/eventlog"
	"github.com/anp2net/relay/relay/httpx"
	"github.com/labstack/echo/v4"
)

// maxThread caps the replies GET /pips/{number} returns.
const maxThread = 1000

// Supporter is one endorser of a proposal with its trust.
type Supporter struct {
	AgentID       string  `json:"agent_id"`
	WeightedScore float64 `json:"weighted_score"`
	// Counts is true when the supporter is trusted (weighted score > 0).
	Counts bool `json:"counts"`
}

// Approval is §14.3's tally at one time.
type Approval struct {
	Weight     float64     `json:"approval_weight"`
	Threshold  float64     `json:"approval_threshold"`
	Total      float64     `json:"total_trusted_weight"`
	Ratio      float64     `json:"approval_ratio"`
	Supporters []Supporter `json:"supporters"`
}

// Requirements says which of acceptance's conditions hold.
type Requirements struct {
	MinDiscussionDays int  `json:"min_discussion_days"`
	DiscussionMet     bool `json:"discussion_period_met"`
	ReferenceImplMet  bool `json:"reference_impl_present"`
	ThresholdMet      bool `json:"threshold_met"`
}

// PIPView is a proposal as GET /pips and /pips/{number} serve it.
type PIPView struct {
	*Record
	Status           string       `json:"status"`
	DaysInDiscussion float64      `json:"days_in_discussion"`
	FinalCallEndsAt  int64        `json:"final_call_ends_at,omitempty"`
	Approval         Approval     `json:"approval"`
	Requirements     Requirements `json:"requirements"`
	At               int64        `json:"at"`
}

// Trusted is the trust view a PIP's status needs: every trusted agent's
// weighted score (> 0).
type Trusted map[string]float64

// Evaluate derives r's status at now under the trusted agents' scores
// (SPEC §10.7): accepted when in discussion or final call for at least 14
// days, with a reference implementation, and trusted supporters holding at
// least three quarters of the total trusted weight; rejected when a final
// call of 7 days ends without that; otherwise the declared status.
func Evaluate(r *Record, now int64, trusted Trusted) PIPView {
	v := PIPView{Record: r, Status: r.Declared, At: now, Requirements: Requirements{MinDiscussionDays: MinDiscussion / 86400}}
	for _, w := range trusted {
		v.Approval.Total += w
	}
	v.Approval.Supporters = []Supporter{}
	for _, s := range r.Supporters {
		w := trusted[s]
		v.Approval.Supporters = append(v.Approval.Supporters, Supporter{s, w, w > 0})
		v.Approval.Weight += w
	}
	v.Approval.Threshold = ApprovalFraction * v.Approval.Total
	if v.Approval.Total > 0 {
		v.Approval.Ratio = round6(v.Approval.Weight / v.Approval.Total)
	}
	v.Approval.Weight, v.Approval.Total, v.Approval.Threshold = round6(v.Approval.Weight), round6(v.Approval.Total), round6(v.Approval.Threshold)
	if r.Declared != StatusDiscussion && r.Declared != StatusFinalCall {
		return v
	}
	v.DaysInDiscussion = round6(float64(max(0, now-r.DiscussionSince)) / 86400)
	v.Requirements.DiscussionMet = now-r.DiscussionSince >= MinDiscussion
	v.Requirements.ReferenceImplMet = r.ReferenceImpl != ""
	v.Requirements.ThresholdMet = v.Approval.Total > 0 && v.Approval.Weight >= v.Approval.Threshold
	if r.FinalCallSince != 0 {
		v.FinalCallEndsAt = max(r.FinalCallSince+FinalCallPeriod, r.DiscussionSince+MinDiscussion)
	}
	switch {
	case v.Requirements.DiscussionMet && v.Requirements.ReferenceImplMet && v.Requirements.ThresholdMet:
		v.Status = StatusAccepted
	case v.FinalCallEndsAt != 0 && now >= v.FinalCallEndsAt:
		v.Status = StatusRejected
	}
	return v
}

func round6(f float64) float64 { return math.Round(f*1e6) / 1e6 }

// Records returns every proposal's trust-independent record, by number.
func (f *Fold) Records() []*Record { return f.pips.records() }

// trusted returns the current trust view's trusted agents.
func (m *Module) trusted(now int64) Trusted {
	snap := m.core.Views().Trust.Current(now)
	out := Trusted{}
	for _, s := range snap.TrustGraph(0, snap.GraphLen()) {
		if s.WeightedScore > 0 {
			out[s.AgentID] = s.WeightedScore
		}
	}
	return out
}

// PIPs returns every proposal evaluated at now.
func (m *Module) PIPs(now int64) []PIPView {
	tr := m.trusted(now)
	recs := m.fold.Records()
	out := make([]PIPView, 0, len(recs))
	for _, r := range recs {
		out = append(out, Evaluate(r, now, tr))
	}
	return out
}

func (m *Module) mountPIPs(core *relay.Server) {
	core.Route(http.MethodGet, "/pips", m.getPIPs)
	core.Route(http.MethodGet, "/pips/:number", m.getPIP)
}

var statuses = []string{StatusDraft, StatusDiscussion, StatusFinalCall, StatusWithdrawn, StatusAccepted, StatusRejected}

// getPIPs is GET /pips[?status=&limit=].
func (m *Module) getPIPs(c echo.Context) error {
	v, err := httpx.Params(c, "status", "limit")
	if err != nil {
		return err
	}
	status := v.Get("status")
	if status != "" && !slices.Contains(statuses, status) {
		return protocol.Errorf(httpx.CodeBadParameter, "status must be one of %v", statuses)
	}
	limit, err := httpx.IntParam(v, "limit", 100, 1, 1000)
	if err != nil {
		return err
	}
	all := m.PIPs(m.core.Now())
	out := []PIPView{}
	for _, p := range all {
		if (status == "" || p.Status == status) && len(out) < int(limit) {
			out = append(out, p)
		}
	}
	return c.JSON(http.StatusOK, map[string]any{"count": len(out), "total": len(all), "pips": out})
}

// pipDetail is GET /pips/{number}: the view, the current content and the
// discussion thread.
type pipDetail struct {
	PIPView
	Content map[string]any    `json:"content"`
	Thread  []*protocol.Event `json:"thread"`
}

// getPIP is GET /pips/{number}.
func (m *Module) getPIP(c echo.Context) error {
	if _, err := httpx.Params(c); err != nil {
		return err
	}
	num := c.Param("number")
	if num == "" || len(num) > maxPIPNumber {
		return protocol.Errorf(httpx.CodeBadParameter, "pip number must be 1..%d bytes", maxPIPNumber)
	}
	now := m.core.Now()
	for _, r := range m.fold.Records() {
		if r.Number != num {
			continue
		}
		thread, err := m.thread(c, r)
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, pipDetail{PIPView: Evaluate(r, now, m.trusted(now)), Content: r.content.fields, Thread: thread})
	}
	return protocol.Errorf(relay.CodeNotFound, "no proposal %q", num)
}

// thread returns the kind 2 replies to any of r's events this reader may
// see, oldest first.
func (m *Module) thread(c echo.Context, r *Record) ([]*protocol.Event, error) {
	reader, err := m.core.Reader(c)
	if err != nil {
		return nil, err
	}
	bodies, err := m.core.Log().Query(c.Request().Context(), eventlog.Filter{Kinds: []int64{protocol.KindReply},
		Tags: map[string][]string{"e": r.EventIDs}, Limit: maxThread, Revoked: m.core.State().Revoked})
	if err != nil {
		return nil, err
	}
	out := []*protocol.Event{}
	for i := len(bodies) - 1; i >= 0; i-- {
		var e protocol.Event
		if json.Unmarshal(bodies[i], &e) == nil && m.core.Sees(reader, &e) {
			out = append(out, &e)
		}
	}
	return out, nil
}
