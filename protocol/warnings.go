package protocol

// Warning names one way an accepted event departs from the seed's shape
// (decisions D17): the relay stores the event, answers 200 and lists its
// warnings, and the folds read the shape as its publishers intend (SPEC
// §1.5, §5.3). Code is stable snake_case; Detail says what was read.
type Warning struct {
	Code   string `json:"code"`
	Detail string `json:"detail"`
}

// Warning codes of the kind rules.
const (
	// WarnTaskTags: a kind 50 without the ["t", capability] or
	// ["cap_wanted", capability] tag.
	WarnTaskTags = "task_tags_nonstandard"
	// WarnNoPriceCap: a kind 50 without constraints.max_cost_usd.
	WarnNoPriceCap = "no_price_cap"
	// WarnDeadline: a kind 50 without constraints.deadline_unix (read from
	// deadline_sec, or none).
	WarnDeadline = "deadline_inferred"
	// WarnNoInput: a kind 50 without input (the quickstart's payload).
	WarnNoInput = "task_input_missing"
	// WarnCreditAmount: an anp2_credit reward.amount that is not a JSON
	// integer (a fraction, truncated; a string of digits).
	WarnCreditAmount = "credit_amount_nonstandard"
	// WarnNoPaymentMethod: a reward without payment_method (moves no credit).
	WarnNoPaymentMethod = "reward_payment_method_missing"
	// WarnRootInferred: a kind 51–55 without the ["e", task_id, "root"] tag,
	// whose own-role e tag names the task.
	WarnRootInferred = "root_inferred"
	// WarnMissingP: a kind 51–54 without a ["p", agent_id] tag.
	WarnMissingP = "missing_p_tag"
	// WarnNoQuote: a kind 51 without price_quote: it accepts the offered reward.
	WarnNoQuote = "accept_without_quote"
	// WarnQuoteUnbounded: a kind 51 whose quote no bound of its request
	// applies to (another currency): the quote does not count.
	WarnQuoteUnbounded = "quote_not_compared"
	// WarnTermsHash: a kind 51 whose terms_hash is a string but not 64
	// lowercase hex (the seed providers' "free-no-terms").
	WarnTermsHash = "terms_hash_nonstandard"
	// WarnVerifyNoResult: a kind 53 without the ["e", result, "result"] tag.
	WarnVerifyNoResult = "verify_result_inferred"
	// WarnSchema: an event of a kind outside 1000–1999 whose content breaks
	// the schema its s tag names.
	WarnSchema = "schema_not_met"
)

// warnList collects warnings.
type warnList []Warning

func (l *warnList) add(code, detail string) { *l = append(*l, Warning{code, detail}) }

// KindWarnings returns the warnings of e's kind rule: every departure
// from the seed's shape that the rule accepts and normalises (nil when
// there is none, or when the rule rejects e).
func KindWarnings(e *Event) []Warning {
	switch e.Kind {
	case KindTaskRequest:
		if r, errs := ParseTaskRequest(e); len(errs) == 0 {
			return r.Warnings
		}
	case KindTaskAccept:
		if a, errs := ParseTaskAccept(e); len(errs) == 0 {
			return a.Warnings
		}
	case KindTaskResult:
		if r, errs := ParseTaskResult(e); len(errs) == 0 {
			return r.Warnings
		}
	case KindTaskVerify:
		if v, errs := ParseTaskVerify(e); len(errs) == 0 {
			return v.Warnings
		}
	case KindPayment:
		if p, errs := ParseTaskPayment(e); len(errs) == 0 {
			return p.Warnings
		}
	case KindTaskCancel:
		if c, errs := ParseTaskCancel(e); len(errs) == 0 {
			return c.Warnings
		}
	}
	return nil
}
