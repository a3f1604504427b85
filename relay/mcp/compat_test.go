package mcp_test

import (
	"encoding/json"
	"testing"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/tasks/taskstest"
)

// TestReferenceTools: the reference relay's tool names are listed with its
// input schemas, and answer its shapes to the SDK's client, so an agent
// configured for the reference relay's /mcp works here unchanged.
func TestReferenceTools(t *testing.T) {
	r, cs, ctx := connect(t)
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	schemas := map[string]map[string]any{}
	for _, tl := range tools.Tools {
		b, _ := json.Marshal(tl.InputSchema)
		var m map[string]any
		json.Unmarshal(b, &m)
		schemas[tl.Name] = m
	}
	for _, name := range []string{"anp2_query", "anp2_get_capabilities", "anp2_get_agents", "anp2_get_stats", "anp2_get_balance", "query_events"} {
		if schemas[name] == nil || schemas[name]["type"] != "object" {
			t.Fatalf("tool %s missing or without an object schema: %v", name, schemas[name])
		}
	}
	limit := schemas["anp2_query"]["properties"].(map[string]any)["limit"].(map[string]any)
	if limit["maximum"] != float64(200) || limit["default"] != float64(20) {
		t.Fatalf("anp2_query limit schema: %v", limit)
	}
	if req, _ := schemas["anp2_get_balance"]["required"].([]any); len(req) != 1 || req[0] != "agent_id" {
		t.Fatalf("anp2_get_balance schema: %v", schemas["anp2_get_balance"])
	}

	a := taskstest.Pool(2)
	lobby := a[0].Sign(protocol.KindPost, vt-30, "hello", []string{"t", "lobby"})
	other := a[1].Sign(protocol.KindPost, vt-20, "elsewhere", []string{"t", "dev"})
	profile := a[0].Sign(protocol.KindProfile, vt-10, `{"name":"ref-client"}`)
	r.PostAll(t, []*protocol.Event{lobby, other, profile}, 1)

	var q struct{ Events []protocol.Event }
	text, isErr := call(t, ctx, cs, "anp2_query", map[string]any{"kind": 1, "topic": "lobby", "limit": 500})
	if isErr || json.Unmarshal([]byte(text), &q) != nil || len(q.Events) != 1 || q.Events[0].ID != lobby.ID {
		t.Fatalf("anp2_query: %v %s", isErr, text)
	}
	text, isErr = call(t, ctx, cs, "anp2_query", map[string]any{"author": a[1].ID})
	if isErr || json.Unmarshal([]byte(text), &q) != nil || len(q.Events) != 1 || q.Events[0].ID != other.ID {
		t.Fatalf("anp2_query by author: %v %s", isErr, text)
	}
	if text, isErr = call(t, ctx, cs, "anp2_query", map[string]any{"kind": "one"}); !isErr {
		t.Fatalf("anp2_query with a string kind: %s", text)
	}

	var stats struct {
		TotalEvents  int `json:"total_events"`
		UniqueAgents int `json:"unique_agents"`
		ProfileNodes int `json:"profile_nodes"`
	}
	if text, isErr = call(t, ctx, cs, "anp2_get_stats", nil); isErr || json.Unmarshal([]byte(text), &stats) != nil ||
		stats.TotalEvents != 3 || stats.UniqueAgents != 2 || stats.ProfileNodes != 1 {
		t.Fatalf("anp2_get_stats: %s", text)
	}
	var agents struct {
		Agents []struct {
			AgentID       string  `json:"agent_id"`
			LatestProfile *string `json:"latest_profile"`
		}
	}
	if text, isErr = call(t, ctx, cs, "anp2_get_agents", map[string]any{}); isErr || json.Unmarshal([]byte(text), &agents) != nil || len(agents.Agents) != 2 {
		t.Fatalf("anp2_get_agents: %s", text)
	}
	var caps struct{ Capabilities []any }
	if text, isErr = call(t, ctx, cs, "anp2_get_capabilities", nil); isErr || json.Unmarshal([]byte(text), &caps) != nil || caps.Capabilities == nil {
		t.Fatalf("anp2_get_capabilities: %s", text)
	}
	var acc struct {
		AgentID string `json:"agent_id"`
		Balance json.Number
	}
	if text, isErr = call(t, ctx, cs, "anp2_get_balance", map[string]any{"agent_id": a[0].ID}); isErr || json.Unmarshal([]byte(text), &acc) != nil ||
		acc.AgentID != a[0].ID || acc.Balance != "0" {
		t.Fatalf("anp2_get_balance: %s", text)
	}
	if text, isErr = call(t, ctx, cs, "anp2_get_balance", map[string]any{"agent_id": "xyz"}); !isErr {
		t.Fatalf("anp2_get_balance with a bad id: %s", text)
	}
}
