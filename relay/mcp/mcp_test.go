package mcp_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay"
	"github.com/anp2net/relay/relay/directory"
	"github.com/anp2net/relay/relay/mcp"
	"github.com/anp2net/relay/relay/relaytest"
	"github.com/anp2net/relay/tasks/taskstest"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

const vt = relaytest.VectorTime

// connect runs a relay with the MCP module (SPEC.md as its spec) and
// connects the SDK's own client to it over streamable HTTP.
func connect(t *testing.T) (*relaytest.Relay, *sdk.ClientSession, context.Context) {
	t.Helper()
	r := relaytest.Start(t, []relay.Module{directory.NewModule(), mcp.NewModule(mcp.Options{SpecPath: "../../SPEC.md"})})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	c := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: r.URL + "/mcp", DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return r, cs, ctx
}

func call(t *testing.T, ctx context.Context, cs *sdk.ClientSession, name string, args any) (string, bool) {
	t.Helper()
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if len(res.Content) != 1 {
		t.Fatalf("%s: %d contents", name, len(res.Content))
	}
	return res.Content[0].(*sdk.TextContent).Text, res.IsError
}

// TestTools: the SDK client lists the tools and calls them against a real
// relay; answers are the HTTP API's.
func TestTools(t *testing.T) {
	r, cs, ctx := connect(t)
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
	}
	for _, want := range []string{"query_events", "get_event", "get_trust", "get_task", "list_tasks", "get_credit",
		"get_agent", "list_agents", "search_capabilities", "dry_run_event", "publish_event"} {
		if !slices.Contains(names, want) {
			t.Fatalf("tool %s missing from %v", want, names)
		}
	}
	a := taskstest.Pool(2)
	post := a[0].Sign(protocol.KindPost, vt-30, "hello mcp", []string{"t", "lobby"})
	vote := a[1].Sign(protocol.KindTrustVote, vt-20, map[string]any{"score": 1}, []string{"p", a[0].ID})
	req := taskstest.Request(a[0], vt-10, vt+3600, taskstest.Reward{}, false)
	r.PostAll(t, []*protocol.Event{post, vote, req}, 1)

	text, isErr := call(t, ctx, cs, "query_events", map[string]any{"kinds": []int{1}, "tags": map[string][]string{"t": {"lobby"}}})
	var evs []map[string]any
	if isErr || json.Unmarshal([]byte(text), &evs) != nil || len(evs) != 1 || evs[0]["id"] != post.ID {
		t.Fatalf("query_events: %v %s", isErr, text)
	}
	if text, isErr := call(t, ctx, cs, "get_event", map[string]any{"id": post.ID}); isErr || !strings.Contains(text, post.ID) {
		t.Fatalf("get_event: %s", text)
	}
	if text, isErr := call(t, ctx, cs, "get_event", map[string]any{"id": strings.Repeat("0", 64)}); !isErr || !strings.Contains(text, `"code"`) {
		t.Fatalf("missing event: %v %s", isErr, text)
	}
	if text, _ := call(t, ctx, cs, "get_event", map[string]any{"id": "nope"}); !strings.Contains(text, "invalid_parameter") {
		t.Fatalf("bad id: %s", text)
	}
	httpTrust := r.Do(t, "GET", "/trust/"+a[0].ID, "", nil)
	if text, isErr := call(t, ctx, cs, "get_trust", map[string]any{"id": a[0].ID}); isErr || text != string(httpTrust.Body) {
		t.Fatalf("get_trust differs from GET /trust:\n%s\n%s", text, httpTrust.Body)
	}
	if text, isErr := call(t, ctx, cs, "get_task", map[string]any{"id": req.ID}); isErr || !strings.Contains(text, `"status"`) {
		t.Fatalf("get_task: %s", text)
	}
	if text, isErr := call(t, ctx, cs, "list_tasks", map[string]any{"requester": a[0].ID}); isErr || !strings.Contains(text, req.ID) {
		t.Fatalf("list_tasks: %s", text)
	}
	if text, isErr := call(t, ctx, cs, "get_credit", map[string]any{"id": a[0].ID}); isErr || !strings.Contains(text, `"balance"`) {
		t.Fatalf("get_credit: %s", text)
	}
	if text, isErr := call(t, ctx, cs, "list_agents", map[string]any{}); isErr || !strings.Contains(text, a[1].ID) {
		t.Fatalf("list_agents: %s", text)
	}
	if text, isErr := call(t, ctx, cs, "get_agent", map[string]any{"id": a[0].ID}); isErr || !strings.Contains(text, a[0].ID) {
		t.Fatalf("get_agent: %s", text)
	}
	if _, isErr := call(t, ctx, cs, "search_capabilities", map[string]any{"capability": "x"}); isErr {
		t.Fatal("search_capabilities failed")
	}
}

