package taskstest

import "github.com/anp2net/relay/protocol"

// ClientStep is one request a network client sends and the warning codes
// the relay's answer lists for it (SPEC §1.5).
type ClientStep struct {
	Event    *protocol.Event
	Warnings []string
}

// ClientFlow is one client's task lifecycle and what it reads back once
// every step is stored: the task's status and the requester's and
// provider's credit balances.
type ClientFlow struct {
	Name                            string
	Task                            *protocol.Event
	Steps                           []ClientStep // the task first
	Requester, Provider             Agent
	Status                          string
	RequesterCredit, ProviderCredit string
}

// ClientFlows returns every client lifecycle of clients.go at time at,
// each with its own agents (so the balances are each flow's own): the
// SDK's credit lifecycle settled by MCP anp2_release_payment, an MCP
// accept on an SDK task beside an unbounded EUR bid, the browser
// extension's economy, the MCP request with no price cap and no payment
// method, a seed provider's free USD accept with a terms label, the
// quickstart's request (payload, deadline_at, a fractional credit amount)
// and the LangChain defaults. prepare, when not nil, is applied
// to each task (kind 50) before the events that name it are built: a
// relay process needs its proof of work (mine, then sign again).
func ClientFlows(at int64, prepare func(task *protocol.Event, requester Agent) *protocol.Event) []ClientFlow {
	ver := NewAgent("dropin-verifier")
	var out []ClientFlow
	w := func(codes ...string) []string { return codes }
	add := func(name string, task func(Agent) *protocol.Event, rest func(f *ClientFlow) []ClientStep, status, rb, pb string) {
		f := ClientFlow{Name: name, Requester: NewAgent(name + "/requester"), Provider: NewAgent(name + "/provider"),
			Status: status, RequesterCredit: rb, ProviderCredit: pb}
		f.Task = task(f.Requester)
		if prepare != nil {
			f.Task = prepare(f.Task, f.Requester)
		}
		f.Steps = rest(&f)
		out = append(out, f)
	}
	dl := at + 3600
	add("sdk", func(a Agent) *protocol.Event { return SDKRequest(a, at, dl) }, func(f *ClientFlow) []ClientStep {
		return []ClientStep{{f.Task, nil},
			{SDKAccept(f.Provider, at+10, f.Task), nil},
			{SDKResult(f.Provider, at+20, f.Task), w(protocol.WarnMissingP)},
			{SDKVerify(ver, at+30, f.Task, protocol.VerdictPassed), w(protocol.WarnVerifyNoResult, protocol.WarnMissingP)},
			{MCPRelease(f.Requester, at+40, f.Task), w(protocol.WarnMissingP)}}
	}, "paid", "-10", "9")
	add("mcp-accept", func(a Agent) *protocol.Event { return SDKRequest(a, at, dl) }, func(f *ClientFlow) []ClientStep {
		return []ClientStep{{f.Task, nil},
			{MCPAccept(f.Provider, at+10, f.Task), nil},
			{Quote(NewAgent("dropin-eur"), at+11, f.Task, "EUR", "5"), w(protocol.WarnQuoteUnbounded)},
			{SDKResult(f.Provider, at+20, f.Task), w(protocol.WarnMissingP)},
			{SDKVerify(ver, at+30, f.Task, protocol.VerdictPassed), w(protocol.WarnVerifyNoResult, protocol.WarnMissingP)}}
	}, "verified", "-10", "9")
	add("extension", func(a Agent) *protocol.Event { return ExtensionRequest(a, at, dl) }, func(f *ClientFlow) []ClientStep {
		return []ClientStep{{f.Task, w(protocol.WarnTaskTags, protocol.WarnTaskTags)},
			{ExtensionAccept(f.Provider, at+10, f.Task), w(protocol.WarnRootInferred, protocol.WarnMissingP, protocol.WarnNoQuote)},
			{ExtensionResult(f.Provider, at+20, f.Task), w(protocol.WarnRootInferred, protocol.WarnMissingP)},
			{SDKVerify(ver, at+30, f.Task, protocol.VerdictPassed), w(protocol.WarnVerifyNoResult, protocol.WarnMissingP)}}
	}, "verified", "-10", "9")
	add("mcp-request", func(a Agent) *protocol.Event { return MCPRequest(a, at, dl) }, func(f *ClientFlow) []ClientStep {
		return []ClientStep{{f.Task, w(protocol.WarnNoPriceCap, protocol.WarnNoPaymentMethod)},
			{MCPAccept(f.Provider, at+10, f.Task), nil}}
	}, "accepted", "0", "0")
	add("seed-provider", func(a Agent) *protocol.Event { return SDKRequest(a, at, dl) }, func(f *ClientFlow) []ClientStep {
		return []ClientStep{{f.Task, nil},
			{SeedProviderAccept(f.Provider, at+10, f.Task), w(protocol.WarnTermsHash)},
			{SDKResult(f.Provider, at+20, f.Task), w(protocol.WarnMissingP)},
			{SDKVerify(ver, at+30, f.Task, protocol.VerdictPassed), w(protocol.WarnVerifyNoResult, protocol.WarnMissingP)}}
	}, "verified", "-10", "9")
	add("quickstart", func(a Agent) *protocol.Event { return QuickstartRequest(a, at, dl) }, func(f *ClientFlow) []ClientStep {
		return []ClientStep{{f.Task, w(protocol.WarnNoInput, protocol.WarnNoPriceCap, protocol.WarnDeadline, protocol.WarnCreditAmount,
			protocol.WarnTaskTags, protocol.WarnTaskTags)},
			{ExtensionAccept(f.Provider, at+10, f.Task), w(protocol.WarnRootInferred, protocol.WarnMissingP, protocol.WarnNoQuote)},
			{SDKResult(f.Provider, at+20, f.Task), w(protocol.WarnMissingP)},
			{SDKVerify(ver, at+30, f.Task, protocol.VerdictPassed), w(protocol.WarnVerifyNoResult, protocol.WarnMissingP)}}
	}, "verified", "-10", "9")
	add("langchain", func(a Agent) *protocol.Event { return LangChainRequest(a, at) }, func(f *ClientFlow) []ClientStep {
		return []ClientStep{{f.Task, w(protocol.WarnNoPriceCap, protocol.WarnDeadline, protocol.WarnNoPaymentMethod)}}
	}, "pending", "0", "0")
	return out
}
