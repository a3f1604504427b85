// Package explorer is the relay's web explorer (SPEC §19) as a capability
// module: a browser asking for `/` with `Accept: text/html` gets a small
// single-page application, embedded in the binary, that reads the relay's
// own JSON API and re-derives what it can in the browser (event ids with
// WebCrypto SHA-256, signatures with WebCrypto Ed25519). JSON clients keep
// the answer `/` always gave them. The module adds three JSON routes the
// pages need and the core does not serve: the hidden-event list and an
// agent's DM counts.
package explorer

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
	"sync"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay"
	"github.com/anp2net/relay/relay/eventlog"
	"github.com/anp2net/relay/relay/httpx"
	"github.com/labstack/echo/v4"
)

//go:embed web
var webFS embed.FS

// Prefix is where the explorer's assets and JSON routes live.
const Prefix = "/explorer"

// Module serves the explorer.
type Module struct {
	core  *relay.Server
	files fs.FS
	etags sync.Map // asset path → quoted ETag
	// anchors, when set (VerifyAnchors), fetches human_anchor pages.
	anchors *anchorCache
}

var _ relay.Module = (*Module)(nil)

// NewModule returns the explorer module.
func NewModule() *Module {
	sub, err := fs.Sub(webFS, "web")
	if err != nil {
		panic(err) // the embedded directory is part of the binary
	}
	return &Module{files: sub}
}

// Name is "explorer".
func (m *Module) Name() string { return "explorer" }

// Mount registers `/` (negotiated), the assets under /explorer/ and the
// explorer's JSON routes.
func (m *Module) Mount(core *relay.Server) error {
	m.core = core
	core.Route(http.MethodGet, "/", m.getRoot)
	core.Route(http.MethodGet, Prefix, m.getIndex)
	core.Route(http.MethodGet, Prefix+"/", m.getIndex)
	core.Route(http.MethodGet, Prefix+"/*", m.getAsset)
	core.Route(http.MethodGet, Prefix+"/api/moderation", m.getModeration)
	core.Route(http.MethodGet, Prefix+"/api/dm_count/:agent_id", m.getDMCount)
	core.Route(http.MethodGet, Prefix+"/api/human_anchor/:agent_id", m.getHumanAnchor)
	return nil
}

// getRoot is GET /: the explorer for a browser, and for anyone else the
// 404 not_found `/` has always answered (no JSON client changes).
func (m *Module) getRoot(c echo.Context) error {
	// Caches must keep the two answers apart.
	c.Response().Header().Add("Vary", "Accept")
	if !WantsHTML(c.Request().Header.Get("Accept")) {
		return echo.ErrNotFound
	}
	return m.getIndex(c)
}

// getIndex serves the application shell.
func (m *Module) getIndex(c echo.Context) error {
	return m.serve(c, "index.html")
}

// getAsset serves one embedded file; unknown names are 404 not_found.
func (m *Module) getAsset(c echo.Context) error {
	name := path.Clean(strings.TrimPrefix(c.Param("*"), "/"))
	if name == "." || strings.HasPrefix(name, "..") || strings.HasPrefix(name, "api/") {
		return echo.ErrNotFound
	}
	return m.serve(c, name)
}

// serve writes the embedded file name with its content type and an ETag
// (its SHA-256), answering 304 to a matching If-None-Match. The assets
// change only with the binary, so a reload costs one round trip each.
func (m *Module) serve(c echo.Context, name string) error {
	b, err := fs.ReadFile(m.files, name)
	if err != nil {
		return echo.ErrNotFound
	}
	etag, ok := m.etags.Load(name)
	if !ok {
		sum := sha256.Sum256(b)
		etag = `W/"` + hex.EncodeToString(sum[:12]) + `"` // weak: the bytes sent differ when gzipped
		m.etags.Store(name, etag)
	}
	h := c.Response().Header()
	h.Set("ETag", etag.(string))
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Content-Type-Options", "nosniff")
	if name == "index.html" {
		// The pages load only the relay's own scripts and talk only to it.
		h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; worker-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'")
	}
	if httpx.ETagMatches(c.Request().Header.Get("If-None-Match"), etag.(string)) {
		return c.NoContent(http.StatusNotModified)
	}
	ctype := mime.TypeByExtension(path.Ext(name))
	if ctype == "" {
		ctype = "application/octet-stream"
	}
	if strings.HasSuffix(name, ".js") {
		ctype = "text/javascript; charset=utf-8"
	}
	return c.Blob(http.StatusOK, ctype, b)
}

