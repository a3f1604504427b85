package tasks

import (
	"strconv"

	"github.com/anp2net/relay/protocol/canonjson"
)

// The digest hashes the RFC 8785 (JCS) form of each TaskView. Running
// jcs.Transform over 10k views takes seconds, so the views are written in
// canonical form directly: keys in sorted order, omitempty as in the JSON
// tags, JCS string escaping and ES6 number formatting. TestCanonicalMatchesJCS
// checks the result byte for byte against json.Marshal + jcs.Transform.

type canon struct{ b []byte }

func (c *canon) key(k string, first *bool) {
	if !*first {
		c.b = append(c.b, ',')
	}
	*first = false
	c.str(k)
	c.b = append(c.b, ':')
}

func (c *canon) str(s string) { c.b = canonjson.AppendString(c.b, s) }

func (c *canon) int(n int64) { c.b = canonjson.AppendInt(c.b, n) }

// float writes a finite float as ES6 Number.prototype.toString does.
func (c *canon) float(f float64) { c.b = canonjson.AppendFloat(c.b, f) }

func (c *canon) bool(v bool) { c.b = strconv.AppendBool(c.b, v) }

func (c *canon) optFloat(p *float64) {
	if p == nil {
		c.b = append(c.b, "null"...)
		return
	}
	c.float(*p)
}

// taskView writes v without Reward and Constraints (the digest omits them).
func (c *canon) taskView(v *TaskView) {
	first := true
	c.b = append(c.b, '{')
	c.key("accept", &first)
	c.bid(v.Accept)
	c.key("cancel", &first)
	if v.Cancel == nil {
		c.b = append(c.b, "null"...)
	} else {
		c.eventRef(v.Cancel)
	}
	c.key("capability", &first)
	c.str(v.Capability)
	c.key("consensus", &first)
	c.consensus(&v.Consensus)
	c.key("created_at", &first)
	c.int(v.CreatedAt)
	c.key("deadline_unix", &first)
	c.int(v.Deadline)
	c.key("event_refs", &first)
	c.array(len(v.Events), func(i int) { c.eventRef(&v.Events[i]) })
	c.key("high_stakes", &first)
	c.bool(v.HighStakes)
	c.key("history", &first)
	c.array(len(v.History), func(i int) { c.transition(&v.History[i]) })
	c.key("losing_bids", &first)
	c.array(len(v.LosingBids), func(i int) { c.bid(&v.LosingBids[i]) })
	c.key("payment", &first)
	c.payment(v.Payment)
	if v.Phase != "" {
		c.key("phase", &first)
		c.str(v.Phase)
	}
	if v.Provider != "" {
		c.key("provider", &first)
		c.str(v.Provider)
	}
	c.key("requester", &first)
	c.str(v.Requester)
	c.key("result", &first)
	c.result(v.Result)
	c.key("status", &first)
	c.str(string(v.Status))
	c.key("task_id", &first)
	c.str(v.TaskID)
	c.key("verdicts", &first)
	c.array(len(v.Verdicts), func(i int) { c.verdict(&v.Verdicts[i]) })
	c.b = append(c.b, '}')
}

// array writes n elements. A nil slice is written as [] too, where
// json.Marshal writes null; views never carry nil slices (History and
// Events always hold the request, the others are made empty).
func (c *canon) array(n int, elem func(i int)) {
	c.b = append(c.b, '[')
	for i := range n {
		if i > 0 {
			c.b = append(c.b, ',')
		}
		elem(i)
	}
	c.b = append(c.b, ']')
}

func (c *canon) bid(b *Bid) {
	if b == nil {
		c.b = append(c.b, "null"...)
		return
	}
	first := true
	c.b = append(c.b, '{')
	c.key("created_at", &first)
	c.int(b.CreatedAt)
	if b.EtaUnix != 0 {
		c.key("eta_unix", &first)
		c.int(b.EtaUnix)
	}
	c.key("event_id", &first)
	c.str(b.EventID)
	if b.PriceQuote != nil {
		c.key("price_quote", &first)
		c.b = append(c.b, `{"amount":`...)
		c.str(b.PriceQuote.Amount)
		c.b = append(c.b, `,"currency":`...)
		c.str(b.PriceQuote.Currency)
		c.b = append(c.b, '}')
	}
	c.key("provider", &first)
	c.str(b.Provider)
	if b.Reason != "" {
		c.key("reason", &first)
		c.str(b.Reason)
	}
	c.b = append(c.b, '}')
}

