package taskstest

import (
	"fmt"

	"github.com/anp2net/relay/protocol"
)

// The network's own clients (the reference repository's Python SDK, MCP
// server, LangChain tools, browser-extension library and seed agents)
// publish these shapes, and the reference relay accepts them (SPEC §1.5,
// §5.3, decisions D17). Contents are written byte for byte as the clients
// write them (member order included); none of these builders mines PoW.

// SDKRequest is the Python SDK's kind 50 of a credit task
// (Agent.request_task): max_cost_usd "0" and a 10-credit reward.
func SDKRequest(a Agent, at, deadline int64) *protocol.Event {
	content := fmt.Sprintf(`{"capability":%q,"input":{"text":"Bonjour"},"constraints":{"max_cost_usd":"0","deadline_unix":%d},`+
		`"reward":{"currency":"credit","amount":10,"payment_method":"anp2_credit","escrow_method":"none"}}`, Capability, deadline)
	return a.Sign(protocol.KindTaskRequest, at, content, []string{"t", Capability}, []string{"cap_wanted", Capability})
}

// MCPRequest is the MCP tool anp2_request_task as documented: no
// max_cost_usd, a reward {"amount":10,"currency":"credit"} without
// payment_method, sent through the SDK's request_task.
func MCPRequest(a Agent, at, deadline int64) *protocol.Event {
	content := fmt.Sprintf(`{"capability":%q,"input":{"text":"Bonjour"},"constraints":{"deadline_unix":%d},"reward":{"amount":10,"currency":"credit"}}`, Capability, deadline)
	return a.Sign(protocol.KindTaskRequest, at, content, []string{"t", Capability}, []string{"cap_wanted", Capability})
}

// LangChainRequest is ANP2TaskTool's kind 50 with its defaults:
// constraints {"deadline_sec":600}, reward {"currency":"USD","amount":0}.
func LangChainRequest(a Agent, at int64) *protocol.Event {
	content := fmt.Sprintf(`{"capability":%q,"input":{"text":"Bonjour"},"constraints":{"deadline_sec":600},"reward":{"currency":"USD","amount":0}}`, Capability)
	return a.Sign(protocol.KindTaskRequest, at, content, []string{"t", Capability}, []string{"cap_wanted", Capability})
}

// ExtensionRequest is the browser extension's buildTaskRequest: tags
// [["t","task"],["cap",capability]], a 10-credit reward.
func ExtensionRequest(a Agent, at, deadline int64) *protocol.Event {
	content := fmt.Sprintf(`{"capability":%q,"input":{"text":"Bonjour"},"constraints":{"deadline_unix":%d,"max_cost_usd":"0"},`+
		`"reward":{"currency":"credit","amount":10,"payment_method":"anp2_credit"}}`, Capability, deadline)
	return a.Sign(protocol.KindTaskRequest, at, content, []string{"t", "task"}, []string{"cap", Capability})
}

// QuickstartRequest is the reference repository's quickstart
// (prototypes/quickstart, json.dumps with its default separators): a
// top-level task_id and deadline_at, the input as "payload", no
// constraints, a credit reward whose amount is a fraction (its --reward
// flag, here 10.5), tags ["task_id", …] and ["cap", capability]. The
// quickstart itself mines no proof of work.
func QuickstartRequest(a Agent, at, deadline int64) *protocol.Event {
	taskID := fmt.Sprintf("qs-%.7s-%x", a.ID, at)
	content := fmt.Sprintf(`{"task_id": %q, "capability": %q, "payload": {"text": "hello from anp2-quickstart"}, `+
		`"reward": {"currency": "credit", "amount": 10.5, "payment_method": "anp2_credit"}, "deadline_at": %d}`, taskID, Capability, deadline)
	return a.Sign(protocol.KindTaskRequest, at, content, []string{"task_id", taskID}, []string{"cap", Capability})
}

// SDKAccept is the SDK's kind 51 (Agent.accept_task) with the quote
// {"currency":"credit","amount":"10"}.
func SDKAccept(a Agent, at int64, task *protocol.Event) *protocol.Event {
	content := fmt.Sprintf(`{"eta_unix":%d,"price_quote":{"currency":"credit","amount":"10"},"terms_hash":""}`, at+60)
	return a.Sign(protocol.KindTaskAccept, at, content, root(task), []string{"e", task.ID, "accept"},
		[]string{"t", Capability}, []string{"p", task.AgentID})
}

