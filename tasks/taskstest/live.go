package taskstest

import "github.com/anp2net/relay/protocol"

// LiveRequest returns a kind 50 in the shape the live network's seed
// requester publishes: "cap" instead of "capability", a
// ["t", "task.request"] tag and a numeric max_cost_usd (SPEC §5.3).
func LiveRequest(a Agent, at, deadline int64, credits int64) *protocol.Event {
	content := map[string]any{
		"cap":         Capability,
		"input":       map[string]any{"text": "Bonjour"},
		"constraints": map[string]any{"max_cost_usd": 0.1, "deadline_unix": deadline},
		"reward":      map[string]any{"currency": "credit", "amount": credits, "payment_method": protocol.PaymentANP2Credit},
	}
	return a.Sign(protocol.KindTaskRequest, at, content, []string{"t", "task.request"})
}

// LiveResult returns a kind 52 in the shape the live network's seed
// translator publishes: no ["e", _, "accept"] tag.
func LiveResult(a Agent, at int64, task *protocol.Event) *protocol.Event {
	content := map[string]any{"task_id": task.ID, "output": map[string]any{"text": "hello"}, "output_format": "json"}
	return a.Sign(protocol.KindTaskResult, at, content, root(task), []string{"e", task.ID, "result"}, []string{"p", task.AgentID})
}

// Quote returns a kind 51 by a for task quoting amount in currency.
func Quote(a Agent, at int64, task *protocol.Event, currency, amount string) *protocol.Event {
	content := map[string]any{"eta_unix": at + 60, "price_quote": map[string]any{"currency": currency, "amount": amount}}
	return a.Sign(protocol.KindTaskAccept, at, content, root(task), []string{"e", task.ID, "accept"}, []string{"p", task.AgentID})
}

// GarbageRequest returns a validly signed kind 50 whose content breaks the
// kind rule (a JSON string, not an object).
func GarbageRequest(a Agent, at int64) *protocol.Event {
	return a.Sign(protocol.KindTaskRequest, at, `"please translate"`, []string{"t", "task.request"})
}
