package mcp

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/labstack/echo/v4"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// routesURI is the resource listing the routes this relay serves.
const routesURI = "anp2://relay/routes"

// addResources registers the routes resource and, with SpecPath, one
// resource per "## " section of the SPEC.
func (m *Module) addResources() error {
	m.server.AddResource(&sdk.Resource{URI: routesURI, Name: "routes", MIMEType: "text/plain",
		Description: "Every HTTP route this relay serves (each also under /api), generated from its router."},
		func(context.Context, *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
			return text(routesURI, m.routes()), nil
		})
	if m.opts.SpecPath == "" {
		return nil
	}
	b, err := readSpec(m.opts.SpecPath)
	if err != nil {
		return fmt.Errorf("mcp: read spec: %w", err)
	}
	for _, s := range Sections(string(b)) {
		uri := "anp2://spec/" + s.Slug
		body := s.Text
		m.server.AddResource(&sdk.Resource{URI: uri, Name: "spec-" + s.Slug, Title: s.Title, MIMEType: "text/markdown",
			Description: "SPEC section: " + s.Title},
			func(context.Context, *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
				return text(uri, body), nil
			})
	}
	return nil
}

func text(uri, s string) *sdk.ReadResourceResult {
	return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{{URI: uri, MIMEType: "text/plain", Text: s}}}
}

// routes lists the relay's routes, one "METHOD path" a line, sorted,
// without the /api copies.
func (m *Module) routes() string {
	e, ok := m.core.Handler().(*echo.Echo)
	if !ok {
		return ""
	}
	seen := map[string]bool{}
	var lines []string
	for _, r := range e.Routes() {
		if strings.HasPrefix(r.Path, "/api/") || r.Method == echo.RouteNotFound {
			continue
		}
		l := r.Method + " " + r.Path
		if !seen[l] {
			seen[l] = true
			lines = append(lines, l)
		}
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n") + "\n"
}

// Section is one "## " section of a Markdown document.
type Section struct {
	Slug  string // "3" for "## 3. HTTP API", else the title lowercased and hyphenated
	Title string
	Text  string // the heading line and everything up to the next "## "
}

// Sections splits a Markdown document at its level-2 headings; text
// before the first is its own section, "preamble".
func Sections(doc string) []Section {
	var out []Section
	cur := Section{Slug: "preamble", Title: "Preamble"}
	var b strings.Builder
	flush := func() {
		if strings.TrimSpace(b.String()) != "" {
			cur.Text = b.String()
			out = append(out, cur)
		}
		b.Reset()
	}
	for _, line := range strings.SplitAfter(doc, "\n") {
		if strings.HasPrefix(line, "## ") {
			flush()
			title := strings.TrimSpace(line[3:])
			cur = Section{Slug: slug(title), Title: title}
		}
		b.WriteString(line)
	}
	flush()
	return out
}

func slug(title string) string {
	if n, _, ok := strings.Cut(title, "."); ok && n != "" && strings.Trim(n, "0123456789") == "" {
		return n
	}
	var b strings.Builder
	for _, r := range strings.ToLower(title) {
		switch {
		case r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
			b.WriteRune(r)
		case b.Len() > 0 && !strings.HasSuffix(b.String(), "-"):
			b.WriteByte('-')
		}
	}
	return strings.TrimSuffix(b.String(), "-")
}