func (c *canon) consensus(x *Consensus) {
	first := true
	c.b = append(c.b, '{')
	c.key("counts", &first)
	c.b = append(c.b, '{')
	f2 := true
	for _, k := range sortedVerdicts {
		if n, ok := x.Counts[k]; ok {
			c.key(k, &f2)
			c.int(int64(n))
		}
	}
	c.b = append(c.b, '}')
	if x.EventID != "" {
		c.key("event_id", &first)
		c.str(x.EventID)
	}
	c.key("rule", &first)
	c.str(x.Rule)
	c.key("score", &first)
	c.optFloat(x.Score)
	if x.Threshold != 0 {
		c.key("threshold", &first)
		c.int(int64(x.Threshold))
	}
	c.key("verdict", &first)
	c.str(x.Verdict)
	c.key("verifiers", &first)
	c.int(int64(x.Verifiers))
	if len(x.Weights) > 0 {
		c.key("weights", &first)
		c.b = append(c.b, '{')
		f3 := true
		for _, k := range sortedVerdicts {
			if w, ok := x.Weights[k]; ok {
				c.key(k, &f3)
				c.float(w)
			}
		}
		c.b = append(c.b, '}')
	}
	if x.WindowEnd != 0 {
		c.key("window_end", &first)
		c.int(x.WindowEnd)
	}
	c.b = append(c.b, '}')
}

// sortedVerdicts are the verdict names in JCS key order.
var sortedVerdicts = []string{"disputed", "failed", "passed"}

func (c *canon) eventRef(e *EventRef) {
	first := true
	c.b = append(c.b, '{')
	c.key("agent_id", &first)
	c.str(e.AgentID)
	c.key("counts", &first)
	c.bool(e.Counts)
	c.key("created_at", &first)
	c.int(e.CreatedAt)
	c.key("event_id", &first)
	c.str(e.EventID)
	c.key("kind", &first)
	c.int(e.Kind)
	if e.Reason != "" {
		c.key("reason", &first)
		c.str(e.Reason)
	}
	c.b = append(c.b, '}')
}

func (c *canon) transition(t *Transition) {
	first := true
	c.b = append(c.b, '{')
	c.key("at", &first)
	c.int(t.At)
	if t.EventID != "" {
		c.key("event_id", &first)
		c.str(t.EventID)
	}
	c.key("status", &first)
	c.str(string(t.Status))
	if t.Verdict != "" {
		c.key("verdict", &first)
		c.str(t.Verdict)
	}
	c.b = append(c.b, '}')
}

func (c *canon) payment(p *Payment) {
	if p == nil {
		c.b = append(c.b, "null"...)
		return
	}
	first := true
	c.b = append(c.b, '{')
	if p.Amount != "" {
		c.key("amount", &first)
		c.str(p.Amount)
	}
	c.key("created_at", &first)
	c.int(p.CreatedAt)
	if p.Currency != "" {
		c.key("currency", &first)
		c.str(p.Currency)
	}
	c.key("disposition", &first)
	c.str(p.Disposition)
	c.key("event_id", &first)
	c.str(p.EventID)
	c.key("payment_method", &first)
	c.str(p.PaymentMethod)
	if p.PaymentProofURL != "" {
		c.key("payment_proof_url", &first)
		c.str(p.PaymentProofURL)
	}
	if p.TxHash != "" {
		c.key("tx_hash", &first)
		c.str(p.TxHash)
	}
	c.b = append(c.b, '}')
}

func (c *canon) result(r *ResultRef) {
	if r == nil {
		c.b = append(c.b, "null"...)
		return
	}
	first := true
	c.b = append(c.b, '{')
	if r.AcceptInferred {
		c.key("accept_inferred", &first)
		c.bool(true)
	}
	c.key("created_at", &first)
	c.int(r.CreatedAt)
	c.key("event_id", &first)
	c.str(r.EventID)
	if r.OutputFormat != "" {
		c.key("output_format", &first)
		c.str(r.OutputFormat)
	}
	c.b = append(c.b, '}')
}

func (c *canon) verdict(v *Verdict) {
	first := true
	c.b = append(c.b, '{')
	c.key("counts", &first)
	c.bool(v.Counts)
	c.key("created_at", &first)
	c.int(v.CreatedAt)
	c.key("event_id", &first)
	c.str(v.EventID)
	if v.Reason != "" {
		c.key("reason", &first)
		c.str(v.Reason)
	}
	c.key("score", &first)
	c.optFloat(v.Score)
	c.key("verdict", &first)
	c.str(v.Verdict)
	c.key("verifier", &first)
	c.str(v.Verifier)
	c.key("weight", &first)
	c.float(v.Weight)
	c.b = append(c.b, '}')
}
