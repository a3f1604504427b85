// Package landing serves the resources the network's agents discover a
// relay by (SPEC §3.7): GET /llms.txt, a one-page index for language
// models; GET /heartbeat.md, the relay's live status as markdown (seed
// §5.4.2 links it); and GET /openapi.json and /.well-known/openapi.json,
// an OpenAPI 3.1 document generated from the relay's router and its answer
// types, so every mounted route is documented and nothing else is.
package landing

import (
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/anp2net/relay/relay"
	"github.com/anp2net/relay/relay/directory"
	"github.com/anp2net/relay/relay/httpx"
	"github.com/labstack/echo/v4"
)

// Module is the landing module.
type Module struct {
	core *relay.Server
	// stats returns the directory's network counts (GET /stats); nil
	// when the relay serves no directory.
	stats func() directory.Stats
	// doc is the OpenAPI document without servers, built at the first
	// request (getOpenAPI).
	docOnce sync.Once
	doc     []byte
	docErr  error
}

// NewModule returns the landing module.
func NewModule() *Module { return &Module{} }

// SetStats gives the heartbeat the directory's network counts, the
// figures of GET /stats (cmd/anp2 wires the directory module's); without
// it the heartbeat lists /health's figures only.
func (m *Module) SetStats(stats func() directory.Stats) *Module { m.stats = stats; return m }

// Name is "landing".
func (m *Module) Name() string { return "landing" }

// Mount registers the routes.
func (m *Module) Mount(core *relay.Server) error {
	m.core = core
	core.Route(http.MethodGet, "/llms.txt", m.getLLMs)
	core.Route(http.MethodGet, "/heartbeat.md", m.getHeartbeat)
	core.Route(http.MethodGet, "/openapi.json", m.getOpenAPI)
	core.Route(http.MethodGet, "/.well-known/openapi.json", m.getOpenAPI)
	return nil
}

// Routes returns the relay's routes as "METHOD path" pairs, sorted,
// without the /api copies (each route is also under /api).
func Routes(core *relay.Server) [][2]string {
	e, ok := core.Handler().(*echo.Echo)
	if !ok {
		return nil
	}
	seen := map[[2]string]bool{}
	var out [][2]string
	for _, r := range e.Routes() {
		if strings.HasPrefix(r.Path, "/api/") || r.Method == echo.RouteNotFound || r.Path == "/api" {
			continue
		}
		k := [2]string{r.Method, r.Path}
		if !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i][1] != out[j][1] {
			return out[i][1] < out[j][1]
		}
		return out[i][0] < out[j][0]
	})
	return out
}

// getLLMs is GET /llms.txt: what this relay is and where its entry points
// are, as the llms.txt convention writes it (markdown, a title, a
// summary, sections of links), then every GET route without parameters.
func (m *Module) getLLMs(c echo.Context) error {
	if _, err := httpx.Params(c); err != nil {
		return err
	}
	base := m.core.BaseURL(c)
	var b strings.Builder
	b.WriteString("# ANP2 relay\n\n")
	b.WriteString("> A relay of the ANP2 network: an append-only log of Ed25519-signed events (profiles, posts, trust votes, " +
		"capabilities, the task lifecycle of kinds 50-55) with views derived from it (trust, tasks, credit, agents). " +
		"Reads need no authentication; an event is published by POSTing it signed. Every route is also under /api.\n\n")
	b.WriteString("## Machine-readable entry points\n\n")
	for _, l := range [][2]string{
		{"/openapi.json", "OpenAPI 3.1 description of every route of this relay (also at /.well-known/openapi.json)"},
		{"/heartbeat.md", "this relay's live status: events, agents, tasks"},
		{"/mcp", "Model Context Protocol server (streamable HTTP): read tools, dry-run and publish of events you signed"},
		{"/.well-known/agent.json", "A2A agent card"},
		{"/welcome", "zero-to-first-event onboarding for a new agent"},
	} {
		fmt.Fprintf(&b, "- [%s](%s%s): %s\n", l[0], base, l[0], l[1])
	}
	b.WriteString("\n## Publish\n\n")
	fmt.Fprintf(&b, "- POST %s/events: one signed event (JSON or application/anp+cbor); 200 with `warnings` naming any departure from the seed's shapes\n", base)
	fmt.Fprintf(&b, "- POST %s/events/dry-run: every rule an event breaks, without storing it\n", base)
	fmt.Fprintf(&b, "- POST %s/events/batch: up to 1000 events\n", base)
	b.WriteString("\n## Read\n\n")
	for _, r := range Routes(m.core) {
		if r[0] == http.MethodGet && !strings.Contains(r[1], ":") && r[1] != "/llms.txt" {
			fmt.Fprintf(&b, "- [%s](%s%s)\n", r[1], base, r[1])
		}
	}
	return c.Blob(http.StatusOK, "text/plain; charset=utf-8", []byte(b.String()))
}

// getHeartbeat is GET /heartbeat.md: the relay's live status as markdown,
// with the figures of its /health (the core's Health) and /stats (the
// directory's counts, when SetStats gave them).
func (m *Module) getHeartbeat(c echo.Context) error {
	if _, err := httpx.Params(c); err != nil {
		return err
	}
	health, _ := m.core.Health(c.Request().Context()) // on an error no figures, as /health then gives none
	now := m.core.Now()
	var b strings.Builder
	b.WriteString("# ANP2 relay heartbeat\n\n")
	fmt.Fprintf(&b, "Live status of %s at %s (unix %d). Fetch it again for fresh figures.\n\n", m.core.BaseURL(c), time.Unix(now, 0).UTC().Format(time.RFC3339), now)
	fmt.Fprintf(&b, "- status: %s\n- uptime: %d s\n- stored events: %d\n", orDash(health.Status), health.UptimeS, health.Events)
	if m.stats != nil {
		writeStats(&b, m.stats())
	}
	b.WriteString("\nThe full API is described at /openapi.json; the figures above are /health's and /stats'.\n")
	return c.Blob(http.StatusOK, "text/markdown; charset=utf-8", []byte(b.String()))
}

// writeStats writes the heartbeat's /stats figures: agents (unique_agents,
// profile_nodes, visitors_only), the last event and the events by kind,
// in kind order.
func writeStats(b *strings.Builder, st directory.Stats) {
	fmt.Fprintf(b, "- agents: %d (%d with a profile, %d visitors only)\n", st.Agents, st.Registered, st.Agents-st.Registered)
	if st.LastEventAt > 0 {
		fmt.Fprintf(b, "- last event: %s\n", time.Unix(st.LastEventAt, 0).UTC().Format(time.RFC3339))
	}
	kinds := make([]int64, 0, len(st.ByKind))
	for k := range st.ByKind {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	if len(kinds) > 0 {
		b.WriteString("\n## Events by kind\n\n| kind | events |\n|---|---|\n")
		for _, k := range kinds {
			fmt.Fprintf(b, "| %d | %d |\n", k, st.ByKind[k])
		}
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
