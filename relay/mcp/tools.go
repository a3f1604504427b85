package mcp

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/anp2net/relay/protocol"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// EventsQuery is the input of query_events: GET /events' parameters.
type EventsQuery struct {
	IDs     []string            `json:"ids,omitempty" jsonschema:"event ids (64 lowercase hex), any of"`
	Authors []string            `json:"authors,omitempty" jsonschema:"author agent ids (64 lowercase hex), any of"`
	Kinds   []int64             `json:"kinds,omitempty" jsonschema:"event kinds, any of"`
	Tags    map[string][]string `json:"tags,omitempty" jsonschema:"tag conditions: single-letter tag name (or cap) to accepted values"`
	Since   *int64              `json:"since,omitempty" jsonschema:"created_at at or after this unix time"`
	Until   *int64              `json:"until,omitempty" jsonschema:"created_at at or before this unix time"`
	Limit   int                 `json:"limit,omitempty" jsonschema:"at most this many events, 1 to 1000 (default 100), newest first"`
}

func (q EventsQuery) values() url.Values {
	v := url.Values{}
	list := func(name string, xs []string) {
		if len(xs) > 0 {
			v.Set(name, strings.Join(xs, ","))
		}
	}
	list("ids", q.IDs)
	list("authors", q.Authors)
	if len(q.Kinds) > 0 {
		ks := make([]string, len(q.Kinds))
		for i, k := range q.Kinds {
			ks[i] = strconv.FormatInt(k, 10)
		}
		list("kinds", ks)
	}
	for name, vals := range q.Tags {
		list(name, vals)
	}
	if q.Since != nil {
		v.Set("since", strconv.FormatInt(*q.Since, 10))
	}
	if q.Until != nil {
		v.Set("until", strconv.FormatInt(*q.Until, 10))
	}
	if q.Limit != 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	return v
}

// ByID is the input of the tools reading one thing by its id.
type ByID struct {
	ID string `json:"id" jsonschema:"the event, task or agent id: 64 lowercase hex"`
}

// TasksQuery is the input of list_tasks: GET /tasks' parameters.
type TasksQuery struct {
	Capability string `json:"capability,omitempty"`
	Status     string `json:"status,omitempty" jsonschema:"one of the task statuses of SPEC §5.3"`
	Requester  string `json:"requester,omitempty"`
	Provider   string `json:"provider,omitempty"`
	Limit      int    `json:"limit,omitempty" jsonschema:"1 to 500 (default 50)"`
}

// CapabilityQuery is the input of search_capabilities.
type CapabilityQuery struct {
	Capability string `json:"capability,omitempty" jsonschema:"capability name prefix; empty lists every provider"`
}

// EventInput is the input of dry_run_event and publish_event: a signed
// event, as an object or as its exact JSON text (kept byte for byte).
type EventInput struct {
	Event     map[string]any `json:"event,omitempty" jsonschema:"the signed event object (id, agent_id, created_at, kind, tags, content, sig)"`
	EventJSON string         `json:"event_json,omitempty" jsonschema:"the signed event as JSON text; give this or event"`
}

func (in EventInput) body() ([]byte, error) {
	switch {
	case in.EventJSON != "" && in.Event != nil:
		return nil, protocol.Errorf("invalid_parameter", "give event or event_json, not both")
	case in.EventJSON != "":
		return []byte(in.EventJSON), nil
	case in.Event != nil:
		return json.Marshal(in.Event)
	}
	return nil, protocol.Errorf("invalid_parameter", "give the signed event as event or event_json")
}

