package explorer_test

import (
	"bytes"
	"compress/gzip"
	"io/fs"
	"net/http"
	"strings"
	"testing"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay"
	"github.com/anp2net/relay/relay/explorer"
	"github.com/anp2net/relay/relay/relaytest"
	"github.com/anp2net/relay/tasks/taskstest"
)

const browserAccept = "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8"

func TestWantsHTML(t *testing.T) {
	for _, c := range []struct {
		accept string
		want   bool
	}{
		{"", false},
		{"*/*", false},
		{"application/json", false},
		{"application/json, text/html", true},
		{"application/json;q=1, text/html;q=0.5", false},
		{"text/html;q=0.5, application/json;q=0.5", true},
		{browserAccept, true},
		{"TEXT/HTML", true},
		{"text/html;q=0", false},
		{"text/html;q=2", false},
		{"text/html;q=abc", false},
		{"application/xhtml+xml", true},
		{"text/*", false},
		{"application/anp+cbor", false},
		{"text/event-stream", false},
	} {
		if got := explorer.WantsHTML(c.accept); got != c.want {
			t.Errorf("WantsHTML(%q) = %v, want %v", c.accept, got, c.want)
		}
	}
}

func FuzzWantsHTML(f *testing.F) {
	for _, s := range []string{"", "*/*", browserAccept, "text/html;q=0.5, application/json;q=0.5", "text/html;;q=", ",,,", "text/html;q=NaN"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, accept string) {
		got := explorer.WantsHTML(accept)
		// HTML is chosen only when text/html or xhtml is named.
		low := strings.ToLower(accept)
		if got && !strings.Contains(low, "html") {
			t.Fatalf("WantsHTML(%q) without html", accept)
		}
	})
}

func startRelay(t *testing.T) *relaytest.Relay {
	return relaytest.Start(t, []relay.Module{explorer.NewModule()})
}

// TestRootNegotiates: a browser gets the explorer at /, a JSON client
// keeps the 404 not_found any unknown route answers, byte for byte.
func TestRootNegotiates(t *testing.T) {
	r := startRelay(t)
	html := r.Do(t, http.MethodGet, "/", "", nil, "Accept", browserAccept)
	if html.Status != http.StatusOK || !strings.HasPrefix(html.Header.Get("Content-Type"), "text/html") ||
		!bytes.Contains(html.Body, []byte(`src="/explorer/app.js"`)) {
		t.Fatalf("browser: %d %s %.200s", html.Status, html.Header.Get("Content-Type"), html.Body)
	}
	if !strings.Contains(strings.Join(html.Header.Values("Vary"), " ")+" ", "Accept ") || html.Header.Get("Content-Security-Policy") == "" {
		t.Fatalf("browser answer headers: %v", html.Header)
	}
	unknown := r.Do(t, http.MethodGet, "/no-such-route", "", nil, "Accept", "application/json")
	if unknown.Status != http.StatusNotFound {
		t.Fatalf("unknown route: %d", unknown.Status)
	}
	for _, accept := range []string{"", "*/*", "application/json", "application/json, text/html;q=0.5"} {
		a := r.Do(t, http.MethodGet, "/", "", nil, "Accept", accept)
		if a.Status != unknown.Status || !bytes.Equal(a.Body, unknown.Body) || a.Code(t) != "not_found" ||
			!strings.Contains(strings.Join(a.Header.Values("Vary"), " ")+" ", "Accept ") {
			t.Errorf("Accept %q: %d %s, want %d %s", accept, a.Status, a.Body, unknown.Status, unknown.Body)
		}
	}
}

// TestAssets serves every embedded file with its type, an ETag that
// answers 304, and 404 for anything else.
func TestAssets(t *testing.T) {
	r := startRelay(t)
	types := map[string]string{".js": "text/javascript", ".css": "text/css", ".html": "text/html"}
	n := 0
	err := fs.WalkDir(explorer.Assets(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		n++
		a := r.Do(t, http.MethodGet, "/explorer/"+p, "", nil)
		ext := p[strings.LastIndex(p, "."):]
		if a.Status != http.StatusOK || !strings.HasPrefix(a.Header.Get("Content-Type"), types[ext]) || a.Header.Get("ETag") == "" {
			t.Errorf("%s: %d %q", p, a.Status, a.Header.Get("Content-Type"))
			return nil
		}
		etag := a.Header.Get("ETag")
		for _, list := range []string{etag, `"other", ` + etag, strings.TrimPrefix(etag, "W/"), "*"} {
			if again := r.Do(t, http.MethodGet, "/explorer/"+p, "", nil, "If-None-Match", list); again.Status != http.StatusNotModified {
				t.Errorf("%s with If-None-Match %s: %d", p, list, again.Status)
			}
		}
		if other := r.Do(t, http.MethodGet, "/explorer/"+p, "", nil, "If-None-Match", `W/"0123"`); other.Status != http.StatusOK {
			t.Errorf("%s with another ETag: %d", p, other.Status)
		}
		return nil
	})
	if err != nil || n < 10 {
		t.Fatalf("walked %d assets: %v", n, err)
	}
	for _, p := range []string{"/explorer/nope.js", "/explorer/../module.go", "/explorer/pages/", "/explorer/api/nope"} {
		if a := r.Do(t, http.MethodGet, p, "", nil); a.Status != http.StatusNotFound {
			t.Errorf("%s: %d", p, a.Status)
		}
	}
	if a := r.Do(t, http.MethodGet, "/explorer/", "", nil); a.Status != http.StatusOK || !bytes.Contains(a.Body, []byte("app.js")) {
		t.Errorf("/explorer/: %d", a.Status)
	}
}

