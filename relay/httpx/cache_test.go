package httpx

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/anp2net/relay/protocol"
	"github.com/labstack/echo/v4"
)

func TestTTLHint(t *testing.T) {
	for in, want := range map[string]int{
		`{"ttl_sec":120}`: 120, `{"ttl_sec":0}`: 3600, `{"ttl_sec":-5}`: 3600, `{"ttl_sec":1.5}`: 3600,
		`{"ttl_sec":"120"}`: 3600, `{"ttl_sec":604800}`: 604800, `{"ttl_sec":604801}`: 3600,
		`{}`: 3600, `not json`: 3600, ``: 3600, `{"ttl_sec":1e3}`: 3600, `[1]`: 3600,
	} {
		if got := TTLHint(in, 3600); got != want {
			t.Errorf("TTLHint(%s) = %d, want %d", in, got, want)
		}
	}
}

func FuzzTTLHint(f *testing.F) {
	for _, s := range []string{`{"ttl_sec":120}`, `{"ttl_sec":-1}`, `{"ttl_sec":1e400}`, `{"ttl_sec":null}`, `[]`, ``} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got := TTLHint(s, 60); got != 60 && (got < MinTTL || got > MaxTTL) {
			t.Fatalf("TTLHint(%q) = %d out of bounds", s, got)
		}
	})
}

func TestETagMatches(t *testing.T) {
	if !ETagMatches(`"a", W/"b"`, `"b"`) || !ETagMatches(`*`, `"x"`) || ETagMatches(`"a"`, `"b"`) ||
		!ETagMatches(`"b"`, `W/"b"`) || !ETagMatches(`W/"b"`, `W/"b"`) || ETagMatches(`W/"a"`, `W/"b"`) {
		t.Fatal("ETagMatches")
	}
}

// TestCachedScope: an authenticated request's answer is private (it may
// hold what only that reader sees), an anonymous one public; both vary by
// Authorization, and a matching If-None-Match still gets 304.
func TestCachedScope(t *testing.T) {
	e := echo.New()
	do := func(auth, inm string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodGet, "/beacons", nil)
		if auth != "" {
			req.Header.Set(echo.HeaderAuthorization, auth)
		}
		if inm != "" {
			req.Header.Set("If-None-Match", inm)
		}
		rec := httptest.NewRecorder()
		if err := Cached(e.NewContext(req, rec), 60, map[string]int{"n": 1}); err != nil {
			t.Fatal(err)
		}
		return rec
	}
	anon, authed := do("", ""), do("ANP2 x", "")
	if got := anon.Header().Get("Cache-Control"); got != "public, max-age=60" {
		t.Errorf("anonymous Cache-Control = %q", got)
	}
	if got := authed.Header().Get("Cache-Control"); got != "private, max-age=60" {
		t.Errorf("authenticated Cache-Control = %q", got)
	}
	for _, r := range []*httptest.ResponseRecorder{anon, authed} {
		if got := r.Header().Values("Vary"); len(got) != 1 || got[0] != "Authorization" {
			t.Errorf("Vary = %q", got)
		}
	}
	if r := do("ANP2 x", anon.Header().Get("ETag")); r.Code != http.StatusNotModified {
		t.Errorf("If-None-Match: %d, want 304", r.Code)
	}
}

// TestAgentOnly checks the preamble of the routes that take an agent_id
// and no query parameters: the id back when both hold, the code of the
// rule broken otherwise.
func TestAgentOnly(t *testing.T) {
	e := echo.New()
	id := strings.Repeat("ab", 32)
	for _, c := range []struct{ query, param, code string }{
		{"", id, ""},
		{"?x=1", id, CodeUnknownParam},
		{"", "AB" + id[2:], CodeBadParameter},
		{"", id[:62], CodeBadParameter},
	} {
		ctx := e.NewContext(httptest.NewRequest(http.MethodGet, "/agents/x/tier"+c.query, nil), httptest.NewRecorder())
		ctx.SetParamNames("agent_id")
		ctx.SetParamValues(c.param)
		got, err := AgentOnly(ctx)
		var pe *protocol.Error
		switch {
		case c.code == "" && (err != nil || got != id):
			t.Errorf("%q %q: %q, %v", c.query, c.param, got, err)
		case c.code != "" && (!errors.As(err, &pe) || pe.Code != c.code):
			t.Errorf("%q %q: %v, want code %s", c.query, c.param, err, c.code)
		}
	}
}
