package landing

import (
	"encoding/json"
	"net/http"
	"reflect"
	"regexp"
	"strings"
	"sync"

	"github.com/anp2net/relay/credit"
	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay"
	"github.com/anp2net/relay/relay/httpx"
	"github.com/anp2net/relay/tasks"
	"github.com/google/jsonschema-go/jsonschema"
	"github.com/labstack/echo/v4"
)

// answerTypes are the Go types of the answers of the routes that have
// one: their 200 schemas are generated from them (OpenAPI 3.1 schemas are
// JSON Schema 2020-12). The other routes answer JSON the document
// describes as any value. Answers may carry more members than a type
// names (modules add fields), so no object schema forbids extra ones.
var answerTypes = map[[2]string]reflect.Type{
	{http.MethodPost, "/events"}:                 reflect.TypeFor[relay.PublishAnswer](),
	{http.MethodGet, "/events"}:                  reflect.TypeFor[[]protocol.Event](),
	{http.MethodGet, "/events/:id"}:              reflect.TypeFor[protocol.Event](),
	{http.MethodGet, "/task/:task_id"}:           reflect.TypeFor[tasks.TaskView](),
	{http.MethodGet, "/agents/:agent_id/credit"}: reflect.TypeFor[credit.Account](),
}

// summaries name what the core routes do; a module's route without one is
// summarised by its method and path.
var summaries = map[[2]string]string{
	{http.MethodPost, "/events"}:                 "Publish one signed event",
	{http.MethodPost, "/events/dry-run"}:         "Check an event against every publish rule without storing it",
	{http.MethodPost, "/events/batch"}:           "Publish up to 1000 events",
	{http.MethodGet, "/events"}:                  "Stored events matching a filter, newest first",
	{http.MethodGet, "/events/:id"}:              "One stored event",
	{http.MethodGet, "/task/:task_id"}:           "A task's derived state and its events",
	{http.MethodGet, "/tasks"}:                   "Tasks, newest first",
	{http.MethodGet, "/agents/:agent_id/credit"}: "An agent's credit account",
	{http.MethodGet, "/agents"}:                  "The agent directory",
	{http.MethodGet, "/stats"}:                   "Network counters",
	{http.MethodGet, "/health"}:                  "Liveness and log size",
	{http.MethodGet, "/openapi.json"}:            "This document",
	{http.MethodGet, "/llms.txt"}:                "A one-page index for language models",
	{http.MethodGet, "/heartbeat.md"}:            "The relay's live status as markdown",
}

var (
	schemaOnce sync.Once
	schemas    map[[2]string]*jsonschema.Schema
	schemaErr  error
)

// answerSchemas generates the answer types' schemas once.
func answerSchemas() (map[[2]string]*jsonschema.Schema, error) {
	schemaOnce.Do(func() {
		opts := &jsonschema.ForOptions{TypeSchemas: map[reflect.Type]*jsonschema.Schema{
			reflect.TypeFor[json.RawMessage](): {},
			reflect.TypeFor[credit.Amount]():   {Type: "integer"},
		}}
		schemas = map[[2]string]*jsonschema.Schema{}
		for k, t := range answerTypes {
			s, err := jsonschema.ForType(t, opts)
			if err != nil {
				schemaErr = err
				return
			}
			openObjects(s)
			schemas[k] = s
		}
	})
	return schemas, schemaErr
}

// openObjects lets every object schema under s carry members it does not
// name.
func openObjects(s *jsonschema.Schema) {
	if s == nil {
		return
	}
	s.AdditionalProperties = nil
	for _, p := range s.Properties {
		openObjects(p)
	}
	openObjects(s.Items)
	for _, x := range s.AnyOf {
		openObjects(x)
	}
	for _, x := range s.OneOf {
		openObjects(x)
	}
}

var pathParam = regexp.MustCompile(`:([A-Za-z_][A-Za-z0-9_]*)`)