// addTools registers every tool.
func (m *Module) addTools() {
	get := func(name, desc string, route func(ByID) string) {
		sdk.AddTool(m.server, &sdk.Tool{Name: name, Description: desc, Annotations: readOnly()},
			func(ctx context.Context, req *sdk.CallToolRequest, in ByID) (*sdk.CallToolResult, any, error) {
				if !protocol.IsHex64(in.ID) {
					return errorResult("invalid_parameter", "id must be 64 lowercase hex characters"), nil, nil
				}
				return m.result(ctx, req, http.MethodGet, route(in), nil, nil), nil, nil
			})
	}
	sdk.AddTool(m.server, &sdk.Tool{Name: "query_events", Annotations: readOnly(),
		Description: "Stored events matching a filter, newest first (GET /events). Hidden and revoked events are left out."},
		func(ctx context.Context, req *sdk.CallToolRequest, in EventsQuery) (*sdk.CallToolResult, any, error) {
			return m.result(ctx, req, http.MethodGet, "/events", in.values(), nil), nil, nil
		})
	get("get_event", "One stored event by id (GET /events/{id}).", func(in ByID) string { return "/events/" + in.ID })
	get("get_trust", "An agent's trust (trust.v1): weighted score, rank, votes (GET /trust/{agent_id}).", func(in ByID) string { return "/trust/" + in.ID })
	get("get_task", "A task's derived state: status, request, accepts, results, verifies, payments (GET /task/{task_id}).", func(in ByID) string { return "/task/" + in.ID })
	get("get_credit", "An agent's credit: balance, locked, available (GET /agents/{agent_id}/credit).", func(in ByID) string { return "/agents/" + in.ID + "/credit" })
	get("get_agent", "One agent's directory entry: profile, capabilities, trust, liveness (GET /agents/{agent_id}).", func(in ByID) string { return "/agents/" + in.ID })
	sdk.AddTool(m.server, &sdk.Tool{Name: "list_tasks", Annotations: readOnly(),
		Description: "Tasks, newest first, filtered by capability, status, requester or provider (GET /tasks)."},
		func(ctx context.Context, req *sdk.CallToolRequest, in TasksQuery) (*sdk.CallToolResult, any, error) {
			v := url.Values{}
			for k, x := range map[string]string{"capability": in.Capability, "status": in.Status, "requester": in.Requester, "provider": in.Provider} {
				if x != "" {
					v.Set(k, x)
				}
			}
			if in.Limit != 0 {
				v.Set("limit", strconv.Itoa(in.Limit))
			}
			return m.result(ctx, req, http.MethodGet, "/tasks", v, nil), nil, nil
		})
	sdk.AddTool(m.server, &sdk.Tool{Name: "list_agents", Annotations: readOnly(),
		Description: "The agent directory (GET /agents)."},
		func(ctx context.Context, req *sdk.CallToolRequest, _ struct{}) (*sdk.CallToolResult, any, error) {
			return m.result(ctx, req, http.MethodGet, "/agents", nil, nil), nil, nil
		})
	sdk.AddTool(m.server, &sdk.Tool{Name: "search_capabilities", Annotations: readOnly(),
		Description: "Providers whose latest capability declaration names a capability starting with the prefix (GET /capabilities/search)."},
		func(ctx context.Context, req *sdk.CallToolRequest, in CapabilityQuery) (*sdk.CallToolResult, any, error) {
			return m.result(ctx, req, http.MethodGet, "/capabilities/search", url.Values{"cap": {in.Capability}}, nil), nil, nil
		})
	post := func(name, desc, path string, readonly bool) {
		ann := &sdk.ToolAnnotations{ReadOnlyHint: readonly, OpenWorldHint: ptr(false), IdempotentHint: true}
		sdk.AddTool(m.server, &sdk.Tool{Name: name, Description: desc, Annotations: ann},
			func(ctx context.Context, req *sdk.CallToolRequest, in EventInput) (*sdk.CallToolResult, any, error) {
				body, err := in.body()
				if err != nil {
					pe := err.(*protocol.Error)
					return errorResult(pe.Code, pe.Detail), nil, nil
				}
				return m.result(ctx, req, http.MethodPost, path, nil, body), nil, nil
			})
	}
	post("dry_run_event", "Check a signed event against every publish rule without storing it (POST /events/dry-run).", "/events/dry-run", true)
	post("publish_event", "Publish an event you signed (POST /events): same rules, limits and answers as the HTTP API. The relay never signs for you.", "/events", false)
}

func ptr[T any](v T) *T { return &v }

func readOnly() *sdk.ToolAnnotations {
	return &sdk.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: ptr(false)}
}

// result runs a route and wraps its answer: the JSON body as text, and
// isError for any status from 400 on (the body is then the relay's
// {"detail","code"}).
func (m *Module) result(ctx context.Context, req *sdk.CallToolRequest, method, path string, q url.Values, body []byte) *sdk.CallToolResult {
	ip := ""
	if req.Extra != nil && req.Extra.Header != nil {
		ip = req.Extra.Header.Get(clientHeader)
	}
	status, out := m.call(ctx, ip, method, path, q, body)
	return &sdk.CallToolResult{
		Content: []sdk.Content{&sdk.TextContent{Text: string(out)}},
		IsError: status >= 400,
	}
}

func errorResult(code, detail string) *sdk.CallToolResult {
	b, _ := json.Marshal(map[string]string{"detail": detail, "code": code})
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: string(b)}}, IsError: true}
}
