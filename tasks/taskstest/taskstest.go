// Package taskstest builds signed task-lifecycle events (kinds 50–55) for
// tests of the tasks and credit packages, and generates random lifecycles.
package taskstest

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/json"

	"github.com/anp2net/relay/protocol"
)

// Capability is the capability every built request asks for.
const Capability = "transform.text.demo"

// Agent is a signing identity.
type Agent struct {
	Name string
	Key  ed25519.PrivateKey
	ID   string
}

// NewAgent derives an agent deterministically from name.
func NewAgent(name string) Agent {
	seed := sha256.Sum256([]byte("taskstest/" + name))
	key := ed25519.NewKeyFromSeed(seed[:])
	return Agent{Name: name, Key: key, ID: protocol.AgentIDOf(key)}
}

// Sign returns a signed event by a.
func (a Agent) Sign(kind, at int64, content any, tags ...[]string) *protocol.Event {
	var text string
	switch c := content.(type) {
	case string:
		text = c
	default:
		b, err := json.Marshal(c)
		if err != nil {
			panic(err)
		}
		text = string(b)
	}
	if tags == nil {
		tags = [][]string{}
	}
	e := &protocol.Event{CreatedAt: at, Kind: kind, Tags: tags, Content: text}
	e.Sign(a.Key)
	return e
}

// Reward describes a request's reward.
type Reward struct {
	Method   string // payment_method; default anp2_credit
	Currency string // default "credit" for anp2_credit, "USD" otherwise
	Amount   any    // default 10
}

// Request returns a kind 50 by a at time at with the given deadline.
func Request(a Agent, at, deadline int64, rw Reward, highStakes bool) *protocol.Event {
	if rw.Method == "" {
		rw.Method = protocol.PaymentANP2Credit
	}
	if rw.Currency == "" {
		rw.Currency = "USD"
		if rw.Method == protocol.PaymentANP2Credit {
			rw.Currency = "credit"
		}
	}
	if rw.Amount == nil {
		rw.Amount = 10
	}
	constraints := map[string]any{"max_cost_usd": "0.10", "deadline_unix": deadline}
	if highStakes {
		constraints["high_stakes"] = true
	}
	content := map[string]any{
		"capability":  Capability,
		"input":       map[string]any{"text": "Bonjour"},
		"constraints": constraints,
		"reward":      map[string]any{"currency": rw.Currency, "amount": rw.Amount, "payment_method": rw.Method, "escrow_method": "none"},
	}
	return a.Sign(protocol.KindTaskRequest, at, content, []string{"t", Capability}, []string{"cap_wanted", Capability})
}

// Accept returns a kind 51 by a for task.
func Accept(a Agent, at int64, task *protocol.Event) *protocol.Event {
	content := map[string]any{"eta_unix": at + 60, "price_quote": map[string]any{"currency": "USD", "amount": "0.04"},
		"terms_hash": "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"}
	return a.Sign(protocol.KindTaskAccept, at, content, root(task), []string{"e", task.ID, "accept"},
		[]string{"t", Capability}, []string{"p", task.AgentID})
}

// Result returns a kind 52 by a for task.
func Result(a Agent, at int64, task *protocol.Event) *protocol.Event {
	content := map[string]any{"task_id": task.ID, "output": map[string]any{"text": "hello"}, "runtime_ms": 318, "output_format": "json"}
	return a.Sign(protocol.KindTaskResult, at, content, root(task), []string{"e", task.ID, "result"},
		[]string{"e", task.ID, "accept"}, []string{"t", Capability}, []string{"p", task.AgentID})
}

// Verify returns a kind 53 by a for task; score < 0 omits the score.
func Verify(a Agent, at int64, task *protocol.Event, verdict string, score float64) *protocol.Event {
	content := map[string]any{"task_id": task.ID, "verdict": verdict, "reasons": []string{"checked"}, "evidence_event_ids": []string{}}
	if score >= 0 {
		content["score"] = score
	}
	return a.Sign(protocol.KindTaskVerify, at, content, root(task), []string{"e", task.ID, "verify"},
		[]string{"e", task.ID, "result"}, []string{"p", task.AgentID})
}

// Payment returns a kind 54 by a for task.
func Payment(a Agent, at int64, task *protocol.Event, disposition, method string) *protocol.Event {
	content := map[string]any{"task_id": task.ID, "disposition": disposition, "amount": "0.04", "currency": "USD",
		"payment_method": method, "tx_hash": "mock-1"}
	return a.Sign(protocol.KindPayment, at, content, root(task), []string{"e", task.ID, "payment"}, []string{"p", task.AgentID})
}

// Cancel returns a kind 55 by a for task.
func Cancel(a Agent, at int64, task *protocol.Event) *protocol.Event {
	content := map[string]any{"task_id": task.ID, "reason": "requirements changed"}
	return a.Sign(protocol.KindTaskCancel, at, content, root(task), []string{"e", task.ID, "cancel"}, []string{"t", Capability})
}

// Broken returns a kind 53 for task whose content fails the kind rule.
func Broken(a Agent, at int64, task *protocol.Event) *protocol.Event {
	return a.Sign(protocol.KindTaskVerify, at, `{"verdict":"maybe"}`, root(task), []string{"e", task.ID, "verify"},
		[]string{"e", task.ID, "result"}, []string{"p", task.AgentID})
}

func root(task *protocol.Event) []string { return []string{"e", task.ID, "root"} }
