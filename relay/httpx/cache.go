package httpx

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"
)

// Cached writes v as JSON with Cache-Control "public, max-age=<ttl>" and a
// strong ETag (the first 128 bits of the body's SHA-256, hex, quoted). A
// request whose If-None-Match names the tag (weak W/ tags compare equal)
// or is * gets 304 with no body. The tag hashes the answer itself, so it
// changes the moment the answer does (seed §12.9.5).
//
// An answer may depend on its reader (D4: hidden events, invite_only
// authors), so a request that carries Authorization is answered
// "private": no shared cache may keep it and hand it to another reader;
// and every answer varies by Authorization, so a shared cache never
// answers an authenticated request with what it kept for an anonymous one.
func Cached(c echo.Context, ttl int, v any) error {
	body, err := json.Marshal(v)
	if err != nil {
		return err
	}
	sum := sha256.Sum256(body)
	etag := `"` + hex.EncodeToString(sum[:16]) + `"`
	h := c.Response().Header()
	h.Set("ETag", etag)
	scope := "public"
	if c.Request().Header.Get(echo.HeaderAuthorization) != "" {
		scope = "private"
	}
	h.Set("Cache-Control", scope+", max-age="+strconv.Itoa(ttl))
	h.Add("Vary", echo.HeaderAuthorization)
	if match := c.Request().Header.Get("If-None-Match"); match != "" && ETagMatches(match, etag) {
		return c.NoContent(http.StatusNotModified)
	}
	return c.JSONBlob(http.StatusOK, body)
}

// ETagMatches reports whether an If-None-Match list names etag, strong or
// weak (weak comparison, RFC 9110 §13.1.2: W/ prefixes aside), or is "*".
func ETagMatches(list, etag string) bool {
	etag = strings.TrimPrefix(etag, "W/")
	for t := range strings.SplitSeq(list, ",") {
		t = strings.TrimPrefix(strings.TrimSpace(t), "W/")
		if t == "*" || t == etag {
			return true
		}
	}
	return false
}

// TTL bounds of a ttl_sec hint (seed §12.9.1).
const (
	MinTTL = 1
	MaxTTL = 7 * 86400
)

// TTLHint reads the ttl_sec hint of an overwrite event's JSON content
// (kind 0, 4, 16; seed §12.9.1): an integer from MinTTL to MaxTTL seconds.
// Anything else — no content, no hint, a non-integer, out of bounds —
// gives def.
func TTLHint(content string, def int) int {
	var body struct {
		TTL json.RawMessage `json:"ttl_sec"`
	}
	if json.Unmarshal([]byte(content), &body) != nil || len(body.TTL) == 0 || body.TTL[0] < '0' || body.TTL[0] > '9' {
		return def // absent, a string, null, negative, …
	}
	n, err := strconv.ParseInt(string(body.TTL), 10, 64)
	if err != nil || n < MinTTL || n > MaxTTL {
		return def
	}
	return int(n)
}
