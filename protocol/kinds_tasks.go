package protocol

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/big"
	"regexp"
	"strconv"
	"strings"
)

// Publish-time rules and parsers for the task lifecycle, kinds 50–55 (seed
// §18). The parsers are the single reading of task content: the relay's
// publish check and the tasks fold both use them, so an event the relay
// accepts is an event the fold understands.
//
// Strictness follows what the derivation needs. Fields that decide a task's
// status or its credit are strict: capability, constraints.deadline_unix,
// constraints.high_stakes, the reward, the root e tag, verdict, score and
// disposition. Fields the derivation never reads are checked for type only
// when present, so the live network's events (which omit the t tag on kinds
// 53 and 54) are accepted.

// Codes for task-rule violations.
const (
	CodeInvalidTaskContent = "invalid_task_content"
	CodeInvalidReward      = "invalid_reward"
	CodeInvalidTag         = "invalid_tag"
	CodePriceAboveMax      = "price_exceeds_max_cost"
)

// Roles of the e tags of kinds 51–55 (§18.7).
const (
	RoleRoot    = "root"
	RoleAccept  = "accept"
	RoleResult  = "result"
	RoleVerify  = "verify"
	RolePayment = "payment"
	RoleCancel  = "cancel"
)

// Payment methods (§18.3, §18.8, §18.11).
const (
	PaymentLightning  = "lightning_bolt11"
	PaymentEth        = "eth_tx"
	PaymentBTC        = "btc_tx"
	PaymentMocked     = "mocked"
	PaymentANP2Credit = "anp2_credit"
)

// Verdicts of kind 53 (§18.6) and dispositions of kind 54 (§18.8).
const (
	VerdictPassed   = "passed"
	VerdictFailed   = "failed"
	VerdictDisputed = "disputed"

	DispositionRelease = "release"
	DispositionRefund  = "refund"
)

var (
	paymentMethods = map[string]bool{PaymentLightning: true, PaymentEth: true, PaymentBTC: true, PaymentMocked: true, PaymentANP2Credit: true}
	escrowMethods  = map[string]bool{"none": true, "lightning_hold_invoice": true, "eth_htlc": true, "mocked": true}
	verdicts       = map[string]bool{VerdictPassed: true, VerdictFailed: true, VerdictDisputed: true}
	dispositions   = map[string]bool{DispositionRelease: true, DispositionRefund: true}

	// ownRole is the e-tag role each kind must carry (§18.7). Without a
	// root tag, the value of the own-role tag names the task (the network's
	// browser extension tags its kinds 51 and 52 so). The live network's
	// translator omits the accept tag on kind 52 (the fold attributes such
	// a result to the winning accept, §5.3), and its SDK the result tag on
	// kind 53 (a warning: the counting result is the one judged).
	ownRole = map[int64]string{
		KindTaskAccept: RoleAccept,
		KindTaskResult: RoleResult,
		KindTaskVerify: RoleVerify,
		KindPayment:    RolePayment,
		KindTaskCancel: RoleCancel,
	}
	taskRoles = map[string]bool{RoleRoot: true, RoleAccept: true, RoleResult: true, RoleVerify: true, RolePayment: true, RoleCancel: true}

	decimalText   = regexp.MustCompile(`^[0-9]+(\.[0-9]+)?$`)
	highStakesUSD = big.NewRat(10, 1)
)

func init() {
	kindRules[KindTaskRequest] = func(e *Event) []error { _, errs := ParseTaskRequest(e); return errs }
	kindRules[KindTaskAccept] = func(e *Event) []error { _, errs := ParseTaskAccept(e); return errs }
	kindRules[KindTaskResult] = func(e *Event) []error { _, errs := ParseTaskResult(e); return errs }
	kindRules[KindTaskVerify] = func(e *Event) []error { _, errs := ParseTaskVerify(e); return errs }
	kindRules[KindPayment] = func(e *Event) []error { _, errs := ParseTaskPayment(e); return errs }
	kindRules[KindTaskCancel] = func(e *Event) []error { _, errs := ParseTaskCancel(e); return errs }
}

// TaskReward is the reward object of a kind 50 (§18.3, §18.11).
type TaskReward struct {
	Currency      string
	Amount        string // as published: the string, or the JSON number's literal
	PaymentMethod string
	EscrowMethod  string // "" when absent
	// Credits is the whole number of credits when PaymentMethod is
	// anp2_credit, else -1.
	Credits int64
}

