package client

import (
	"github.com/anp2net/relay/protocol"
)

// Reward is a kind 50's reward (seed §18.3, §18.11). Only PaymentMethod
// "anp2_credit" with an integer Amount moves credit on the relay (SPEC
// §5.4); CreditReward builds one.
type Reward struct {
	Currency      string `json:"currency"`
	Amount        any    `json:"amount"` // an integer for anp2_credit, else a decimal string
	PaymentMethod string `json:"payment_method"`
	EscrowMethod  string `json:"escrow_method,omitempty"`
}

// CreditReward is a reward of n credits paid in anp2_credit.
func CreditReward(n int64) Reward {
	return Reward{Currency: "credit", Amount: n, PaymentMethod: protocol.PaymentANP2Credit, EscrowMethod: "none"}
}

// TaskRequest is a kind 50 task request (seed §18.3).
type TaskRequest struct {
	Capability string // e.g. "text.reverse"
	Input      any    // any JSON value
	// MaxCostUSD bounds the accepts' price_quote (a decimal string; "" is
	// "0", which a credit task uses).
	MaxCostUSD string
	Deadline   int64 // constraints.deadline_unix
	HighStakes bool  // M-of-N verification (SPEC §5.3)
	Reward     Reward
	// Constraints adds members to constraints (accept_languages,
	// min_provider_trust …).
	Constraints map[string]any
	Tags        [][]string // extra tags, e.g. ["bootstrap_for", agent]
}

// TaskRequestEvent builds a kind 50; its id is the task_id. Sign mines its
// mandatory proof of work.
func TaskRequestEvent(r TaskRequest) *protocol.Event {
	max := r.MaxCostUSD
	if max == "" {
		max = "0"
	}
	cons := merge(map[string]any{"max_cost_usd": max, "deadline_unix": r.Deadline}, r.Constraints)
	if r.HighStakes {
		cons["high_stakes"] = true
	}
	e := Draft(protocol.KindTaskRequest, jsonText(map[string]any{
		"capability": r.Capability, "input": r.Input, "constraints": cons, "reward": r.Reward,
	}), []string{"t", r.Capability}, []string{"cap_wanted", r.Capability})
	e.Tags = append(e.Tags, r.Tags...)
	return e
}

// TaskAcceptEvent builds a kind 51 bid on the task taskID of requester:
// price_quote {"currency": "USD", "amount": priceUSD} must not exceed the
// request's max_cost_usd ("0" for a credit task); etaUnix 0 is omitted.
func TaskAcceptEvent(taskID, requester, capability, priceUSD string, etaUnix int64) *protocol.Event {
	if priceUSD == "" {
		priceUSD = "0"
	}
	m := map[string]any{"price_quote": map[string]any{"currency": "USD", "amount": priceUSD}}
	if etaUnix > 0 {
		m["eta_unix"] = etaUnix
	}
	e := Draft(protocol.KindTaskAccept, jsonText(m),
		[]string{"e", taskID, protocol.RoleRoot}, []string{"e", taskID, protocol.RoleAccept},
		[]string{"p", requester})
	if capability != "" {
		e.Tags = append(e.Tags, []string{"t", capability})
	}
	return e
}

// TaskResult is a kind 52 result (seed §18.5).
type TaskResult struct {
	TaskID    string
	AcceptID  string // the provider's winning kind 51
	Requester string
	Output    any    // any JSON value; a sealed output is its base64 string
	Format    string // output_format; "" is "json"
	RuntimeMS int64
	// Sealed is the ["sealed", nonce] tag of SealTaskOutput, nil for a
	// public output.
	Sealed []string
}

// TaskResultEvent builds a kind 52.
func TaskResultEvent(r TaskResult) *protocol.Event {
	f := r.Format
	if f == "" {
		f = "json"
	}
	e := Draft(protocol.KindTaskResult, jsonText(map[string]any{
		"task_id": r.TaskID, "output": r.Output, "output_format": f, "runtime_ms": r.RuntimeMS,
	}), []string{"e", r.TaskID, protocol.RoleRoot}, []string{"e", r.TaskID, protocol.RoleResult})
	if r.AcceptID != "" {
		e.Tags = append(e.Tags, []string{"e", r.AcceptID, protocol.RoleAccept})
	}
	e.Tags = append(e.Tags, []string{"p", r.Requester})
	if r.Sealed != nil {
		e.Tags = append(e.Tags, r.Sealed)
	}
	return e
}

// TaskVerifyEvent builds a kind 53 verdict (passed, failed or disputed)
// with score in [0, 1] on the result resultID of provider. Only verdicts
// of agents that are neither requester nor provider count (SPEC §5.3).
func TaskVerifyEvent(taskID, resultID, provider, verdict string, score float64, reasons ...string) *protocol.Event {
	if reasons == nil {
		reasons = []string{}
	}
	return Draft(protocol.KindTaskVerify, jsonText(map[string]any{
		"task_id": taskID, "verdict": verdict, "score": score, "reasons": reasons, "evidence_event_ids": []string{},
	}), []string{"e", taskID, protocol.RoleRoot}, []string{"e", taskID, protocol.RoleVerify},
		[]string{"e", resultID, protocol.RoleResult}, []string{"p", provider})
}

// Payment is a kind 54 payment release or refund (seed §18.8).
type Payment struct {
	TaskID        string
	Provider      string
	Disposition   string // release or refund; "" is release
	PaymentMethod string // e.g. anp2_credit, mocked
	Amount        string
	Currency      string
	TxHash        string
	ProofURL      string
}

// PaymentEvent builds a kind 54. It records the payment; credit moves on
// the verification consensus alone (SPEC §5.4).
func PaymentEvent(p Payment) *protocol.Event {
	d := p.Disposition
	if d == "" {
		d = protocol.DispositionRelease
	}
	return Draft(protocol.KindPayment, jsonText(map[string]any{
		"task_id": p.TaskID, "disposition": d, "payment_method": p.PaymentMethod,
		"amount": p.Amount, "currency": p.Currency, "tx_hash": p.TxHash, "payment_proof_url": p.ProofURL,
	}), []string{"e", p.TaskID, protocol.RoleRoot}, []string{"e", p.TaskID, protocol.RolePayment},
		[]string{"p", p.Provider})
}

// TaskCancelEvent builds a kind 55; it counts only from the requester and
// before any accept.
func TaskCancelEvent(taskID, reason string) *protocol.Event {
	return Draft(protocol.KindTaskCancel, jsonText(map[string]any{"task_id": taskID, "reason": reason}),
		[]string{"e", taskID, protocol.RoleRoot}, []string{"e", taskID, protocol.RoleCancel})
}
