// Package dms owns private messages (kind 3, seed §4.4) on the relay side:
// GET /dms/{agent_id}, an agent's own outbox, served only to that agent
// (D4 reader authentication). The shape of a kind 3 (one p tag, one
// 48-hex nonce, a base64 box of 16 + a padding bucket) is a protocol rule
// (protocol.ParseDM) checked at publish like every kind rule; the relay
// never decrypts. Recipients read their inbox through the core's
// GET /events?kinds=3&p=<me> and GET /stream?kinds=3&p=<me>. The package
// keeps no fold: the log is its state.
package dms

import (
	"net/http"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay"
	"github.com/anp2net/relay/relay/eventlog"
	"github.com/anp2net/relay/relay/httpx"
	"github.com/labstack/echo/v4"
)

// Codes of GET /dms answers besides the parameter ones: 401 for an
// anonymous reader, 403 for a reader asking for another agent's outbox.
const (
	CodeUnauthorized = "unauthorized"
	CodeForbidden    = "dm_outbox_forbidden"
)

// Module is the DM outbox as a relay capability module.
type Module struct {
	core *relay.Server
}

var _ relay.Module = (*Module)(nil)

// NewModule returns the dms module.
func NewModule() *Module { return &Module{} }

// Name is "dms".
func (m *Module) Name() string { return "dms" }

// Mount registers GET /dms/{agent_id}.
func (m *Module) Mount(core *relay.Server) error {
	m.core = core
	relay.RegisterStatus(CodeForbidden, http.StatusForbidden)
	core.Route(http.MethodGet, "/dms/:agent_id", m.getOutbox)
	return nil
}

// getOutbox is GET /dms/{agent_id}: the kind 3 events agent_id wrote,
// newest first, as GET /events answers them (limit 1..1000, default 100;
// since and until bound created_at), revoked ones left out. Only the
// agent itself may read it: no Authorization header is a 401, another
// agent a 403.
func (m *Module) getOutbox(c echo.Context) error {
	id, err := httpx.HexParam(c, "agent_id")
	if err != nil {
		return err
	}
	f, err := outboxFilter(c, id)
	if err != nil {
		return err
	}
	reader, err := m.core.Reader(c)
	if err != nil {
		return err
	}
	switch reader {
	case "":
		return protocol.Errorf(CodeUnauthorized, "GET /dms/{agent_id} needs an ANP2 Authorization header signed by that agent (D4)")
	case id:
	default:
		return protocol.Errorf(CodeForbidden, "an outbox is served only to its own agent (§4.4); recipients read GET /events?kinds=3&p=<agent_id>")
	}
	f.Revoked = m.core.State().Revoked
	bodies, err := m.core.Log().Query(c.Request().Context(), f)
	if err != nil {
		return err
	}
	return writeArray(c, bodies)
}

// outboxFilter parses limit, since and until into the log filter for
// id's kind 3 events.
func outboxFilter(c echo.Context, id string) (eventlog.Filter, error) {
	v, err := httpx.Params(c, "limit", "since", "until")
	if err != nil {
		return eventlog.Filter{}, err
	}
	f := eventlog.Filter{Kinds: []int64{protocol.KindDM}, Authors: []string{id}}
	limit, err := httpx.IntParam(v, "limit", 100, 1, 1000)
	if err != nil {
		return f, err
	}
	f.Limit = int(limit)
	for _, p := range []struct {
		name string
		dst  **int64
	}{{"since", &f.Since}, {"until", &f.Until}} {
		if s, ok := v[p.name]; ok {
			n, err := httpx.NonNegative(p.name, s[0])
			if err != nil {
				return f, err
			}
			*p.dst = &n
		}
	}
	return f, nil
}

// writeArray answers stored bodies as one JSON array.
func writeArray(c echo.Context, bodies [][]byte) error {
	out := []byte{'['}
	for i, b := range bodies {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, b...)
	}
	return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, append(out, ']'))
}
