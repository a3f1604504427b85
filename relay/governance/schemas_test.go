package governance_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay"
	"github.com/anp2net/relay/relay/directory"
	"github.com/anp2net/relay/relay/governance"
	"github.com/anp2net/relay/relay/relaytest"
	"github.com/anp2net/relay/tasks/taskstest"
)

// locs returns the failing paths a schema_violation's detail names
// ("<schema>.<path>: <what failed>", separated by "; ").
func locs(t *testing.T, ans relaytest.Answer) []string {
	t.Helper()
	var body struct{ Detail, Code string }
	if err := json.Unmarshal(ans.Body, &body); err != nil || body.Code != governance.CodeSchemaViolation {
		t.Fatalf("%s: %v", ans.Body, err)
	}
	var out []string
	for _, part := range strings.Split(strings.TrimPrefix(body.Detail, "content breaks its schema: "), "; ") {
		loc, _, _ := strings.Cut(part, ": ")
		out = append(out, loc)
	}
	return out
}

// TestSchemaRegistry: a structured heartbeat (§9.3, kind 1001) that breaks
// anp.heartbeat.v1 is refused 400 with its failing paths (and so reported by a dry run), then
// accepted when fixed; an unknown schema name is accepted and counted; a
// schema defined by a PIP is enforced once the PIP is accepted; profiles'
// comm_tiers and preferred_schemas appear on /agents/{id}.
func TestSchemaRegistry(t *testing.T) {
	r := relaytest.Start(t, []relay.Module{newKeys().module(t), directory.NewModule()})
	now := func() int64 { return r.Clock.Now().Unix() }
	a := taskstest.NewAgent("beater")
	s := []string{"s", "anp.heartbeat.v1"}
	bad := a.Sign(1001, now(), `{"v":1,"st":"sleepy","q":-3}`, s)
	ans := post(t, r, bad, 400, "")
	got := locs(t, ans)
	slices.Sort(got)
	want := []string{"anp.heartbeat.v1.q", "anp.heartbeat.v1.st"}
	if !slices.Equal(got, want) {
		t.Fatalf("paths %v, want %v (%s)", got, want, ans.Body)
	}
	dry := r.Do(t, "POST", "/events/dry-run", "application/json", protocol.AppendJSON(nil, bad))
	if dry.Status != 200 || !contains(dry.JSON(t)["violations"], governance.CodeSchemaViolation) {
		t.Fatalf("dry run: %s", dry.Body)
	}
	post(t, r, a.Sign(1001, now(), `not json`, s), 400, "")
	post(t, r, a.Sign(1001, now(), `{"v":1,"st":"ok","q":42}`, s), 200, "")
	// The herald seed agent's kind 1: plain text under the same s tag. Not
	// a structured kind: stored, with a warning naming the departure.
	herald := taskstest.HeraldHeartbeat(a, now())
	hans := post(t, r, herald, 200, "")
	var hb struct {
		Warnings []protocol.Warning `json:"warnings"`
	}
	if json.Unmarshal(hans.Body, &hb) != nil || len(hb.Warnings) != 1 || hb.Warnings[0].Code != protocol.WarnSchema {
		t.Fatalf("herald heartbeat answer: %s", hans.Body)
	}
	post(t, r, a.Sign(1001, now(), `{"anything":true}`, []string{"s", "x.unknown.v1"}), 200, "")

	var list struct {
		Schemas []struct {
			Name    string `json:"name"`
			Defined bool   `json:"defined"`
			Source  string `json:"source"`
			Count   int    `json:"usage_count"`
		} `json:"schemas"`
	}
	getJSON(t, r, "/schemas", &list)
	if len(list.Schemas) != 2 || list.Schemas[0].Name != "anp.heartbeat.v1" || !list.Schemas[0].Defined ||
		list.Schemas[0].Count != 2 || list.Schemas[1].Defined || list.Schemas[1].Count != 1 {
		t.Fatalf("schemas: %+v", list)
	}
	var one map[string]any
	getJSON(t, r, "/schemas/anp.heartbeat.v1", &one)
	if one["definition"] == nil || one["source"] != "builtin" {
		t.Fatalf("schema: %v", one)
	}
	var voc map[string]any
	getJSON(t, r, "/vocab/anp.argot.status.v1", &voc)
	if voc["definition"].(map[string]any)["S"] != "status" {
		t.Fatalf("vocab: %v", voc)
	}
	for path, code := range map[string]int{"/schemas/nope": 404, "/vocab/nope": 404, "/schemas?x=1": 400} {
		if ans := r.Do(t, "GET", path, "", nil); ans.Status != code {
			t.Fatalf("%s: %d", path, ans.Status)
		}
	}

	// A PIP defines anp.capping.v1 and a vocabulary; four trusted agents
	// support it.
	var trusted []taskstest.Agent
	for _, n := range []string{"sa", "sb", "sc", "sd"} {
		trusted = append(trusted, taskstest.NewAgent(n))
	}
	for _, vn := range []string{"sv1", "sv2", "sv3"} {
		v := taskstest.NewAgent(vn)
		for _, x := range trusted {
			post(t, r, v.Sign(protocol.KindTrustVote, now(), map[string]any{"score": 1}, []string{"p", x.ID}), 200, "")
		}
	}
	b, _ := json.Marshal(map[string]any{"pip_number": "PIP-010", "title": "capping", "reference_impl": "https://example.org/c",
		"schemas": map[string]any{"anp.capping.v1": map[string]any{"type": "object", "required": []string{"cap"},
			"properties": map[string]any{"cap": map[string]any{"type": "string"}}}},
		"vocab": map[string]any{"anp.argot.capping.v1": map[string]any{"c": "cap"}}})
	content := string(b)
	post(t, r, trusted[0].Sign(governance.KindPIP, now(), content,
		append([][]string{{"status", "discussion"}}, cosigns(t, content, trusted[1:]...)...)...), 200, "")
	capping := []string{"s", "anp.capping.v1"}
	post(t, r, a.Sign(1002, now(), `{"cap":7}`, capping), 200, "") // not yet accepted: unknown name
	r.Clock.Add(15 * 24 * time.Hour)
	ans = post(t, r, a.Sign(1002, now(), `{"cap":7}`, capping), 400, "")
	if got := locs(t, ans); len(got) != 1 || got[0] != "anp.capping.v1.cap" {
		t.Fatalf("capping paths: %v", got)
	}
	post(t, r, a.Sign(1002, now(), `{"cap":"translate"}`, capping), 200, "")
	getJSON(t, r, "/schemas/anp.capping.v1", &one)
	if one["source"] != "pip" || one["pip_number"] != "PIP-010" || one["usage_count"] != float64(2) {
		t.Fatalf("capping schema: %v", one)
	}
	getJSON(t, r, "/vocab/anp.argot.capping.v1", &voc)

	// §9.6 negotiation fields on the agent row.
	post(t, r, a.Sign(protocol.KindProfile, now(), map[string]any{"name": "beater", "comm_tiers": []int{1, 3},
		"preferred_schemas": []string{"anp.heartbeat.v1"}}), 200, "")
	var row map[string]any
	getJSON(t, r, "/agents/"+a.ID, &row)
	if tiers, _ := row["comm_tiers"].([]any); len(tiers) != 2 || row["preferred_schemas"].([]any)[0] != "anp.heartbeat.v1" {
		t.Fatalf("agent row: %v", row)
	}
}
