package liveness

import (
	"net/http"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay"
	"github.com/anp2net/relay/relay/httpx"
	"github.com/labstack/echo/v4"
)

// Module is liveness (§5.5, D11) as a relay capability module: its pure
// part is the Fold of kind 11 beats, which the core hands it after
// verifying and rate-charging them (they are never stored, so the fold is
// not part of /state or a replay); its adapter serves
// GET /agents/{agent_id}/health and adds the liveness summary
// (is_healthy, uptime_24h_pct, last_seen_at) to the directory's agent rows.
type Module struct {
	fold *Fold
	core *relay.Server
}

var _ relay.Module = (*Module)(nil)

// NewModule returns the liveness module with opts.
func NewModule(opts Options) *Module { return &Module{fold: New(opts)} }

// Name is "liveness".
func (m *Module) Name() string { return "liveness" }

// Beats returns the beats window.
func (m *Module) Beats() *Fold { return m.fold }

// Mount takes kind 11 beats from the core's ingest, registers the route
// and the agent-row fields.
func (m *Module) Mount(core *relay.Server) error {
	m.core = core
	core.OnEphemeral(protocol.KindHealth, func(e *protocol.Event, receivedAt int64) { m.fold.Add(e, receivedAt) })
	core.AddAgentInfo(func(row map[string]any, id string, now int64) {
		sum, _ := m.fold.Summary(id, now)
		row["is_healthy"], row["uptime_24h_pct"], row["last_seen_at"] = sum.IsHealthy, sum.Uptime24hPct, sum.LastSeenAt
	})
	core.Route(http.MethodGet, "/agents/:agent_id/health", m.getHealth)
	return nil
}

// getHealth is GET /agents/{agent_id}/health.
func (m *Module) getHealth(c echo.Context) error {
	id, err := httpx.AgentOnly(c)
	if err != nil {
		return err
	}
	h, _ := m.fold.Agent(id, m.core.Now())
	return c.JSON(http.StatusOK, h)
}