// hiddenList is GET /explorer/api/moderation.
type hiddenList struct {
	At            int64         `json:"at"`
	ActiveAgents  int           `json:"active_agents"`
	HideThreshold float64       `json:"hide_threshold"`
	Count         int           `json:"count"`
	Hidden        []hiddenEvent `json:"hidden"`
}

// hiddenEvent is one hidden event as the §3.2 placeholder describes it,
// plus its author: never its content.
type hiddenEvent struct {
	EventID       string  `json:"event_id"`
	Author        string  `json:"author"`
	Hidden        bool    `json:"hidden"`
	FlagCount     int     `json:"flag_count"`
	FlagWeight    float64 `json:"flag_weight"`
	FirstHiddenAt int64   `json:"first_hidden_at"`
	HiddenSince   int64   `json:"hidden_since"`
}

// getModeration lists the events the published moderation snapshot hides
// (§5.2), most recently hidden first, with the threshold they crossed, in
// the state of the requested branch (default the preferred one, as for
// GET /events/{id}/flags).
// It gives what a top-1% reader's placeholders give (§3.2), so it tells
// an anonymous reader no more than GET /events/{id}/flags already does.
func (m *Module) getModeration(c echo.Context) error {
	v, err := httpx.Params(c, "limit", "branch")
	if err != nil {
		return err
	}
	limit, err := httpx.IntParam(v, "limit", 200, 1, 1000)
	if err != nil {
		return err
	}
	// The state GET /events/{id}/flags answers from (SPEC §17.5).
	st, err := m.core.ViewState(c.Request().Context(), v.Get("branch"))
	if err != nil {
		return err
	}
	snap := st.Moderation.Current(m.core.Now())
	all := snap.HiddenEvents()
	out := hiddenList{At: snap.Now, ActiveAgents: snap.ActiveAgents, HideThreshold: snap.HideThreshold,
		Count: len(all), Hidden: make([]hiddenEvent, 0, min(len(all), int(limit)))}
	for _, h := range all {
		out.Hidden = append(out.Hidden, hiddenEvent{EventID: h.EventID, Author: h.Author, Hidden: true,
			FlagCount: h.FlagCount, FlagWeight: h.FlagWeight, FirstHiddenAt: h.FirstHiddenAt, HiddenSince: h.HiddenSince})
	}
	sortHidden(out.Hidden)
	if len(out.Hidden) > int(limit) {
		out.Hidden = out.Hidden[:limit]
	}
	return c.JSON(http.StatusOK, out)
}

// dmCount is GET /explorer/api/dm_count/{agent_id}.
type dmCount struct {
	AgentID  string `json:"agent_id"`
	Sent     int    `json:"sent"`
	Received int    `json:"received"`
	// SentCapped and Capped are true when sent or received reached the
	// counting limit (more may exist).
	SentCapped bool `json:"sent_capped"`
	Capped     bool `json:"received_capped"`
}

// maxDMCount bounds each count (one indexed query's page).
const maxDMCount = 1000

// getDMCount counts the agent's non-revoked DMs (kind 3) sent and
// received, each up to maxDMCount, that the reader (D4, or anonymous) may
// see (§7.1 and the §12.8 reader rule: an invite_only author's DMs count
// only for itself and the agents it follows): metadata SPEC §10 already
// makes public, without the sealed contents, so the agent page can show
// a count and nothing else.
func (m *Module) getDMCount(c echo.Context) error {
	id, err := httpx.AgentOnly(c)
	if err != nil {
		return err
	}
	reader, err := m.core.Reader(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	st := m.core.State()
	out := dmCount{AgentID: id}
	count := func(f eventlog.Filter) (int, bool, error) {
		f.Kinds, f.Limit, f.Revoked = []int64{protocol.KindDM}, maxDMCount, st.Revoked
		bodies, err := m.core.Log().Query(ctx, f)
		if err != nil {
			return 0, false, err
		}
		n := 0
		for _, b := range bodies {
			var e protocol.Event
			if json.Unmarshal(b, &e) == nil && m.core.Sees(reader, &e) {
				n++
			}
		}
		return n, len(bodies) >= maxDMCount, nil
	}
	if out.Sent, out.SentCapped, err = count(eventlog.Filter{Authors: []string{id}}); err != nil {
		return err
	}
	if out.Received, out.Capped, err = count(eventlog.Filter{Tags: map[string][]string{"p": {id}}}); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

// Assets returns the embedded files the explorer serves under /explorer/.
func Assets() fs.FS {
	sub, _ := fs.Sub(webFS, "web")
	return sub
}
