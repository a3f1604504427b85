package governance

import (
	"net/http"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay"
	"github.com/anp2net/relay/relay/httpx"
	"github.com/labstack/echo/v4"
)

func (m *Module) mountSchemas(core *relay.Server) {
	core.Route(http.MethodGet, "/schemas", m.getSchemas)
	core.Route(http.MethodGet, "/schemas/:name", m.getSchema)
	core.Route(http.MethodGet, "/vocab", m.getVocabs)
	core.Route(http.MethodGet, "/vocab/:name", m.getVocab)
	core.AddAgentInfo(negotiation)
}

// negotiation adds a profile's comm_tiers and preferred_schemas (§9.6) to
// a directory row, from the parsed latest profile the directory put there.
func negotiation(row map[string]any, _ string, _ int64) {
	p, _ := row["profile"].(map[string]any)
	tiers, _ := p["comm_tiers"].([]any)
	schemas, _ := p["preferred_schemas"].([]any)
	row["comm_tiers"], row["preferred_schemas"] = httpx.NonNil(tiers), httpx.NonNil(schemas)
}

// schemaRow is one schema of GET /schemas: its definition (if any) and
// its use.
type schemaRow struct {
	Usage
	Defined  bool   `json:"defined"`
	Source   string `json:"source,omitempty"`
	PIP      string `json:"pip_number,omitempty"`
	PIPEvent string `json:"pip_event,omitempty"`
	Error    string `json:"error,omitempty"`
}

// schemaRows merges the registry with the names seen in use, by name.
func (m *Module) schemaRows(now int64) ([]schemaRow, *Registry) {
	reg := m.registry(now)
	used := map[string]Usage{}
	for _, u := range m.fold.Usage() {
		used[u.Name] = u
	}
	names := sortedKeys(reg.Schemas)
	for n := range used {
		if _, ok := reg.Schemas[n]; !ok {
			names = append(names, n)
		}
	}
	out := make([]schemaRow, 0, len(names))
	for _, n := range sortedKeys(setOf(names)) {
		u, ok := used[n]
		if !ok {
			u = Usage{Name: n, Kinds: []int64{}}
		}
		row := schemaRow{Usage: u}
		if d, ok := reg.Schemas[n]; ok {
			row.Defined, row.Source, row.PIP, row.PIPEvent, row.Error = true, d.Source, d.PIP, d.PIPEvent, d.Error
		}
		out = append(out, row)
	}
	return out, reg
}

func setOf(names []string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

// getSchemas is GET /schemas: every defined schema and every name seen in
// an s tag.
func (m *Module) getSchemas(c echo.Context) error {
	if _, err := httpx.Params(c); err != nil {
		return err
	}
	rows, _ := m.schemaRows(m.core.Now())
	return c.JSON(http.StatusOK, map[string]any{"count": len(rows), "schemas": rows})
}

// getSchema is GET /schemas/{name}: the row plus the definition.
func (m *Module) getSchema(c echo.Context) error {
	if _, err := httpx.Params(c); err != nil {
		return err
	}
	name := c.Param("name")
	rows, reg := m.schemaRows(m.core.Now())
	for _, r := range rows {
		if r.Name != name {
			continue
		}
		ans := map[string]any{"schema": r}
		if d, ok := reg.Schemas[name]; ok {
			ans["definition"] = d.Doc
		}
		return c.JSON(http.StatusOK, mergeRow(r, ans))
	}
	return protocol.Errorf(relay.CodeNotFound, "no schema %q is defined or in use", name)
}

// mergeRow flattens a row and extra members into one object.
func mergeRow(r schemaRow, extra map[string]any) map[string]any {
	out := map[string]any{"name": r.Name, "usage_count": r.Count, "first_used_at": r.FirstUsedAt,
		"last_used_at": r.LastUsedAt, "kinds": r.Kinds, "defined": r.Defined}
	if r.Defined {
		out["source"], out["pip_number"], out["pip_event"] = r.Source, r.PIP, r.PIPEvent
	}
	if r.Error != "" {
		out["error"] = r.Error
	}
	if d, ok := extra["definition"]; ok {
		out["definition"] = d
	}
	return out
}

// getVocabs is GET /vocab: every registered vocabulary.
func (m *Module) getVocabs(c echo.Context) error {
	if _, err := httpx.Params(c); err != nil {
		return err
	}
	reg := m.registry(m.core.Now())
	out := make([]*SchemaDef, 0, len(reg.Vocab))
	for _, n := range sortedKeys(reg.Vocab) {
		out = append(out, reg.Vocab[n])
	}
	return c.JSON(http.StatusOK, map[string]any{"count": len(out), "vocab": out})
}

// getVocab is GET /vocab/{name}.
func (m *Module) getVocab(c echo.Context) error {
	if _, err := httpx.Params(c); err != nil {
		return err
	}
	name := c.Param("name")
	if d, ok := m.registry(m.core.Now()).Vocab[name]; ok {
		return c.JSON(http.StatusOK, d)
	}
	return protocol.Errorf(relay.CodeNotFound, "no vocabulary %q", name)
}