// TestFirstLoadSize: everything a first load can fetch, gzip-compressed
// as the relay sends it, stays under the 200 KB budget of issue #21.
func TestFirstLoadSize(t *testing.T) {
	total := 0
	fs.WalkDir(explorer.Assets(), ".", func(p string, d fs.DirEntry, _ error) error {
		if d.IsDir() {
			return nil
		}
		b, _ := fs.ReadFile(explorer.Assets(), p)
		var buf bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
		zw.Write(b)
		zw.Close()
		total += buf.Len()
		return nil
	})
	t.Logf("all assets: %d bytes gzipped", total)
	if total == 0 || total > 200_000 {
		t.Fatalf("assets weigh %d bytes compressed", total)
	}
}

// TestCORSOnEveryRoute: the explorer's routes answer browsers on other
// origins like every relay route.
func TestCORSOnEveryRoute(t *testing.T) {
	r := startRelay(t)
	id := taskstest.NewAgent("x").ID
	for _, p := range []string{"/", "/explorer/", "/explorer/app.js", "/explorer/api/moderation", "/explorer/api/dm_count/" + id,
		"/api/explorer/api/moderation", "/explorer/api/dm_count/nothex"} {
		a := r.Do(t, http.MethodGet, p, "", nil, "Origin", "https://elsewhere.example", "Accept", browserAccept)
		if a.Header.Get("Access-Control-Allow-Origin") != "*" {
			t.Errorf("%s: %d without CORS: %v", p, a.Status, a.Header)
		}
	}
}

// TestModerationAndDMRoutes loads the test world into a relay and reads
// the two JSON routes the explorer adds.
func TestModerationAndDMRoutes(t *testing.T) {
	r := startRelay(t)
	w := newWorld(r.Clock.Now().Unix())
	for _, e := range w.events {
		post(t, r.URL, e)
	}
	// Bob answers with a DM he then revokes: it no longer counts.
	gone := w.bob.Sign(protocol.KindDM, r.Clock.Now().Unix()-10, w.dm.Content, []string{"p", w.alice.ID}, []string{"nonce", w.dm.TagValue("nonce")})
	post(t, r.URL, gone)
	post(t, r.URL, w.bob.Sign(protocol.KindRevoke, r.Clock.Now().Unix()-5, "", []string{"e", gone.ID}))

	var mod struct {
		HideThreshold float64 `json:"hide_threshold"`
		Count         int     `json:"count"`
		Hidden        []struct {
			EventID    string  `json:"event_id"`
			Author     string  `json:"author"`
			Hidden     bool    `json:"hidden"`
			FlagCount  int     `json:"flag_count"`
			FlagWeight float64 `json:"flag_weight"`
		} `json:"hidden"`
	}
	relaytest.Eventually(t, "the flagged post hidden", func() bool {
		return getJSON(t, r.URL+"/explorer/api/moderation", &mod) == 200 && mod.Count == 1
	})
	h := mod.Hidden[0]
	if h.EventID != w.hidden.ID || h.Author != w.dave.ID || !h.Hidden || h.FlagCount != 3 || h.FlagWeight < mod.HideThreshold || mod.HideThreshold != 3 {
		t.Fatalf("moderation: %+v", mod)
	}
	for _, c := range []struct {
		agent          string
		sent, received int
	}{{w.alice.ID, 1, 0}, {w.bob.ID, 0, 1}, {w.carol.ID, 0, 0}} {
		var d struct {
			Sent, Received int
			Capped         bool `json:"received_capped"`
		}
		if st := getJSON(t, r.URL+"/explorer/api/dm_count/"+c.agent, &d); st != 200 || d.Sent != c.sent || d.Received != c.received || d.Capped {
			t.Errorf("dm_count %s: %d %+v, want %d sent %d received", c.agent[:8], st, d, c.sent, c.received)
		}
	}
	for path, code := range map[string]string{
		"/explorer/api/dm_count/ABC":                   "invalid_parameter",
		"/explorer/api/dm_count/" + w.bob.ID + "?x=1":  "unknown_parameter",
		"/explorer/api/moderation?limit=0":             "invalid_parameter",
		"/explorer/api/moderation?limit=1&limit=2":     "invalid_parameter",
		"/explorer/api/moderation?include_hidden=true": "unknown_parameter",
	} {
		if a := r.Do(t, http.MethodGet, path, "", nil); a.Status != http.StatusBadRequest || a.Code(t) != code {
			t.Errorf("%s: %d %s, want 400 %s", path, a.Status, a.Body, code)
		}
	}
}
