package tasks

import (
	"encoding/json"
	"sort"

	"github.com/anp2net/relay/protocol"
)

// TaskView is one task as GET /task/{id} and the A2A adapter serve it. Event
// payloads (input, output, reasons) are not copied: the events are in the
// store under the ids given here.
type TaskView struct {
	TaskID      string          `json:"task_id"`
	Status      Status          `json:"status"`
	Phase       string          `json:"phase,omitempty"` // "demo" for mocked payments
	Requester   string          `json:"requester"`
	Capability  string          `json:"capability"`
	CreatedAt   int64           `json:"created_at"`
	Deadline    int64           `json:"deadline_unix"`
	HighStakes  bool            `json:"high_stakes"`
	Reward      json.RawMessage `json:"reward,omitempty"`
	Constraints json.RawMessage `json:"constraints,omitempty"`
	Provider    string          `json:"provider,omitempty"`
	Accept      *Bid            `json:"accept"`
	LosingBids  []Bid           `json:"losing_bids"`
	Result      *ResultRef      `json:"result"`
	Verdicts    []Verdict       `json:"verdicts"`
	Consensus   Consensus       `json:"consensus"`
	Payment     *Payment        `json:"payment"`
	Cancel      *EventRef       `json:"cancel"`
	// Events summarises the thread, each event with whether it counts
	// (GET /task serves the events themselves under "events").
	Events  []EventRef   `json:"event_refs"`
	History []Transition `json:"history"`
}

// Bid is a kind 51: the winning accept or a losing bid.
type Bid struct {
	EventID    string               `json:"event_id"`
	Provider   string               `json:"provider"`
	CreatedAt  int64                `json:"created_at"`
	PriceQuote *protocol.PriceQuote `json:"price_quote,omitempty"`
	EtaUnix    int64                `json:"eta_unix,omitempty"`
	Reason     string               `json:"reason,omitempty"` // losing_bid, after_cancel or a price rule code
}

// ResultRef is the counting kind 52.
type ResultRef struct {
	EventID      string `json:"event_id"`
	CreatedAt    int64  `json:"created_at"`
	OutputFormat string `json:"output_format,omitempty"`
	// AcceptInferred is true when the result carries no accept e tag and is
	// attributed to the winning accept because its author is the provider
	// (the live network's shape, SPEC §5.3).
	AcceptInferred bool `json:"accept_inferred,omitempty"`
}

// Verdict is a well-formed kind 53, counting or not.
type Verdict struct {
	EventID   string   `json:"event_id"`
	Verifier  string   `json:"verifier"`
	CreatedAt int64    `json:"created_at"`
	Verdict   string   `json:"verdict"`
	Score     *float64 `json:"score"`
	// Weight is what the verdict carries in the consensus: 1 for a counting
	// verdict of an ordinary task, the verifier's weight for a high-stakes
	// one, 0 when it does not count.
	Weight float64 `json:"weight"`
	Counts bool    `json:"counts"`
	Reason string  `json:"reason,omitempty"`
}

// Consensus is the verdict the counting kind 53 reach.
type Consensus struct {
	Verdict   string         `json:"verdict"` // passed, failed, disputed or "" (none yet)
	Score     *float64       `json:"score"`
	Rule      string         `json:"rule"`      // "unanimous" or "m_of_n"
	Verifiers int            `json:"verifiers"` // N: neutral verifiers with a counting verdict (high-stakes: of positive weight)
	Threshold int            `json:"threshold,omitempty"`
	Counts    map[string]int `json:"counts"`
	// Weights sums the counting weights per verdict (high-stakes only).
	Weights   map[string]float64 `json:"weights,omitempty"`
	WindowEnd int64              `json:"window_end,omitempty"`
	// EventID names the verdict that made the current consensus.
	EventID string `json:"event_id,omitempty"`
}

// Payment is the counting kind 54.
type Payment struct {
	EventID         string `json:"event_id"`
	CreatedAt       int64  `json:"created_at"`
	Disposition     string `json:"disposition"`
	PaymentMethod   string `json:"payment_method"`
	Amount          string `json:"amount,omitempty"`
	Currency        string `json:"currency,omitempty"`
	TxHash          string `json:"tx_hash,omitempty"`
	PaymentProofURL string `json:"payment_proof_url,omitempty"`
}

// EventRef is one event of the task's thread and whether it counts.
type EventRef struct {
	EventID   string `json:"event_id"`
	Kind      int64  `json:"kind"`
	AgentID   string `json:"agent_id"`
	CreatedAt int64  `json:"created_at"`
	Counts    bool   `json:"counts"`
	Reason    string `json:"reason,omitempty"`
}

// Transition is one entry of a task's status history.
type Transition struct {
	Status  Status `json:"status"`
	At      int64  `json:"at"`
	EventID string `json:"event_id,omitempty"` // empty for deadline and window transitions
	Verdict string `json:"verdict,omitempty"`  // the consensus, on verified and disputed
}