// TaskRequest is the parsed content of a kind 50 task.request.
type TaskRequest struct {
	Capability string
	// CapAlias is true when the capability came from the live network's
	// "cap" member (no "capability"); such a request needs no t or
	// cap_wanted tag naming it.
	CapAlias   bool
	Deadline   int64  // constraints.deadline_unix
	MaxCostUSD string // constraints.max_cost_usd as published
	// HighStakes is true when constraints.high_stakes is true or a
	// non-credit reward is above 10 in currency USD or USD-stable (§18.6.1;
	// compared exactly as decimals, currency case-insensitive). Credit
	// rewards are high-stakes only by the flag.
	HighStakes  bool
	Reward      TaskReward
	Constraints json.RawMessage // compact JSON
	RewardJSON  json.RawMessage // compact JSON
	// Warnings are the departures from the seed's shape the rule accepted.
	Warnings []Warning
}

// NoDeadline is the deadline of a task that names none: it never times out.
const NoDeadline = MaxSafeInteger

// PriceQuote is a kind 51 price_quote.
type PriceQuote struct {
	Currency string `json:"currency"`
	Amount   string `json:"amount"`
}

// TaskAccept is the parsed content of a kind 51 task.accept.
type TaskAccept struct {
	TaskID string
	// PriceQuote is the quote; HasQuote is false when the accept carries
	// none (it then accepts the offered reward, §5.3).
	PriceQuote PriceQuote
	HasQuote   bool
	EtaUnix    int64 // 0 when absent
	Warnings   []Warning
}

// TaskResult is the parsed content of a kind 52 task.result.
type TaskResult struct {
	TaskID       string
	OutputFormat string
	// AcceptID is the value of the ["e", _, "accept"] tag; "" when the
	// result has none (the fold then attributes it to the winning accept).
	AcceptID string
	Warnings []Warning
}

// TaskVerify is the parsed content of a kind 53 task.verify.
type TaskVerify struct {
	TaskID   string
	Verdict  string
	Score    float64
	HasScore bool
	Warnings []Warning
}

// TaskPayment is the parsed content of a kind 54 payment.release/refund.
type TaskPayment struct {
	TaskID          string
	Disposition     string
	PaymentMethod   string
	Amount          string
	Currency        string
	TxHash          string
	PaymentProofURL string
	Warnings        []Warning
}

// TaskCancel is the parsed content of a kind 55 task.cancel.
type TaskCancel struct {
	TaskID   string
	Reason   string
	Warnings []Warning
}

// TaskRoot returns the task_id of a kind 51–55 event: the value of its
// ["e", <task_id>, "root"] tag, or, when it has no root tag, the value of
// its own-role tag (accept for 51, result for 52, verify for 53, payment
// for 54, cancel for 55). It returns "" when there is neither, when the
// value is not a 64-hex id, or when the tags disagree.
func TaskRoot(e *Event) string {
	if root, found := roleValue(e, RoleRoot); found {
		return root
	}
	if role := ownRole[e.Kind]; role != "" {
		root, _ := roleValue(e, role)
		return root
	}
	return ""
}

// roleValue returns the one 64-hex value of e's ["e", _, role] tags, ""
// when a value is not 64-hex or two disagree; found says whether e has
// such a tag at all.
func roleValue(e *Event, role string) (string, bool) {
	v, found := "", false
	for _, t := range e.Tags {
		if len(t) >= 3 && t[0] == "e" && t[2] == role {
			if !IsHex64(t[1]) || found && v != t[1] {
				return "", true
			}
			v, found = t[1], true
		}
	}
	return v, found
}

