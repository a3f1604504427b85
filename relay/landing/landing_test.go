package landing_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay"
	"github.com/anp2net/relay/relay/directory"
	"github.com/anp2net/relay/relay/landing"
	"github.com/anp2net/relay/relay/mcp"
	"github.com/anp2net/relay/relay/relaytest"
	tt "github.com/anp2net/relay/tasks/taskstest"
	"github.com/labstack/echo/v4"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// start runs a relay with the landing module wired as cmd/anp2 wires it:
// the heartbeat reads the directory's counts.
func start(t *testing.T) *relaytest.Relay {
	dir := directory.NewModule()
	return relaytest.Start(t, []relay.Module{dir, mcp.NewModule(mcp.Options{}), landing.NewModule().SetStats(dir.Directory().Stats)})
}

type doc struct {
	OpenAPI string                                `json:"openapi"`
	Paths   map[string]map[string]json.RawMessage `json:"paths"`
}

func openAPI(t *testing.T, r *relaytest.Relay, path string) doc {
	t.Helper()
	ans := r.Do(t, "GET", path, "", nil, "Origin", "https://agent.example")
	var d doc
	if ans.Status != 200 || json.Unmarshal(ans.Body, &d) != nil || d.OpenAPI != "3.1.0" {
		t.Fatalf("GET %s: %d %.200s", path, ans.Status, ans.Body)
	}
	if ans.Header.Get("Access-Control-Allow-Origin") == "" {
		t.Fatalf("GET %s sends no CORS header", path)
	}
	return d
}

// TestOpenAPIDocumentsEveryMountedRoute: every route the router holds is
// in the document with its method, and every documented operation is
// mounted (a request to it is not the router's "no such route").
func TestOpenAPIDocumentsEveryMountedRoute(t *testing.T) {
	r := start(t)
	d := openAPI(t, r, "/openapi.json")
	wk := openAPI(t, r, "/.well-known/openapi.json")
	if len(wk.Paths) != len(d.Paths) {
		t.Fatalf("the two documents differ: %d and %d paths", len(wk.Paths), len(d.Paths))
	}
	e := r.Core.Handler().(*echo.Echo)
	mounted := 0
	for _, rt := range e.Routes() {
		if strings.HasPrefix(rt.Path, "/api/") || rt.Method == echo.RouteNotFound {
			continue
		}
		mounted++
		p := rt.Path
		for _, seg := range strings.Split(p, "/") {
			if strings.HasPrefix(seg, ":") {
				p = strings.Replace(p, seg, "{"+seg[1:]+"}", 1)
			}
		}
		if _, ok := d.Paths[p][strings.ToLower(rt.Method)]; !ok {
			t.Errorf("%s %s is mounted but not documented", rt.Method, rt.Path)
		}
	}
	documented := 0
	ids := map[string]bool{}
	for p, ops := range d.Paths {
		for method, raw := range ops {
			documented++
			var op struct{ OperationID string }
			json.Unmarshal(raw, &op)
			if ids[op.OperationID] {
				t.Errorf("operationId %s is not unique", op.OperationID)
			}
			ids[op.OperationID] = true
			url := p
			for strings.Contains(url, "{") {
				i, j := strings.Index(url, "{"), strings.Index(url, "}")
				url = url[:i] + strings.Repeat("a", 64) + url[j+1:]
			}
			if method != "get" {
				continue // a write with an empty body is refused by its handler, not the router
			}
			ans := r.Do(t, "GET", url, "", nil)
			// The router's own refusals; a handler may answer 404 or 405
			// itself (GET /mcp is the MCP transport's 405).
			if ans.Status == 404 && strings.Contains(string(ans.Body), "no such route") ||
				ans.Status == 405 && strings.Contains(string(ans.Body), "method_not_allowed") {
				t.Errorf("GET %s is documented but not mounted: %d %s", p, ans.Status, ans.Body)
			}
		}
	}
	if documented == 0 || documented < mounted {
		t.Fatalf("%d operations documented for %d mounted routes", documented, mounted)
	}
}

