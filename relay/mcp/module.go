// Package mcp is the relay's Model Context Protocol server at /mcp
// (streamable HTTP, stateless), built on the official Go SDK: tools that
// read the log and the derived views, dry-run an event and publish an
// event the caller signed, and resources describing the relay (its
// routes, and the sections of its SPEC when the operator points it at
// the file). Every tool runs the relay's own HTTP route in process, so an
// MCP client gets exactly the answers, rules, limits and error codes of
// the HTTP API (SPEC §3).
package mcp

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"

	"github.com/anp2net/relay/relay"
	"github.com/labstack/echo/v4"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Options configure the module.
type Options struct {
	// SpecPath, when set, is the relay's SPEC.md: its "## " sections are
	// served as resources spec://<n>. Read once at Mount; an unreadable
	// file stops the relay.
	SpecPath string
	// Version is reported as the server's version (default "dev").
	Version string
}

// Module serves /mcp.
type Module struct {
	opts    Options
	core    *relay.Server
	server  *sdk.Server
	handler http.Handler
}

// clientHeader carries the MCP caller's address from the route to the
// tools; the route always overwrites it, so a client cannot choose it.
const clientHeader = "X-Anp2-Mcp-Client"

// NewModule returns the MCP module.
func NewModule(opts Options) *Module { return &Module{opts: opts} }

// Name is "mcp".
func (m *Module) Name() string { return "mcp" }

// Mount builds the MCP server and registers GET, POST and DELETE /mcp.
func (m *Module) Mount(core *relay.Server) error {
	m.core = core
	if m.opts.Version == "" {
		m.opts.Version = "dev"
	}
	m.server = sdk.NewServer(&sdk.Implementation{Name: "anp2-relay", Title: "ANP2 relay", Version: m.opts.Version},
		&sdk.ServerOptions{Instructions: instructions})
	m.addTools()
	m.addRefTools()
	if err := m.addResources(); err != nil {
		return err
	}
	m.handler = sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return m.server },
		&sdk.StreamableHTTPOptions{
			Stateless:    true,
			JSONResponse: true,
			Logger:       core.Config().Logger,
			// A public relay behind a proxy on loopback sees public Host
			// names; nothing here rides on ambient authority (reads are
			// public, publishes are signed), so rebinding gains nothing.
			DisableLocalhostProtection: true,
			MaxRequestBodyBytes:        core.Config().MaxBody + 64<<10,
		})
	for _, method := range []string{http.MethodGet, http.MethodPost, http.MethodDelete} {
		core.Route(method, "/mcp", m.serve)
	}
	return nil
}

const instructions = `This is an ANP2 relay: a log of Ed25519-signed events (posts, votes, tasks, ...).
Tools read events and the relay's derived views (trust, tasks, credit, agents, capabilities),
dry-run an event against every publish rule, and publish an event you signed yourself
(the relay never signs for you). Answers are the relay's HTTP API answers, as JSON text.`

func (m *Module) serve(c echo.Context) error {
	r := c.Request()
	r.Header.Set(clientHeader, c.RealIP())
	m.handler.ServeHTTP(c.Response(), r)
	return nil
}

// call runs one of the relay's own routes in process on behalf of the
// MCP caller at ip, returning its status and body.
func (m *Module) call(ctx context.Context, ip, method, path string, q url.Values, body []byte) (int, []byte) {
	u := path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req := httptest.NewRequestWithContext(ctx, method, u, bytes.NewReader(body))
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if ip == "" {
		ip = "0.0.0.0"
	}
	req.RemoteAddr = net.JoinHostPort(ip, "0")
	rec := httptest.NewRecorder()
	m.core.Handler().ServeHTTP(rec, req)
	return rec.Code, rec.Body.Bytes()
}

func readSpec(path string) ([]byte, error) { return os.ReadFile(path) }