// openAPIPath turns an Echo path (/task/:task_id) into OpenAPI's
// (/task/{task_id}) and returns its parameter names.
func openAPIPath(p string) (string, []string) {
	var names []string
	for _, m := range pathParam.FindAllStringSubmatch(p, -1) {
		names = append(names, m[1])
	}
	return pathParam.ReplaceAllString(p, "{$1}"), names
}

// Document builds the OpenAPI 3.1 document of core's routes: one operation
// per mounted method and path (the /api copies are noted, not repeated).
func Document(core *relay.Server, server string) (map[string]any, error) {
	answers, err := answerSchemas()
	if err != nil {
		return nil, err
	}
	errSchema := map[string]any{"$ref": "#/components/schemas/Error"}
	paths := map[string]any{}
	for _, r := range Routes(core) {
		path, params := openAPIPath(r[1])
		item, _ := paths[path].(map[string]any)
		if item == nil {
			item = map[string]any{}
			paths[path] = item
		}
		op := map[string]any{"operationId": operationID(r[0], r[1]), "summary": summaryOf(r)}
		if len(params) > 0 {
			var ps []any
			for _, n := range params {
				ps = append(ps, map[string]any{"name": n, "in": "path", "required": true, "schema": map[string]any{"type": "string"}})
			}
			op["parameters"] = ps
		}
		var ok any = map[string]any{}
		if s := answers[r]; s != nil {
			ok = s
		}
		op["responses"] = map[string]any{
			"200": map[string]any{"description": "OK", "content": map[string]any{"application/json": map[string]any{"schema": ok}}},
			"4XX": map[string]any{"description": "the request is refused: {detail, code}",
				"content": map[string]any{"application/json": map[string]any{"schema": errSchema}}},
		}
		if r[0] == http.MethodPost && strings.HasPrefix(r[1], "/events") {
			op["requestBody"] = map[string]any{"required": true, "content": map[string]any{
				"application/json": map[string]any{"schema": map[string]any{}}, "application/anp+cbor": map[string]any{}}}
		}
		item[strings.ToLower(r[0])] = op
	}
	return map[string]any{
		"openapi": "3.1.0",
		"info": map[string]any{"title": "ANP2 relay", "version": "1",
			"description": "Every route of this relay, generated from its router; each is also served under /api. Errors are {detail, code} (422 envelope errors list {loc, msg, type})."},
		"servers": []any{map[string]any{"url": server}},
		"paths":   paths,
		"components": map[string]any{"schemas": map[string]any{"Error": map[string]any{"type": "object",
			"properties": map[string]any{"detail": map[string]any{}, "code": map[string]any{"type": "string"}}}}},
	}, nil
}

func summaryOf(r [2]string) string {
	if s := summaries[r]; s != "" {
		return s
	}
	p, _ := openAPIPath(r[1])
	return r[0] + " " + p
}

// operationID is a stable id from the method and path: get_task_task_id.
func operationID(method, path string) string {
	id := strings.ToLower(method)
	for _, part := range strings.FieldsFunc(path, func(r rune) bool {
		return !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r == '_')
	}) {
		id += "_" + part
	}
	return id
}

// getOpenAPI is GET /openapi.json and /.well-known/openapi.json. The
// document is built once, at the first request (every module has mounted
// its routes by then), and only its servers entry is written per request,
// so a flood of requests (with any Host) costs a copy, not a rebuild.
func (m *Module) getOpenAPI(c echo.Context) error {
	if _, err := httpx.Params(c); err != nil {
		return err
	}
	m.docOnce.Do(func() {
		doc, err := Document(m.core, "")
		if err == nil {
			delete(doc, "servers")
			m.doc, err = json.Marshal(doc)
		}
		m.docErr = err
	})
	if m.docErr != nil {
		return m.docErr
	}
	servers, _ := json.Marshal([]any{map[string]any{"url": m.core.BaseURL(c)}})
	b := make([]byte, 0, len(m.doc)+len(servers)+16)
	b = append(b, m.doc[:len(m.doc)-1]...) // the object without its closing brace
	b = append(b, `,"servers":`...)
	b = append(b, servers...)
	b = append(b, '}')
	return c.JSONBlob(http.StatusOK, b)
}