// TestRealAnswersMeetTheirSchemas validates real answers of a relay
// against the 200 schemas of the document, with a JSON Schema 2020-12
// validator (OpenAPI 3.1's schema dialect).
func TestRealAnswersMeetTheirSchemas(t *testing.T) {
	r := start(t)
	d := openAPI(t, r, "/openapi.json")
	at := int64(relaytest.VectorTime - 300)
	f := tt.ClientFlows(at, nil)[0]
	var last relaytest.Answer
	for _, s := range f.Steps {
		if last = r.Post(t, s.Event); last.Status != 200 {
			t.Fatalf("publish: %d %s", last.Status, last.Body)
		}
	}
	schemaOf := func(method, path string) *jsonschema.Schema {
		var op struct {
			Responses map[string]struct {
				Content map[string]struct{ Schema json.RawMessage }
			}
		}
		if json.Unmarshal(d.Paths[path][method], &op) != nil {
			t.Fatalf("%s %s not documented", method, path)
		}
		raw := op.Responses["200"].Content["application/json"].Schema
		v, err := jsonschema.UnmarshalJSON(strings.NewReader(string(raw)))
		if err != nil {
			t.Fatal(err)
		}
		c := jsonschema.NewCompiler()
		if err := c.AddResource("urn:test:"+method+path, v); err != nil {
			t.Fatal(err)
		}
		s, err := c.Compile("urn:test:" + method + path)
		if err != nil {
			t.Fatalf("%s %s: schema does not compile: %v", method, path, err)
		}
		return s
	}
	check := func(method, path string, body []byte) {
		t.Helper()
		inst, err := jsonschema.UnmarshalJSON(strings.NewReader(string(body)))
		if err != nil {
			t.Fatal(err)
		}
		if err := schemaOf(method, path).Validate(inst); err != nil {
			t.Errorf("%s %s: the answer breaks its schema: %v\n%.300s", method, path, err, body)
		}
	}
	check("post", "/events", last.Body)
	for _, c := range []struct{ schema, url string }{
		{"/events", "/events?limit=10"},
		{"/events/{id}", "/events/" + f.Task.ID},
		{"/task/{task_id}", "/task/" + f.Task.ID},
		{"/agents/{agent_id}/credit", "/agents/" + f.Provider.ID + "/credit"},
	} {
		ans := r.Do(t, "GET", c.url, "", nil)
		if ans.Status != 200 {
			t.Fatalf("GET %s: %d", c.url, ans.Status)
		}
		check("get", c.schema, ans.Body)
	}
	// A schema that can fail: a publish answer without its id breaks it.
	inst, _ := jsonschema.UnmarshalJSON(strings.NewReader(`{"accepted":"yes"}`))
	if schemaOf("post", "/events").Validate(inst) == nil {
		t.Fatal("the publish answer's schema accepts anything")
	}
}

// TestLLMsAndHeartbeat: /llms.txt indexes the entry points, /heartbeat.md
// carries the live counts.
func TestLLMsAndHeartbeat(t *testing.T) {
	r := start(t)
	a := tt.NewAgent("landing")
	r.Post(t, a.Sign(protocol.KindPost, relaytest.VectorTime-10, "hello"))
	ans := r.Do(t, "GET", "/llms.txt", "", nil)
	if ans.Status != 200 || !strings.HasPrefix(string(ans.Body), "# ANP2 relay") || !strings.Contains(string(ans.Body), "/openapi.json") ||
		!strings.Contains(string(ans.Body), "/stats") {
		t.Fatalf("/llms.txt: %d %s", ans.Status, ans.Body)
	}
	ans = r.Do(t, "GET", "/heartbeat.md", "", nil)
	if ans.Status != 200 || !strings.Contains(ans.Header.Get("Content-Type"), "text/markdown") ||
		!strings.Contains(string(ans.Body), "- stored events: 1") || !strings.Contains(string(ans.Body), "| 1 | 1 |") {
		t.Fatalf("/heartbeat.md: %d %s", ans.Status, ans.Body)
	}
	if ans := r.Do(t, "GET", "/heartbeat.md?x=1", "", nil); ans.Status != 400 {
		t.Fatalf("/heartbeat.md with an unknown parameter: %d", ans.Status)
	}
}

