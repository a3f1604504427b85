package landing_test

import (
	"encoding/json"
	"strings"
	"testing"

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

func start(t *testing.T) *relaytest.Relay {
	return relaytest.Start(t, []relay.Module{directory.NewModule(), mcp.NewModule(mcp.Options{}), landing.NewModule()})
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