// Reasons an event does not count. An event whose content breaks its kind
// rule (stored from a peer or an import, D15) has the reason ReasonInvalid
// + ": " + the rule's code, e.g. "content_invalid: missing_tag"; an accept
// that breaks the §18.4 price rule has the rule's code
// (price_exceeds_max_cost, price_exceeds_reward).
const (
	ReasonInvalid       = "content_invalid"
	ReasonLosingBid     = "losing_bid"
	ReasonAfterCancel   = "after_cancel"
	ReasonCancelled     = "task_cancelled"
	ReasonNoAccept      = "no_accept"
	ReasonNotProvider   = "not_provider"
	ReasonNotRequester  = "not_requester"
	ReasonAfterDeadline = "after_deadline"
	ReasonAfterAccept   = "after_accept"
	ReasonAfterWindow   = "after_window"
	ReasonSuperseded    = "superseded"
	ReasonByRequester   = "by_requester"
	ReasonByProvider    = "by_provider"
	ReasonNoResult      = "no_result"
	ReasonZeroWeight    = "zero_weight"
)

// Filter selects tasks for List. Empty fields match everything.
type Filter struct {
	Capability string
	Status     Status
	Requester  string
	Provider   string
	Limit      int // at most this many; <= 0 means all
}

// Task returns the task with id at time now under weights w; false when no
// valid kind 50 with that id is in the fold.
func (f *Fold) Task(id string, now int64, w WeightFunc) (TaskView, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	t := f.lookup(id)
	if t == nil {
		return TaskView{}, false
	}
	return f.view(t, now, w), true
}

// List returns the tasks matching filter, newest first (by the request's
// (created_at, id), descending), at time now under weights w.
func (f *Fold) List(filter Filter, now int64, w WeightFunc) []TaskView {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := []TaskView{}
	for i := len(f.order) - 1; i >= 0; i-- {
		if filter.Limit > 0 && len(out) >= filter.Limit {
			break
		}
		t := f.order[i]
		if filter.Capability != "" && t.request.Capability != filter.Capability ||
			filter.Requester != "" && f.names[t.req.agent] != filter.Requester {
			continue
		}
		d := t.derive()
		if filter.Provider != "" && (d.accept == nil || f.names[d.accept.agent] != filter.Provider) {
			continue
		}
		if filter.Status != "" && f.buildTimeline(t, d, f.finalOutcome(d, w), nil, now, false).status != filter.Status {
			continue
		}
		out = append(out, f.view(t, now, w))
	}
	return out
}

// view assembles a TaskView; the caller holds the read lock.
func (f *Fold) view(t *task, now int64, w WeightFunc) TaskView {
	d := t.derive()
	ru := f.consensusRun(d, w)
	tl := f.buildTimeline(t, d, ru.final, ru.steps, now, true)
	req := t.request
	v := TaskView{
		TaskID:      hexID(t.id),
		Status:      tl.status,
		Requester:   f.names[t.req.agent],
		Capability:  req.Capability,
		CreatedAt:   t.req.at,
		Deadline:    req.Deadline,
		HighStakes:  req.HighStakes,
		Reward:      req.RewardJSON,
		Constraints: req.Constraints,
		LosingBids:  []Bid{},
		Verdicts:    []Verdict{},
		History:     tl.history,
		Consensus:   f.consensusView(d, ru),
	}
	if req.Reward.PaymentMethod == protocol.PaymentMocked ||
		d.payment != nil && d.payment.payment().PaymentMethod == protocol.PaymentMocked {
		v.Phase = "demo"
	}
	if d.accept != nil {
		v.Provider = f.names[d.accept.agent]
	}
	if d.result != nil {
		rr := d.result.result()
		v.Result = &ResultRef{EventID: hexID(d.result.id), CreatedAt: d.result.at, OutputFormat: rr.OutputFormat, AcceptInferred: rr.AcceptID == ""}
	}
	if p := d.payment; p != nil {
		pp := p.payment()
		v.Payment = &Payment{EventID: hexID(p.id), CreatedAt: p.at, Disposition: pp.Disposition, PaymentMethod: pp.PaymentMethod,
			Amount: pp.Amount, Currency: pp.Currency, TxHash: pp.TxHash, PaymentProofURL: pp.PaymentProofURL}
	}
	if c := d.cancel; c != nil {
		ref := f.eventRef(c, true, "")
		v.Cancel = &ref
	}
	f.threadViews(&v, t, d, ru)
	return v
}

func (f *Fold) consensusView(d *derivation, ru *run) Consensus {
	o := ru.final
	c := Consensus{Verdict: o.verdict, Score: ru.score, Rule: "unanimous", Verifiers: o.n, Counts: map[string]int{}}
	for i, name := range verdictOrder {
		c.Counts[name] = o.counts[i]
	}
	if d.highStakes {
		c.Rule = "m_of_n"
		c.Threshold = max(3, (51*o.n+99)/100)
		c.WindowEnd = d.windowEnd
		c.Weights = map[string]float64{}
		for i, name := range verdictOrder {
			c.Weights[name] = round6(float64(o.weights[i]) / 1e6)
		}
	}
	if n := len(ru.steps); n > 0 && o.verdict != "" {
		c.EventID = hexID(ru.steps[n-1].r.id)
	}
	return c
}