// heartbeatFromJSON renders /heartbeat.md from r's GET /health and (when
// withStats) GET /stats answers, independently of the module: the page
// must be exactly this.
func heartbeatFromJSON(t *testing.T, r *relaytest.Relay, withStats bool) string {
	t.Helper()
	var health struct {
		Status  string `json:"status"`
		Events  int64  `json:"events"`
		UptimeS int64  `json:"uptime_s"`
		Now     int64  `json:"now"`
	}
	if a := r.Do(t, "GET", "/health", "", nil); a.Status != 200 || json.Unmarshal(a.Body, &health) != nil {
		t.Fatalf("GET /health: %d %s", a.Status, a.Body)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# ANP2 relay heartbeat\n\nLive status of %s at %s (unix %d). Fetch it again for fresh figures.\n\n",
		r.URL, time.Unix(health.Now, 0).UTC().Format(time.RFC3339), health.Now)
	fmt.Fprintf(&b, "- status: %s\n- uptime: %d s\n- stored events: %d\n", health.Status, health.UptimeS, health.Events)
	if withStats {
		var stats struct {
			UniqueAgents int64            `json:"unique_agents"`
			ProfileNodes int64            `json:"profile_nodes"`
			VisitorsOnly int64            `json:"visitors_only"`
			LastEventAt  int64            `json:"last_event_at"`
			ByKind       map[string]int64 `json:"by_kind"`
		}
		if a := r.Do(t, "GET", "/stats", "", nil); a.Status != 200 || json.Unmarshal(a.Body, &stats) != nil {
			t.Fatalf("GET /stats: %d %s", a.Status, a.Body)
		}
		fmt.Fprintf(&b, "- agents: %d (%d with a profile, %d visitors only)\n", stats.UniqueAgents, stats.ProfileNodes, stats.VisitorsOnly)
		if stats.LastEventAt > 0 {
			fmt.Fprintf(&b, "- last event: %s\n", time.Unix(stats.LastEventAt, 0).UTC().Format(time.RFC3339))
		}
		var kinds []int64
		for k := range stats.ByKind {
			n, err := strconv.ParseInt(k, 10, 64)
			if err != nil {
				t.Fatalf("by_kind key %q", k)
			}
			kinds = append(kinds, n)
		}
		slices.Sort(kinds)
		if len(kinds) > 0 {
			b.WriteString("\n## Events by kind\n\n| kind | events |\n|---|---|\n")
			for _, k := range kinds {
				fmt.Fprintf(&b, "| %d | %d |\n", k, stats.ByKind[strconv.FormatInt(k, 10)])
			}
		}
	}
	b.WriteString("\nThe full API is described at /openapi.json; the figures above are /health's and /stats'.\n")
	return b.String()
}

// TestHeartbeatEqualsJSONRoutes: /heartbeat.md carries exactly the figures
// of GET /health and GET /stats — events of several kinds, a profile, a
// revocation (stored, but out of /stats' counts), an uptime — and without
// the directory module (no /stats) only /health's.
func TestHeartbeatEqualsJSONRoutes(t *testing.T) {
	r := start(t)
	a, b := tt.NewAgent("heartbeat-a"), tt.NewAgent("heartbeat-b")
	at := int64(relaytest.VectorTime - 600)
	gone := a.Sign(protocol.KindPost, at+1, "soon revoked")
	for _, e := range []*protocol.Event{
		a.Sign(protocol.KindProfile, at, `{"name":"heartbeat a"}`),
		a.Sign(protocol.KindPost, at+2, "hello", []string{"t", "weather"}),
		gone,
		a.Sign(protocol.KindRevoke, at+3, "", []string{"e", gone.ID}),
		b.Sign(protocol.KindTrustVote, at+4, `{"score":1}`, []string{"p", a.ID}),
		tt.Request(b, at+5, at+3600, tt.Reward{}, false),
	} {
		if ans := r.Post(t, e); ans.Status != 200 {
			t.Fatalf("publish kind %d: %d %s", e.Kind, ans.Status, ans.Body)
		}
	}
	r.Clock.Add(90 * time.Second)
	want := heartbeatFromJSON(t, r, true)
	for _, s := range []string{"- uptime: 90 s", "- stored events: 6", "(1 with a profile, 1 visitors only)", "| 50 | 1 |\n", "| 1 | 1 |\n"} {
		if !strings.Contains(want, s) {
			t.Fatalf("the JSON routes' figures lack %q:\n%s", s, want)
		}
	}
	ans := r.Do(t, "GET", "/heartbeat.md", "", nil)
	if ans.Status != 200 || string(ans.Body) != want {
		t.Fatalf("/heartbeat.md: %d\n%s\nwant\n%s", ans.Status, ans.Body, want)
	}

	bare := relaytest.Start(t, []relay.Module{landing.NewModule()})
	bare.Post(t, a.Sign(protocol.KindPost, at, "alone"))
	if ans := bare.Do(t, "GET", "/heartbeat.md", "", nil); ans.Status != 200 || string(ans.Body) != heartbeatFromJSON(t, bare, false) {
		t.Fatalf("/heartbeat.md without /stats: %d\n%s", ans.Status, ans.Body)
	}
}