// TestPublish: dry-run and publish of a caller-signed event go through
// every publish rule (a dry-run reports violations as POST
// /events/dry-run does: a successful call with valid false), and leave
// the log untouched until the real publish.
func TestPublish(t *testing.T) {
	r, cs, ctx := connect(t)
	a := taskstest.Pool(1)
	e := a[0].Sign(protocol.KindPost, vt-5, "via mcp")
	raw := string(protocol.AppendJSON(nil, e))
	forged := *e
	forged.Content = "tampered"
	if text, isErr := call(t, ctx, cs, "dry_run_event", map[string]any{"event_json": string(protocol.AppendJSON(nil, &forged))}); isErr || !strings.Contains(text, `"valid":false`) || !strings.Contains(text, "id_mismatch") {
		t.Fatalf("dry-run forged: %v %s", isErr, text)
	}
	if text, isErr := call(t, ctx, cs, "dry_run_event", map[string]any{"event_json": raw}); isErr || !strings.Contains(text, `"valid":true`) {
		t.Fatalf("dry-run: %s", text)
	}
	if n := r.Count(t); n != 0 {
		t.Fatalf("dry-run stored: %d", n)
	}
	if text, isErr := call(t, ctx, cs, "publish_event", map[string]any{"event_json": string(protocol.AppendJSON(nil, &forged))}); !isErr || !strings.Contains(text, `"code":"id_mismatch"`) {
		t.Fatalf("publish forged: %v %s", isErr, text)
	}
	if text, _ := call(t, ctx, cs, "publish_event", map[string]any{}); !strings.Contains(text, "invalid_parameter") {
		t.Fatalf("no event: %s", text)
	}
	var obj map[string]any
	_ = json.Unmarshal([]byte(raw), &obj)
	text, isErr := call(t, ctx, cs, "publish_event", map[string]any{"event": obj})
	if isErr || !strings.Contains(text, `"accepted":true`) {
		t.Fatalf("publish: %s", text)
	}
	if n := r.Count(t); n != 1 {
		t.Fatalf("log holds %d", n)
	}
	if text, _ := call(t, ctx, cs, "publish_event", map[string]any{"event_json": raw}); !strings.Contains(text, `"duplicate":true`) {
		t.Fatalf("second publish: %s", text)
	}
}

// TestResources: the routes resource is generated from the router; SPEC
// sections are served from the file given in Options.SpecPath.
func TestResources(t *testing.T) {
	_, cs, ctx := connect(t)
	list, err := cs.ListResources(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var uris []string
	for _, res := range list.Resources {
		uris = append(uris, res.URI)
	}
	if !slices.Contains(uris, "anp2://relay/routes") || !slices.Contains(uris, "anp2://spec/3") {
		t.Fatalf("resources %v", uris)
	}
	got, err := cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: "anp2://relay/routes"})
	if err != nil || !strings.Contains(got.Contents[0].Text, "POST /mcp\n") || !strings.Contains(got.Contents[0].Text, "GET /events\n") {
		t.Fatalf("routes: %v %v", err, got)
	}
	got, err = cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: "anp2://spec/3"})
	if err != nil || !strings.HasPrefix(got.Contents[0].Text, "## 3. HTTP API") {
		t.Fatalf("spec 3: %v %v", err, got)
	}
	if _, err := cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: "anp2://spec/none"}); err == nil {
		t.Fatal("unknown resource read")
	}
}

func TestSections(t *testing.T) {
	doc := "# Title\nintro\n## 1. Events\na\n### 1.1 x\nb\n## Odd Name: here\nc\n"
	got := mcp.Sections(doc)
	want := []mcp.Section{
		{Slug: "preamble", Title: "Preamble", Text: "# Title\nintro\n"},
		{Slug: "1", Title: "1. Events", Text: "## 1. Events\na\n### 1.1 x\nb\n"},
		{Slug: "odd-name-here", Title: "Odd Name: here", Text: "## Odd Name: here\nc\n"},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("got %+v", got)
	}
}

// FuzzSections: the sections of any document put back together are the
// document less whitespace-only sections (so, ignoring whitespace, the
// document), each starts with its heading, and a heading with letters or
// digits gets a non-empty slug.
func FuzzSections(f *testing.F) {
	f.Add("# T\n## 1. A\nx\n## B c\n")
	f.Add("## \n## 2.\n")
	noSpace := func(s string) string { return strings.Join(strings.Fields(s), "") }
	f.Fuzz(func(t *testing.T, doc string) {
		var b strings.Builder
		for i, s := range mcp.Sections(doc) {
			if i > 0 || s.Slug != "preamble" {
				if !strings.HasPrefix(s.Text, "## ") {
					t.Fatalf("section %q does not start with its heading", s.Text)
				}
				if s.Slug == "" && strings.ContainsFunc(s.Title, func(r rune) bool { return r >= 'a' && r <= 'z' || r >= '0' && r <= '9' }) {
					t.Fatalf("empty slug for %q", s.Title)
				}
			}
			b.WriteString(s.Text)
		}
		if noSpace(b.String()) != noSpace(doc) {
			t.Fatalf("sections of %q rebuild %q", doc, b.String())
		}
	})
}
