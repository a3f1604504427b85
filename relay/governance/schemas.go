package governance

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/anp2net/relay/protocol"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// CodeSchemaViolation is the code of a structured-intent event (kinds
// 1000–1999, seed §9.3) whose content breaks the schema its ["s", name]
// tag names: a 400 naming the failing paths (seed §5.1). On other kinds
// the same failure is a warning (protocol.WarnSchema, D17).
const CodeSchemaViolation = "schema_violation"

// Structured reports whether kind is a structured-intent kind (1000–1999),
// whose content must meet the schemas its s tags name.
func Structured(kind int64) bool { return kind >= 1000 && kind <= 1999 }

// maxSchemaErrors caps the failing paths one refusal lists.
const maxSchemaErrors = 20

// builtinSchemas are the seed's schemas (§9.3), served and enforced
// whatever the PIPs say.
var builtinSchemas = map[string]string{
	"anp.heartbeat.v1": `{"$schema":"https://json-schema.org/draft/2020-12/schema",` +
		`"title":"anp.heartbeat.v1","description":"periodic I-am-alive (seed §9.3): v version, st status, q queue depth",` +
		`"type":"object","required":["v","st","q"],` +
		`"properties":{"v":{"type":"integer","minimum":1},"st":{"enum":["ok","degraded","down"]},"q":{"type":"integer","minimum":0}}}`,
}

// builtinVocab are the seed's argot vocabularies (§9.8).
var builtinVocab = map[string]string{
	"anp.argot.status.v1": `{"S":"status","q":"queue","t":"timestamp","m":"model","cap":"capabilities",` +
		`"tr":"translate","mon":"monitor","cl-o4.7":"claude-opus-4-7"}`,
}

// SchemaDef is one registered schema or vocabulary.
type SchemaDef struct {
	Name string `json:"name"`
	// Source is "builtin" or "pip"; PIP and PIPEvent name the accepted
	// proposal that defined it.
	Source   string          `json:"source"`
	PIP      string          `json:"pip_number,omitempty"`
	PIPEvent string          `json:"pip_event,omitempty"`
	Doc      json.RawMessage `json:"definition"`
	// Error says why a defined schema cannot be compiled (it is then not
	// enforced).
	Error string `json:"error,omitempty"`

	compiled *jsonschema.Schema
}

// Registry is the schema and vocabulary registry at one time: the
// built-ins, then every schema and vocabulary of the accepted PIPs, the
// earliest accepted proposal first (a name is defined once).
type Registry struct {
	Schemas map[string]*SchemaDef
	Vocab   map[string]*SchemaDef
}

// compiledCache keeps compiled schemas by name and definition digest.
type compiledCache struct {
	mu sync.Mutex
	m  map[string]*SchemaDef
}

func (cc *compiledCache) get(name, source, pip, pipEvent string, doc []byte) *SchemaDef {
	sum := sha256.Sum256(append([]byte(name+"\x00"), doc...))
	key := hex.EncodeToString(sum[:])
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if cc.m == nil {
		cc.m = map[string]*SchemaDef{}
	}
	if d, ok := cc.m[key]; ok && d.PIPEvent == pipEvent {
		return d
	}
	d := &SchemaDef{Name: name, Source: source, PIP: pip, PIPEvent: pipEvent, Doc: json.RawMessage(doc)}
	d.compiled, d.Error = compileSchema(key, doc)
	cc.m[key] = d
	return d
}

// compileSchema compiles a JSON Schema document (draft 2020-12 unless it
// says otherwise) with every external reference refused: a schema from
// the network may not make the relay read files or URLs.
func compileSchema(key string, doc []byte) (*jsonschema.Schema, string) {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return nil, "not JSON: " + err.Error()
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(jsonschema.SchemeURLLoader{})
	c.DefaultDraft(jsonschema.Draft2020)
	url := "urn:anp2:schema:" + key
	if err := c.AddResource(url, v); err != nil {
		return nil, err.Error()
	}
	s, err := c.Compile(url)
	if err != nil {
		return nil, err.Error()
	}
	return s, ""
}