// ParseTaskRequest parses and checks a kind 50 (§18.3). It returns every
// violation: invalid_task_content, invalid_reward, missing_tag.
//
// Required: capability (non-empty string; the live network's "cap" is read
// when "capability" is absent), reward.currency (non-empty string) and
// reward.amount. Read with a warning when absent (the network's clients'
// shapes, TaskRequest.Warnings): input (the quickstart's "payload"),
// constraints (as {}), constraints.max_cost_usd (no USD cap),
// constraints.deadline_unix (created_at + deadline_sec, else the
// quickstart's top-level deadline_at, else NoDeadline),
// reward.payment_method (no credit moves), and the tags ["t", <capability>] and ["cap_wanted",
// <capability>] (not wanted with the "cap" alias, whose publishers tag
// ["t", "task.request"]; other t tags are always allowed). Typed when
// present: max_cost_usd (non-negative decimal string or JSON number),
// deadline_unix and deadline_sec (JSON integers 0..2^53-1),
// payment_method (enum). Optional but
// typed when present: accept_languages (array of strings), min_provider_trust
// (number), high_stakes (boolean), reward.escrow_method (enum; the §18.11
// credit reward has none). With payment_method anp2_credit the amount is
// a JSON integer literal 0..2^53-1; as on the reference relay, a
// non-negative fraction (truncated) or a string of digits is read too, with
// the warning credit_amount_nonstandard; otherwise a non-negative decimal
// string or JSON number.
func ParseTaskRequest(e *Event) (*TaskRequest, []error) {
	var errs errList
	obj, ok := contentObject(e, &errs)
	if !ok {
		return nil, errs
	}
	r := &TaskRequest{}
	capRaw := obj["capability"]
	if _, present := obj["capability"]; !present && obj["cap"] != nil {
		capRaw, r.CapAlias = obj["cap"], true
	}
	if s, ok := jsonString(capRaw); !ok || strings.TrimSpace(s) == "" {
		errs.add(CodeInvalidTaskContent, "capability must be a non-empty string")
	} else {
		r.Capability = s
	}
	var warns warnList
	if len(obj["input"]) == 0 { // the reference relay reads no input (the quickstart's "payload")
		if len(obj["payload"]) > 0 {
			warns.add(WarnNoInput, "no input: content.payload is read as the task's input")
		} else {
			warns.add(WarnNoInput, "no input: the task's input is empty")
		}
	}
	parseConstraints(e, obj, r, &errs, &warns)
	parseReward(obj["reward"], r, &errs, &warns)
	if r.Capability != "" && !r.CapAlias {
		for _, name := range []string{"t", "cap_wanted"} {
			if !hasTagValue(e, name, r.Capability) {
				warns.add(WarnTaskTags, fmt.Sprintf("no [%q, %q] tag: the capability is read from the content", name, r.Capability))
			}
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	r.Warnings = warns
	return r, nil
}

func parseConstraints(e *Event, top map[string]json.RawMessage, r *TaskRequest, errs *errList, warns *warnList) {
	raw := top["constraints"]
	if len(raw) == 0 {
		raw = json.RawMessage("{}") // the reference relay reads absent constraints as none
	}
	c, ok := jsonObject(raw)
	if !ok {
		errs.add(CodeInvalidTaskContent, "constraints must be an object")
		return
	}
	r.Constraints = compact(raw)
	if v, present := c["max_cost_usd"]; !present {
		warns.add(WarnNoPriceCap, "no constraints.max_cost_usd: USD quotes are bounded only by a USD reward")
	} else if s, ok := jsonDecimal(v); ok {
		r.MaxCostUSD = s
	} else {
		errs.add(CodeInvalidTaskContent, "constraints.max_cost_usd must be a non-negative decimal string")
	}
	parseDeadline(e, c, top, r, errs, warns)
	if v, present := c["accept_languages"]; present && !isStringArray(v) {
		errs.add(CodeInvalidTaskContent, "constraints.accept_languages must be an array of strings")
	}
	if v, present := c["min_provider_trust"]; present {
		if _, ok := jsonFloat(v); !ok {
			errs.add(CodeInvalidTaskContent, "constraints.min_provider_trust must be a number")
		}
	}
	if v, present := c["high_stakes"]; present {
		switch string(bytes.TrimSpace(v)) {
		case "true":
			r.HighStakes = true
		case "false":
		default:
			errs.add(CodeInvalidTaskContent, "constraints.high_stakes must be a boolean")
		}
	}
}

// parseDeadline reads constraints.deadline_unix; without it, the
// LangChain tools' deadline_sec (seconds after created_at), else the
// quickstart's top-level deadline_at, else none (NoDeadline).
func parseDeadline(e *Event, c, top map[string]json.RawMessage, r *TaskRequest, errs *errList, warns *warnList) {
	if v, present := c["deadline_unix"]; present {
		if n, ok := jsonInt(v); ok {
			r.Deadline = n
		} else {
			errs.add(CodeInvalidTaskContent, "constraints.deadline_unix must be an integer 0..2^53-1")
		}
		return
	}
	if v, present := c["deadline_sec"]; present {
		n, ok := jsonInt(v)
		if !ok {
			errs.add(CodeInvalidTaskContent, "constraints.deadline_sec must be an integer 0..2^53-1")
			return
		}
		r.Deadline = min(e.CreatedAt+n, NoDeadline)
		warns.add(WarnDeadline, fmt.Sprintf("no constraints.deadline_unix: read as created_at + deadline_sec = %d", r.Deadline))
		return
	}
	if v, present := top["deadline_at"]; present {
		n, ok := jsonInt(v)
		if !ok {
			errs.add(CodeInvalidTaskContent, "deadline_at must be an integer 0..2^53-1")
			return
		}
		r.Deadline = n
		warns.add(WarnDeadline, fmt.Sprintf("no constraints.deadline_unix: read from content.deadline_at = %d", n))
		return
	}
	r.Deadline = NoDeadline
	warns.add(WarnDeadline, "no constraints.deadline_unix: the task has no deadline")
}

func parseReward(raw json.RawMessage, r *TaskRequest, errs *errList, warns *warnList) {
	o, ok := jsonObject(raw)
	if !ok {
		errs.add(CodeInvalidReward, "reward must be an object")
		return
	}
	r.RewardJSON = compact(raw)
	rw := &r.Reward
	rw.Credits = -1
	if s, ok := jsonString(o["currency"]); ok && s != "" {
		rw.Currency = s
	} else {
		errs.add(CodeInvalidReward, "reward.currency must be a non-empty string")
	}
	if v, present := o["payment_method"]; !present {
		warns.add(WarnNoPaymentMethod, "no reward.payment_method: the reward moves no credit")
	} else if s, ok := jsonString(v); ok && paymentMethods[s] {
		rw.PaymentMethod = s
	} else {
		errs.add(CodeInvalidReward, "reward.payment_method must be one of lightning_bolt11, eth_tx, btc_tx, mocked, anp2_credit")
	}
	if v, present := o["escrow_method"]; present {
		if s, ok := jsonString(v); ok && escrowMethods[s] {
			rw.EscrowMethod = s
		} else {
			errs.add(CodeInvalidReward, "reward.escrow_method must be one of none, lightning_hold_invoice, eth_htlc, mocked")
		}
	}
	amount := o["amount"]
	if rw.PaymentMethod == PaymentANP2Credit {
		if n, ok := jsonInt(amount); ok {
			rw.Credits = n
		} else if n, ok := creditAmountLoose(amount); ok {
			rw.Credits = n
			warns.add(WarnCreditAmount, fmt.Sprintf("reward.amount %s is not a JSON integer: read as %d whole credits", amount, n))
		} else {
			errs.add(CodeInvalidReward, "with payment_method anp2_credit, reward.amount must be a non-negative integer 0..2^53-1 (a JSON integer; a fraction or a string of digits is read with a warning)")
		}
		if rw.Credits >= 0 {
			rw.Amount = strconv.FormatInt(rw.Credits, 10)
		}
		return
	}
	s, ok := jsonDecimal(amount)
	if !ok {
		errs.add(CodeInvalidReward, "reward.amount must be a non-negative decimal string or number")
		return
	}
	rw.Amount = s
	if isUSD(rw.Currency) {
		if x, ok := new(big.Rat).SetString(s); ok && x.Cmp(highStakesUSD) > 0 {
			r.HighStakes = true
		}
	}
}

// ParseTaskAccept parses and checks a kind 51 (§18.4): the accept tag (and
// root, or the accept tag names the task), content with price_quote
// {currency, amount}; eta_unix and terms_hash are typed when present. A
// missing p tag, a missing price_quote or empty content (an accept of the
// offered reward), and a terms_hash that is not a hash are warnings.
func ParseTaskAccept(e *Event) (*TaskAccept, []error) {
	var errs errList
	ok := true
	var warns warnList
	root := checkLifecycleTags(e, &errs, &warns)
	var obj map[string]json.RawMessage
	if strings.TrimSpace(e.Content) == "" {
		obj = map[string]json.RawMessage{} // the browser extension's accept
	} else if obj, ok = contentObject(e, &errs); !ok {
		return nil, errs
	}
	a := &TaskAccept{TaskID: root}
	checkContentTaskID(obj, root, &errs)
	if raw, present := obj["price_quote"]; !present {
		warns.add(WarnNoQuote, "no price_quote: the accept takes the offered reward")
	} else if q, ok := jsonObject(raw); ok {
		cur, ok1 := jsonString(q["currency"])
		amt, ok2 := jsonDecimal(q["amount"])
		if !ok1 || cur == "" || !ok2 {
			errs.add(CodeInvalidTaskContent, "price_quote needs a currency string and a non-negative decimal amount")
		}
		a.PriceQuote, a.HasQuote = PriceQuote{Currency: cur, Amount: amt}, true
	} else {
		errs.add(CodeInvalidTaskContent, "price_quote must be an object")
	}
	if v, present := obj["eta_unix"]; present {
		if n, ok := jsonInt(v); ok {
			a.EtaUnix = n
		} else {
			errs.add(CodeInvalidTaskContent, "eta_unix must be an integer 0..2^53-1")
		}
	}
	if v, present := obj["terms_hash"]; present {
		if s, ok := jsonString(v); !ok {
			errs.add(CodeInvalidTaskContent, "terms_hash must be a string")
		} else if s != "" && !IsHex64(s) {
			// The seed providers (timenow, jsonformat, summarize, demoecho)
			// write labels such as "free-no-terms"; nothing reads the hash.
			warns.add(WarnTermsHash, "terms_hash is not 64 lowercase hex characters: kept as a label, nothing reads it")
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	a.Warnings = warns
	return a, nil
}

// ParseTaskResult parses and checks a kind 52 (§18.5): tags root and result
// (accept when present: the live network omits it), a p tag (a warning when absent), and an object
// content; output is free-form (verifiers
// judge it), output_format and runtime_ms are typed when present.
func ParseTaskResult(e *Event) (*TaskResult, []error) {
	var errs errList
	var warns warnList
	root, obj, ok := lifecycleContent(e, &errs, &warns)
	if !ok {
		return nil, errs
	}
	r := &TaskResult{TaskID: root}
	for _, t := range e.Tags {
		if len(t) >= 3 && t[0] == "e" && t[2] == RoleAccept && r.AcceptID == "" {
			r.AcceptID = t[1]
		}
	}
	if v, present := obj["output_format"]; present {
		if s, ok := jsonString(v); ok {
			r.OutputFormat = s
		} else {
			errs.add(CodeInvalidTaskContent, "output_format must be a string")
		}
	}
	if v, present := obj["runtime_ms"]; present {
		if f, ok := jsonFloat(v); !ok || f < 0 {
			errs.add(CodeInvalidTaskContent, "runtime_ms must be a non-negative number")
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	r.Warnings = warns
	return r, nil
}

// ParseTaskVerify parses and checks a kind 53 (§18.6): tags root, verify and
// result (both warnings when absent), a p tag, verdict in {passed, failed, disputed}, score a number in
// [0, 1] when present, reasons and evidence_event_ids arrays of strings when
// present.
func ParseTaskVerify(e *Event) (*TaskVerify, []error) {
	var errs errList
	var warns warnList
	root, obj, ok := lifecycleContent(e, &errs, &warns)
	if !ok {
		return nil, errs
	}
	v := &TaskVerify{TaskID: root}
	v.Verdict = oneOf(obj, "verdict", verdicts, "verdict must be one of passed, failed, disputed", &errs)
	if raw, present := obj["score"]; present {
		if f, ok := jsonFloat(raw); ok && f >= 0 && f <= 1 {
			v.Score, v.HasScore = f, true
		} else {
			errs.add(CodeInvalidTaskContent, "score must be a number in [0, 1]")
		}
	}
	for _, name := range []string{"reasons", "evidence_event_ids"} {
		if raw, present := obj[name]; present && !isStringArray(raw) {
			errs.add(CodeInvalidTaskContent, "%s must be an array of strings", name)
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	v.Warnings = warns
	return v, nil
}

// ParseTaskPayment parses and checks a kind 54 (§18.8): tags root and
// payment, a p tag (a warning when absent), disposition in {release, refund}, payment_method one of
// the reward methods (anp2_credit announcements included, §18.11); amount,
// currency, tx_hash and payment_proof_url are typed when present.
func ParseTaskPayment(e *Event) (*TaskPayment, []error) {
	var errs errList
	var warns warnList
	root, obj, ok := lifecycleContent(e, &errs, &warns)
	if !ok {
		return nil, errs
	}
	p := &TaskPayment{TaskID: root}
	p.Disposition = oneOf(obj, "disposition", dispositions, "disposition must be release or refund", &errs)
	p.PaymentMethod = oneOf(obj, "payment_method", paymentMethods,
		"payment_method must be one of lightning_bolt11, eth_tx, btc_tx, mocked, anp2_credit", &errs)
	if raw, present := obj["amount"]; present {
		if s, ok := jsonDecimal(raw); ok {
			p.Amount = s
		} else {
			errs.add(CodeInvalidTaskContent, "amount must be a non-negative decimal string or number")
		}
	}
	optional := []struct {
		name string
		dst  *string
	}{{"currency", &p.Currency}, {"tx_hash", &p.TxHash}, {"payment_proof_url", &p.PaymentProofURL}}
	for _, f := range optional {
		if raw, present := obj[f.name]; present {
			if s, ok := jsonString(raw); ok {
				*f.dst = s
			} else {
				errs.add(CodeInvalidTaskContent, "%s must be a string", f.name)
			}
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	p.Warnings = warns
	return p, nil
}

// ParseTaskCancel parses and checks a kind 55 (§18.9): tags root and cancel
// and an object content; reason is typed when present.
func ParseTaskCancel(e *Event) (*TaskCancel, []error) {
	var errs errList
	var warns warnList
	root, obj, ok := lifecycleContent(e, &errs, &warns)
	if !ok {
		return nil, errs
	}
	c := &TaskCancel{TaskID: root}
	if raw, present := obj["reason"]; present {
		if s, ok := jsonString(raw); ok {
			c.Reason = s
		} else {
			errs.add(CodeInvalidTaskContent, "reason must be a string")
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	c.Warnings = warns
	return c, nil
}

// CodePriceAboveReward: a kind 51 quoting in the reward's currency more
// than the reward.
const CodePriceAboveReward = "price_exceeds_reward"

// CheckAcceptPrice checks §18.4 for an accept whose request is known (see
// AcceptPrice). It returns the first kind-rule violation of either
// event, an invalid_task_content *Error when accept's root is not
// request.ID, and AcceptPrice's answer otherwise.
func CheckAcceptPrice(accept, request *Event) (*Warning, error) {
	a, errs := ParseTaskAccept(accept)
	if len(errs) > 0 {
		return nil, errs[0]
	}
	r, errs := ParseTaskRequest(request)
	if len(errs) > 0 {
		return nil, errs[0]
	}
	if a.TaskID != request.ID {
		return nil, Errorf(CodeInvalidTaskContent, "accept does not reference this request (root %s)", a.TaskID)
	}
	return AcceptPrice(a, r)
}

// AcceptPriceViolation is AcceptPrice's violation alone (the fold's
// question: may this accept win?).
func AcceptPriceViolation(a *TaskAccept, r *TaskRequest) error {
	_, err := AcceptPrice(a, r)
	return err
}

// AcceptPrice is the §18.4 price rule, used at publish and by the task
// fold, so a mirrored accept is judged as a published one. A quote is
// bounded by every bound of its request in its currency (case-insensitive):
// reward.amount when it is the reward's currency (price_exceeds_reward),
// and constraints.max_cost_usd when it is USD and the request has one
// (price_exceeds_max_cost), compared exactly as decimals. A quote that no
// bound applies to (another currency; with no reference exchange rate,
// §18.12 q4, it cannot be compared) is a warning, quote_not_compared, and
// does not count: the accept takes the offered reward, as does an accept
// without a quote (accept_without_quote). It returns the violation, or nil
// and the warning (nil when none).
func AcceptPrice(a *TaskAccept, r *TaskRequest) (*Warning, error) {
	if !a.HasQuote {
		return &Warning{WarnNoQuote, "no price_quote: the accept takes the offered reward"}, nil
	}
	q := a.PriceQuote
	bounded := false
	if strings.EqualFold(q.Currency, r.Reward.Currency) {
		bounded = true
		if decimalAbove(q.Amount, r.Reward.Amount) {
			return nil, Errorf(CodePriceAboveReward, "price_quote.amount %s exceeds the reward %s %s", q.Amount, r.Reward.Amount, r.Reward.Currency)
		}
	}
	if strings.EqualFold(q.Currency, "USD") && r.MaxCostUSD != "" {
		bounded = true
		if decimalAbove(q.Amount, r.MaxCostUSD) {
			return nil, Errorf(CodePriceAboveMax, "price_quote.amount %s exceeds the request's max_cost_usd %s", q.Amount, r.MaxCostUSD)
		}
	}
	if !bounded {
		return &Warning{WarnQuoteUnbounded, fmt.Sprintf("price_quote.currency %q is neither the reward's currency (%q) nor USD under a max_cost_usd: the quote is not compared, the accept takes the offered reward", q.Currency, r.Reward.Currency)}, nil
	}
	return nil, nil
}

// decimalAbove reports whether the decimal x is above the decimal y (false
// when either does not parse).
func decimalAbove(x, y string) bool {
	a, ok1 := new(big.Rat).SetString(x)
	b, ok2 := new(big.Rat).SetString(y)
	return ok1 && ok2 && a.Cmp(b) > 0
}

// checkLifecycleTags checks the §18.7 tag schema of kinds 51–55 and returns
// the task_id (TaskRoot), "" when it is missing or bad. The kind's own e-tag
// role must be present, every role tag with a 64-hex value; without a root
// tag the own-role tag names the task (a warning). A kind 51–54 without a
// ["p", <agent_id>] tag, or a kind 53 without a result tag, is a warning; a
// p tag present must be 64-hex. The t tag is optional (the live network
// omits it on kinds 53 and 54).
func checkLifecycleTags(e *Event, errs *errList, warns *warnList) string {
	roles := map[string]bool{}
	for _, t := range e.Tags {
		if len(t) >= 3 && t[0] == "e" && taskRoles[t[2]] {
			roles[t[2]] = true
			if !IsHex64(t[1]) {
				errs.add(CodeInvalidTag, "[\"e\", _, %q] must hold a 64-hex event id", t[2])
			}
		}
	}
	own := ownRole[e.Kind]
	if !roles[own] {
		errs.add(CodeMissingTag, "kind %d needs an [\"e\", <id>, %q] tag", e.Kind, own)
	}
	root := TaskRoot(e)
	switch {
	case roles[RoleRoot] && root == "":
		errs.add(CodeInvalidTag, "root e tags must name one 64-hex task_id")
	case !roles[RoleRoot] && root != "":
		warns.add(WarnRootInferred, fmt.Sprintf("no [\"e\", task_id, \"root\"] tag: the %q tag names the task %s", own, root))
	case !roles[RoleRoot]:
		errs.add(CodeMissingTag, "kind %d needs an [\"e\", <task_id>, \"root\"] tag", e.Kind)
	}
	if e.Kind == KindTaskVerify && !roles[RoleResult] {
		warns.add(WarnVerifyNoResult, "no [\"e\", result, \"result\"] tag: the verdict judges the task's counting result")
	}
	if e.Kind != KindTaskCancel {
		ps := e.TagValues("p")
		if len(ps) == 0 {
			warns.add(WarnMissingP, fmt.Sprintf("kind %d has no [\"p\", <agent_id>] tag", e.Kind))
		}
		for _, p := range ps {
			if !IsHex64(p) {
				errs.add(CodeInvalidTag, "p tag must hold a 64-hex agent_id")
				break
			}
		}
	}
	return root
}

// lifecycleContent checks the tags of a kind 52–55 (checkLifecycleTags)
// and decodes its content, one JSON object whose task_id, when present,
// must be the root tag's (checkContentTaskID). ok is false when the
// content is not one JSON object.
func lifecycleContent(e *Event, errs *errList, warns *warnList) (root string, obj map[string]json.RawMessage, ok bool) {
	root = checkLifecycleTags(e, errs, warns)
	if obj, ok = contentObject(e, errs); ok {
		checkContentTaskID(obj, root, errs)
	}
	return root, obj, ok
}

// oneOf returns content member name when it is a string in set; else it
// adds msg to errs and returns "".
func oneOf(obj map[string]json.RawMessage, name string, set map[string]bool, msg string, errs *errList) string {
	if s, ok := jsonString(obj[name]); ok && set[s] {
		return s
	}
	errs.add(CodeInvalidTaskContent, "%s", msg)
	return ""
}

// checkContentTaskID rejects a content task_id that names another task than
// the root tag: the derivation reads the tag, and the two must not disagree.
func checkContentTaskID(obj map[string]json.RawMessage, root string, errs *errList) {
	raw, present := obj["task_id"]
	if !present {
		return
	}
	if s, ok := jsonString(raw); !ok || root != "" && s != root {
		errs.add(CodeInvalidTaskContent, "content task_id must equal the root e tag")
	}
}

func hasTagValue(e *Event, name, value string) bool {
	for _, v := range e.TagValues(name) {
		if v == value {
			return true
		}
	}
	return false
}

func isUSD(currency string) bool {
	return strings.EqualFold(currency, "USD") || strings.EqualFold(currency, "USD-stable")
}

// errList collects kind-rule violations.
type errList []error

func (l *errList) add(code, format string, args ...any) {
	*l = append(*l, Errorf(code, format, args...))
}

// contentObject decodes e.Content as one JSON object (members as raw JSON).
func contentObject(e *Event, errs *errList) (map[string]json.RawMessage, bool) {
	dec := json.NewDecoder(strings.NewReader(e.Content))
	var obj map[string]json.RawMessage
	if err := dec.Decode(&obj); err != nil || obj == nil {
		errs.add(CodeInvalidTaskContent, "kind %d content must be a JSON object", e.Kind)
		return nil, false
	}
	if _, err := dec.Token(); err != io.EOF {
		errs.add(CodeInvalidTaskContent, "kind %d content has trailing data", e.Kind)
		return nil, false
	}
	return obj, true
}

func jsonObject(raw json.RawMessage) (map[string]json.RawMessage, bool) {
	var obj map[string]json.RawMessage
	if len(raw) == 0 || json.Unmarshal(raw, &obj) != nil || obj == nil {
		return nil, false
	}
	return obj, true
}

func jsonString(raw json.RawMessage) (string, bool) {
	var s string
	if len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

// jsonInt accepts a JSON integer literal 0..2^53-1 (no sign, fraction or
// exponent).
func jsonInt(raw json.RawMessage) (int64, bool) {
	s := string(raw)
	if !decimalInt.MatchString(s) || len(s) > 16 {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil && n <= MaxSafeInteger
}

// jsonFloat accepts any finite JSON number.
func jsonFloat(raw json.RawMessage) (float64, bool) {
	if len(raw) == 0 || !(raw[0] == '-' || raw[0] >= '0' && raw[0] <= '9') {
		return 0, false
	}
	var n json.Number
	if json.Unmarshal(raw, &n) != nil {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(n), 64)
	return f, err == nil && !math.IsInf(f, 0) && !math.IsNaN(f)
}

// jsonDecimal accepts a non-negative decimal as a string ("0.10") or as a
// JSON number, and returns its text.
func jsonDecimal(raw json.RawMessage) (string, bool) {
	if s, ok := jsonString(raw); ok {
		return s, decimalText.MatchString(s)
	}
	f, ok := jsonFloat(raw)
	if !ok || f < 0 || raw[0] == '-' {
		return "", false
	}
	return string(raw), true
}

// creditAmountLoose reads a credit amount the reference relay accepts
// though it is not a JSON integer, as its int() does: a non-negative JSON
// number with a fraction or exponent, truncated toward zero (the
// quickstart's 0.001), or a string of decimal digits ("10").
func creditAmountLoose(raw json.RawMessage) (int64, bool) {
	if s, ok := jsonString(raw); ok {
		n, err := strconv.ParseInt(s, 10, 64)
		return n, err == nil && s != "" && s[0] >= '0' && s[0] <= '9' && n <= MaxSafeInteger
	}
	f, ok := jsonFloat(raw)
	if !ok || f < 0 || raw[0] == '-' || f >= MaxSafeInteger+1 {
		return 0, false
	}
	return int64(f), true
}

func isStringArray(raw json.RawMessage) bool {
	var a []json.RawMessage
	if len(raw) == 0 || raw[0] != '[' || json.Unmarshal(raw, &a) != nil {
		return false
	}
	for _, x := range a {
		if _, ok := jsonString(x); !ok {
			return false
		}
	}
	return true
}

func compact(raw json.RawMessage) json.RawMessage {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return nil
	}
	return b.Bytes()
}