// threadViews fills the bids, verdicts and the event list with each event's
// standing.
func (f *Fold) threadViews(v *TaskView, t *task, d *derivation, ru *run) {
	v.Events = append(v.Events, f.eventRef(t.req, true, ""))
	for kind := int64(protocol.KindTaskAccept); kind <= protocol.KindTaskCancel; kind++ {
		for _, r := range t.list(kind) {
			counts, reason := f.standing(t, d, ru, r)
			v.Events = append(v.Events, f.eventRef(r, counts, reason))
			if !r.valid {
				continue
			}
			switch kind {
			case protocol.KindTaskAccept:
				a := r.accept()
				b := Bid{EventID: hexID(r.id), Provider: f.names[r.agent], CreatedAt: r.at, EtaUnix: a.EtaUnix}
				if a.HasQuote {
					b.PriceQuote = &a.PriceQuote
				}
				if r == d.accept {
					v.Accept = &b
				} else {
					b.Reason = reason
					v.LosingBids = append(v.LosingBids, b)
				}
			case protocol.KindTaskVerify:
				v.Verdicts = append(v.Verdicts, f.verdictView(d, ru, r, counts, reason))
			}
		}
	}
	sortEventRefs(v.Events)
}

func (f *Fold) verdictView(d *derivation, ru *run, r *rec, counts bool, reason string) Verdict {
	vv := r.verify()
	out := Verdict{EventID: hexID(r.id), Verifier: f.names[r.agent], CreatedAt: r.at, Verdict: vv.Verdict, Counts: counts, Reason: reason}
	if vv.HasScore {
		s := round6(vv.Score)
		out.Score = &s
	}
	if counts {
		out.Weight = 1
		if d.highStakes {
			out.Weight = round6(float64(ru.weights[r.agent]) / 1e6)
		}
	}
	return out
}

// standing says whether r counts and, when it does not, why. It restates
// the derivation's choices record by record.
func (f *Fold) standing(t *task, d *derivation, ru *run, r *rec) (bool, string) {
	if !r.valid {
		return false, ReasonInvalid + ": " + r.invalid
	}
	requester := t.req.agent
	switch int64(r.kind) {
	case protocol.KindTaskAccept:
		switch {
		case r == d.accept:
			return true, ""
		case d.cancel != nil:
			return false, ReasonAfterCancel
		}
		if code := priceViolation(r, t.request); code != "" {
			return false, code
		}
		return false, ReasonLosingBid
	case protocol.KindTaskCancel:
		switch {
		case r == d.cancel:
			return true, ""
		case r.agent != requester:
			return false, ReasonNotRequester
		case d.cancel == nil:
			return false, ReasonAfterAccept
		}
		return false, ReasonSuperseded
	}
	if d.cancel != nil {
		return false, ReasonCancelled
	}
	switch int64(r.kind) {
	case protocol.KindTaskResult:
		return f.resultStanding(t, d, r)
	case protocol.KindPayment:
		switch {
		case r == d.payment:
			return true, ""
		case r.agent != requester:
			return false, ReasonNotRequester
		case d.accept == nil:
			return false, ReasonNoAccept
		}
		return false, ReasonSuperseded
	}
	return verdictStanding(t, d, ru, r)
}

func (f *Fold) resultStanding(t *task, d *derivation, r *rec) (bool, string) {
	switch {
	case r == d.result:
		return true, ""
	case d.accept == nil:
		return false, ReasonNoAccept
	case r.agent != d.accept.agent:
		return false, ReasonNotProvider
	case r.at > t.request.Deadline:
		return false, ReasonAfterDeadline
	}
	return false, ReasonSuperseded
}

func verdictStanding(t *task, d *derivation, ru *run, r *rec) (bool, string) {
	switch {
	case r.agent == t.req.agent:
		return false, ReasonByRequester
	case d.accept != nil && r.agent == d.accept.agent:
		return false, ReasonByProvider
	case d.result == nil:
		return false, ReasonNoResult
	case d.highStakes && r.at > d.windowEnd:
		return false, ReasonAfterWindow
	case d.highStakes && ru.weights[r.agent] == 0:
		return false, ReasonZeroWeight
	}
	if ru.latestBy[r.agent] == r {
		return true, ""
	}
	return false, ReasonSuperseded
}

func (f *Fold) eventRef(r *rec, counts bool, reason string) EventRef {
	return EventRef{EventID: hexID(r.id), Kind: int64(r.kind), AgentID: f.names[r.agent], CreatedAt: r.at, Counts: counts, Reason: reason}
}

func sortEventRefs(l []EventRef) {
	sort.Slice(l, func(i, j int) bool {
		if l[i].CreatedAt != l[j].CreatedAt {
			return l[i].CreatedAt < l[j].CreatedAt
		}
		return l[i].EventID < l[j].EventID
	})
}