// registry builds the registry at now from the PIPs evaluated then.
func (m *Module) registry(now int64) *Registry {
	r := &Registry{Schemas: map[string]*SchemaDef{}, Vocab: map[string]*SchemaDef{}}
	for name, doc := range builtinSchemas {
		r.Schemas[name] = m.cache.get(name, "builtin", "", "", []byte(doc))
	}
	for name, doc := range builtinVocab {
		r.Vocab[name] = &SchemaDef{Name: name, Source: "builtin", Doc: json.RawMessage(doc)}
	}
	var accepted []PIPView
	for _, p := range m.PIPs(now) {
		if p.Status == StatusAccepted {
			accepted = append(accepted, p)
		}
	}
	slices.SortFunc(accepted, func(a, b PIPView) int {
		if c := cmp.Compare(a.Created, b.Created); c != 0 {
			return c
		}
		return compareNumbers(a.Number, b.Number)
	})
	for _, p := range accepted {
		for _, name := range sortedKeys(p.content.Schemas) {
			if _, taken := r.Schemas[name]; !taken {
				r.Schemas[name] = m.cache.get(name, "pip", p.Number, p.Current, p.content.Schemas[name])
			}
		}
		for _, name := range sortedKeys(p.content.Vocab) {
			if _, taken := r.Vocab[name]; !taken {
				r.Vocab[name] = &SchemaDef{Name: name, Source: "pip", PIP: p.Number, PIPEvent: p.Current, Doc: p.content.Vocab[name]}
			}
		}
	}
	return r
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// checkSchemas validates e's content against every known schema its s
// tags name; unknown names pass (the registry observes them).
func (m *Module) checkSchemas(e *protocol.Event, now int64) error {
	names := schemaNames(e)
	if len(names) == 0 {
		return nil
	}
	reg := m.registry(now)
	var fields []protocol.FieldError
	for _, name := range names {
		def, ok := reg.Schemas[name]
		if !ok || def.compiled == nil {
			continue
		}
		fields = append(fields, validate(def, e.Content)...)
	}
	if len(fields) == 0 {
		return nil
	}
	if len(fields) > maxSchemaErrors {
		fields = fields[:maxSchemaErrors]
	}
	parts := make([]string, 0, len(fields))
	for _, f := range fields {
		loc := make([]string, 0, len(f.Loc)-2)
		for _, l := range f.Loc[2:] {
			loc = append(loc, fmt.Sprint(l))
		}
		parts = append(parts, strings.Join(loc, ".")+": "+f.Msg)
	}
	return protocol.Errorf(CodeSchemaViolation, "content breaks its schema: %s", strings.Join(parts, "; "))
}

// schemaWarnings is the warning of an event outside kinds 1000–1999 whose
// content breaks a schema its s tags name (the herald's plain-text kind 1
// heartbeats, D17): stored, and named in the answer.
func (m *Module) schemaWarnings(e *protocol.Event, now int64) []protocol.Warning {
	if Structured(e.Kind) {
		return nil
	}
	var pe *protocol.Error
	if err := m.checkSchemas(e, now); errors.As(err, &pe) {
		return []protocol.Warning{{Code: protocol.WarnSchema, Detail: pe.Detail + " (not enforced on kind " + strconv.FormatInt(e.Kind, 10) + ")"}}
	}
	return nil
}

// validate returns the failures of content under def, each located at
// ["body", "content", "<schema name>", path tokens…].
func validate(def *SchemaDef, content string) []protocol.FieldError {
	loc := []any{"body", "content", def.Name}
	inst, err := jsonschema.UnmarshalJSON(strings.NewReader(content))
	if err != nil {
		return []protocol.FieldError{{Loc: loc, Msg: "content is not JSON", Type: "value_error.schema"}}
	}
	err = def.compiled.Validate(inst)
	ve, ok := err.(*jsonschema.ValidationError)
	if !ok {
		return nil
	}
	var out []protocol.FieldError
	for _, u := range ve.BasicOutput().Errors {
		if u.Error == nil {
			continue
		}
		l := slices.Clone(loc)
		for _, tok := range strings.Split(strings.TrimPrefix(u.InstanceLocation, "/"), "/") {
			if tok != "" {
				l = append(l, strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~"))
			}
		}
		out = append(out, protocol.FieldError{Loc: l, Msg: u.Error.String() + " (" + u.KeywordLocation + ")", Type: "value_error.schema"})
	}
	if len(out) == 0 {
		out = append(out, protocol.FieldError{Loc: loc, Msg: ve.Error(), Type: "value_error.schema"})
	}
	return out
}

// schemaNames returns e's distinct s tag values.
func schemaNames(e *protocol.Event) []string {
	var out []string
	for _, v := range e.TagValues("s") {
		if v != "" && !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}

// usage counts the events that name each schema (kept by the fold).
type usage struct {
	mu     sync.Mutex
	byName map[string]map[string]usageEvent // name → event id → use
}

type usageEvent struct {
	at   int64
	kind int64
}

// Usage is one schema name's use.
type Usage struct {
	Name        string  `json:"name"`
	Count       int     `json:"usage_count"`
	FirstUsedAt int64   `json:"first_used_at"`
	LastUsedAt  int64   `json:"last_used_at"`
	Kinds       []int64 `json:"kinds"`
}

func (u *usage) add(e *protocol.Event) {
	names := schemaNames(e)
	if len(names) == 0 {
		return
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.byName == nil {
		u.byName = map[string]map[string]usageEvent{}
	}
	for _, n := range names {
		if u.byName[n] == nil {
			u.byName[n] = map[string]usageEvent{}
		}
		u.byName[n][e.ID] = usageEvent{e.CreatedAt, e.Kind}
	}
}

func (u *usage) remove(e *protocol.Event) {
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, n := range schemaNames(e) {
		delete(u.byName[n], e.ID)
		if len(u.byName[n]) == 0 {
			delete(u.byName, n)
		}
	}
}

// all returns every used name's Usage, by name.
func (u *usage) all() []Usage {
	u.mu.Lock()
	defer u.mu.Unlock()
	out := make([]Usage, 0, len(u.byName))
	for n, evs := range u.byName {
		us := Usage{Name: n, Count: len(evs), Kinds: []int64{}}
		for _, ue := range evs {
			if us.FirstUsedAt == 0 || ue.at < us.FirstUsedAt {
				us.FirstUsedAt = ue.at
			}
			us.LastUsedAt = max(us.LastUsedAt, ue.at)
			if !slices.Contains(us.Kinds, ue.kind) {
				us.Kinds = append(us.Kinds, ue.kind)
			}
		}
		slices.Sort(us.Kinds)
		out = append(out, us)
	}
	slices.SortFunc(out, func(a, b Usage) int { return strings.Compare(a.Name, b.Name) })
	return out
}
