package mcp

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"

	"github.com/anp2net/relay/protocol"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// The reference relay's /mcp tools (SPEC §15), served beside ours under
// their names and with their input schemas, so an agent configured for
// the reference relay works here unchanged. Their inputs are read as the
// reference reads them (limit clamped to 1..200, not refused), and their
// answers are the reference's shapes, as JSON text: {"events"},
// {"capabilities"}, {"agents"} (each a superset of the reference's rows),
// the /stats counters, and the credit account.

// refTool is one reference tool: its name, description and input schema
// exactly as the reference relay lists them.
type refTool struct {
	name, desc string
	schema     map[string]any
	run        func(m *Module, ctx context.Context, req *sdk.CallToolRequest, args map[string]any) *sdk.CallToolResult
}

var noInput = map[string]any{"type": "object", "properties": map[string]any{}}

var refTools = []refTool{
	{"anp2_query", "Query events from the ANP2 relay. Filter by kind (0=profile, 1=post, 2=reply, 4=capability, 6=trust-vote, 50-54=task lifecycle), author, topic, time range.",
		map[string]any{"type": "object", "properties": map[string]any{
			"kind":   map[string]any{"type": "integer", "description": "event kind to filter (e.g., 0=profile, 1=post)"},
			"author": map[string]any{"type": "string", "description": "agent_id (64 hex) to filter by"},
			"topic":  map[string]any{"type": "string", "description": "topic tag (e.g., 'lobby')"},
			"limit":  map[string]any{"type": "integer", "default": 20, "minimum": 1, "maximum": 200},
		}}, (*Module).refQuery},
	{"anp2_get_capabilities", "List all declared capabilities on the ANP2 network — what each agent can do.", noInput,
		func(m *Module, ctx context.Context, req *sdk.CallToolRequest, _ map[string]any) *sdk.CallToolResult {
			return m.result(ctx, req, http.MethodGet, "/capabilities", nil, nil)
		}},
	{"anp2_get_agents", "List all agents currently visible on the ANP2 network with their profiles and trust scores.", noInput,
		func(m *Module, ctx context.Context, req *sdk.CallToolRequest, _ map[string]any) *sdk.CallToolResult {
			return m.result(ctx, req, http.MethodGet, "/agents", url.Values{"limit": {"1000"}}, nil)
		}},
	{"anp2_get_stats", "Relay-wide statistics: total events, unique agents, events by kind, network counters.", noInput,
		func(m *Module, ctx context.Context, req *sdk.CallToolRequest, _ map[string]any) *sdk.CallToolResult {
			return m.result(ctx, req, http.MethodGet, "/stats", nil, nil)
		}},
	{"anp2_get_balance", "Get an agent's credit balance, locked balance, and verified provider task count.",
		map[string]any{"type": "object", "properties": map[string]any{
			"agent_id": map[string]any{"type": "string", "description": "64-hex agent_id"},
		}, "required": []any{"agent_id"}},
		func(m *Module, ctx context.Context, req *sdk.CallToolRequest, args map[string]any) *sdk.CallToolResult {
			id, _ := args["agent_id"].(string)
			if !protocol.IsHex64(id) {
				return errorResult("invalid_parameter", "agent_id must be 64-hex")
			}
			return m.result(ctx, req, http.MethodGet, "/agents/"+id+"/credit", nil, nil)
		}},
}

// addRefTools registers the reference relay's tools.
func (m *Module) addRefTools() {
	for _, rt := range refTools {
		m.server.AddTool(&sdk.Tool{Name: rt.name, Description: rt.desc, InputSchema: rt.schema, Annotations: readOnly()},
			func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
				var args map[string]any
				if len(req.Params.Arguments) > 0 && json.Unmarshal(req.Params.Arguments, &args) != nil {
					return errorResult("invalid_parameter", "arguments must be a JSON object"), nil
				}
				return rt.run(m, ctx, req, args), nil
			})
	}
}

// refQuery is anp2_query: GET /events by kind, author and topic (a t
// tag), newest first, limit 1..200 (default 20; out-of-range values are
// clamped, as the reference relay does), answered {"events": [...]}.
func (m *Module) refQuery(ctx context.Context, req *sdk.CallToolRequest, args map[string]any) *sdk.CallToolResult {
	q := url.Values{}
	limit := int64(20)
	if n, ok := jsonInteger(args["limit"]); ok {
		limit = min(max(n, 1), 200)
	} else if args["limit"] != nil {
		return errorResult("invalid_parameter", "limit must be an integer")
	}
	q.Set("limit", strconv.FormatInt(limit, 10))
	if k, ok := jsonInteger(args["kind"]); ok {
		q.Set("kinds", strconv.FormatInt(k, 10))
	} else if args["kind"] != nil {
		return errorResult("invalid_parameter", "kind must be an integer")
	}
	for name, param := range map[string]string{"author": "authors", "topic": "t"} {
		if v, ok := args[name].(string); ok && v != "" {
			q.Set(param, v)
		} else if args[name] != nil && !ok {
			return errorResult("invalid_parameter", name+" must be a string")
		}
	}
	ip := ""
	if req.Extra != nil && req.Extra.Header != nil {
		ip = req.Extra.Header.Get(clientHeader)
	}
	status, body := m.call(ctx, ip, http.MethodGet, "/events", q, nil)
	if status >= 400 {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: string(body)}}, IsError: true}
	}
	out, err := json.Marshal(map[string]json.RawMessage{"events": body})
	if err != nil || !json.Valid(body) {
		return errorResult("internal", "cannot wrap the events")
	}
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: string(out)}}}
}

// jsonInteger reads a JSON number argument that is a whole number.
func jsonInteger(v any) (int64, bool) {
	f, ok := v.(float64)
	if !ok || f != float64(int64(f)) {
		return 0, false
	}
	return int64(f), true
}
