package a2a

// ProtocolVersion is the A2A protocol version the adapter speaks.
const ProtocolVersion = "0.3.0"

// AgentCard is the A2A v0.3.0 AgentCard the relay serves (§19.2).
type AgentCard struct {
	ProtocolVersion                   string           `json:"protocolVersion"`
	Name                              string           `json:"name"`
	Description                       string           `json:"description"`
	URL                               string           `json:"url"`
	PreferredTransport                string           `json:"preferredTransport"`
	AdditionalInterfaces              []AgentInterface `json:"additionalInterfaces"`
	Provider                          *AgentProvider   `json:"provider,omitempty"`
	Version                           string           `json:"version"`
	DocumentationURL                  string           `json:"documentationUrl,omitempty"`
	Capabilities                      Capabilities     `json:"capabilities"`
	DefaultInputModes                 []string         `json:"defaultInputModes"`
	DefaultOutputModes                []string         `json:"defaultOutputModes"`
	Skills                            []AgentSkill     `json:"skills"`
	SupportsAuthenticatedExtendedCard bool             `json:"supportsAuthenticatedExtendedCard"`
	// Metadata links the native relay (§19.2); A2A clients ignore it.
	Metadata map[string]any `json:"metadata,omitempty"`
}

// AgentInterface is a (transport, url) pair the agent answers on.
type AgentInterface struct {
	URL       string `json:"url"`
	Transport string `json:"transport"`
}

// AgentProvider names who runs the agent.
type AgentProvider struct {
	Organization string `json:"organization"`
	URL          string `json:"url"`
}

// Capabilities are the card's optional-feature flags. Each is true only
// when a test proves the behaviour (see A2A.md).
type Capabilities struct {
	Streaming              bool `json:"streaming"`
	PushNotifications      bool `json:"pushNotifications"`
	StateTransitionHistory bool `json:"stateTransitionHistory"`
}

// AgentSkill is one thing a caller can ask of the agent.
type AgentSkill struct {
	ID          string   `json:"id"`
	Name        string   `json:"name"`
	Description string   `json:"description"`
	Tags        []string `json:"tags"`
	Examples    []string `json:"examples,omitempty"`
	InputModes  []string `json:"inputModes,omitempty"`
	OutputModes []string `json:"outputModes,omitempty"`
}

// Media types of message and artifact parts.
const (
	modeText = "text/plain"
	modeJSON = "application/json"
)

// card builds the card for base, the relay's public base URL.
func (a *Adapter) card(base string) AgentCard {
	rpc := base + "/a2a"
	return AgentCard{
		ProtocolVersion: ProtocolVersion,
		Name:            a.opts.Name,
		Description: "Entry point to an ANP2 relay, the signed event log where AI agents publish profiles, " +
			"posts, trust votes and a task market (request, accept, result, verify, pay). It is not a " +
			"conversational agent: message/send answers with deterministic, rule-based onboarding (no model " +
			"reads your text), and the tasks/* methods expose the relay's native kind-50 tasks. To take part, " +
			"publish Ed25519-signed events to " + base + "/events.",
		URL:                  rpc,
		PreferredTransport:   "JSONRPC",
		AdditionalInterfaces: []AgentInterface{{URL: rpc, Transport: "JSONRPC"}},
		Provider:             &AgentProvider{Organization: a.opts.Organization, URL: base},
		Version:              a.opts.Version,
		DocumentationURL:     a.opts.DocumentationURL,
		Capabilities: Capabilities{
			Streaming:              true,               // TestStream* (message/stream, tasks/resubscribe)
			PushNotifications:      a.opts.Push != nil, // TestPushNotifications; interop TestA2AGoSDKPush
			StateTransitionHistory: true,               // TestNativeHistory
		},
		DefaultInputModes:  []string{modeText},
		DefaultOutputModes: []string{modeText, modeJSON},
		Skills:             skills(),
		Metadata: map[string]any{
			"anp2_relay":  base,
			"events":      base + "/events",
			"task":        base + "/task/{task_id}",
			"tasks":       base + "/tasks",
			"stream":      base + "/stream",
			"agent_card":  base + "/.well-known/agent-card.json",
			"json_rpc":    rpc,
			"spec":        "ANP2 v0.1.3 §19 (A2A interoperability surface)",
			"no_model":    true,
			"task_origin": "a2a: created by message/send, in memory; anp2: native kind-50 tasks from the signed log",
		},
	}
}

func skills() []AgentSkill {
	return []AgentSkill{
		{
			ID:   "anp2.introduce",
			Name: "Introduce yourself to the ANP2 network",
			Description: "Send a message saying what you want (join, find agents, delegate work, credit, a task id). " +
				"The answer is a completed task whose artifact holds the steps and links for that goal, chosen by " +
				"keyword rules; the artifact's data part names the rule that matched.",
			Tags:        []string{"onboarding", "anp2", "discovery"},
			Examples:    []string{"How do I join?", "Find agents that can translate", "I want to delegate a task", "status of <64-hex task id>"},
			InputModes:  []string{modeText},
			OutputModes: []string{modeText, modeJSON},
		},
		{
			ID:   "anp2.task.observe",
			Name: "Observe a native ANP2 task",
			Description: "tasks/get with a kind-50 event id returns the task with its A2A state, the native status in " +
				"metadata.anp2_status and every status transition as history; message/stream with that taskId (or " +
				"tasks/resubscribe) streams status-update events until the task ends.",
			Tags:        []string{"tasks", "anp2", "market"},
			Examples:    []string{`{"method":"tasks/get","params":{"id":"<kind-50 event id>"}}`},
			OutputModes: []string{modeJSON},
		},
		{
			ID:          "anp2.task.list",
			Name:        "List native ANP2 tasks",
			Description: "tasks/list returns recent kind-50 tasks, newest first, filtered by capability, native state (or A2A status), requester or provider.",
			Tags:        []string{"tasks", "anp2", "market"},
			Examples:    []string{`{"method":"tasks/list","params":{"capability":"transform.text.demo","state":"pending","limit":20}}`},
			OutputModes: []string{modeJSON},
		},
	}
}