// MCPAccept is anp2_accept_task with the quote its documentation shows,
// {"amount":10,"currency":"credit"}.
func MCPAccept(a Agent, at int64, task *protocol.Event) *protocol.Event {
	content := fmt.Sprintf(`{"eta_unix":%d,"price_quote":{"amount":10,"currency":"credit"},"terms_hash":""}`, at+60)
	return a.Sign(protocol.KindTaskAccept, at, content, root(task), []string{"e", task.ID, "accept"},
		[]string{"t", Capability}, []string{"p", task.AgentID})
}

// SeedProviderAccept is the kind 51 of the seed providers timenow,
// jsonformat, summarize and demoecho (through the SDK's accept_task): a
// free USD quote and a terms_hash that is a label, not a hash.
func SeedProviderAccept(a Agent, at int64, task *protocol.Event) *protocol.Event {
	content := fmt.Sprintf(`{"eta_unix":%d,"price_quote":{"currency":"USD","amount":0},"terms_hash":"free-no-terms"}`, at+5)
	return a.Sign(protocol.KindTaskAccept, at, content, root(task), []string{"e", task.ID, "accept"},
		[]string{"t", Capability}, []string{"p", task.AgentID})
}

// ExtensionAccept is the browser extension's buildAccept: one
// ["e", task, "accept"] tag and empty content.
func ExtensionAccept(a Agent, at int64, task *protocol.Event) *protocol.Event {
	return a.Sign(protocol.KindTaskAccept, at, "", []string{"e", task.ID, "accept"})
}

// SDKResult is the SDK's kind 52 (Agent.submit_result) without the
// optional accept, t and p tags.
func SDKResult(a Agent, at int64, task *protocol.Event) *protocol.Event {
	content := fmt.Sprintf(`{"task_id":%q,"output":{"text":"hello"},"runtime_ms":318,"output_format":"json"}`, task.ID)
	return a.Sign(protocol.KindTaskResult, at, content, root(task), []string{"e", task.ID, "result"})
}

// ExtensionResult is the browser extension's buildResult: one
// ["e", task, "result"] tag and content {"output":…}.
func ExtensionResult(a Agent, at int64, task *protocol.Event) *protocol.Event {
	return a.Sign(protocol.KindTaskResult, at, `{"output":"hello"}`, []string{"e", task.ID, "result"})
}

// SDKVerify is the SDK's kind 53 (Agent.verify_task) without the optional
// result, t and p tags.
func SDKVerify(a Agent, at int64, task *protocol.Event, verdict string) *protocol.Event {
	content := fmt.Sprintf(`{"task_id":%q,"verdict":%q,"score":1.0,"reasons":[],"evidence_event_ids":[]}`, task.ID, verdict)
	return a.Sign(protocol.KindTaskVerify, at, content, root(task), []string{"e", task.ID, "verify"})
}

// MCPRelease is anp2_release_payment's kind 54: no p tag (the tool
// cannot pass one), a credit announcement.
func MCPRelease(a Agent, at int64, task *protocol.Event) *protocol.Event {
	content := fmt.Sprintf(`{"task_id":%q,"disposition":"release","payment_proof_url":"https://anp2.com/credit","amount":"10",`+
		`"currency":"credit","payment_method":"anp2_credit","tx_hash":"credit-1"}`, task.ID)
	return a.Sign(protocol.KindPayment, at, content, root(task), []string{"e", task.ID, "payment"})
}

// HeraldHeartbeat is the herald seed agent's kind 1: an s tag naming
// anp.heartbeat.v1 over plain-text content.
func HeraldHeartbeat(a Agent, at int64) *protocol.Event {
	return a.Sign(protocol.KindPost, at, "ANP2 heartbeat: 1234 events, 16 agents, relay ok",
		[]string{"t", "anp2.heartbeat"}, []string{"s", "anp.heartbeat.v1"})
}
