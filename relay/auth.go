package relay

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"io"
	"net/url"
	"strings"

	"github.com/anp2net/relay/protocol"
	"github.com/labstack/echo/v4"
)

// AuthMaxSkew is how far a reader's kind 27235 created_at may be from the
// relay clock (D4).
const AuthMaxSkew = 60

// reader returns the agent a request is authenticated as (D4), "" for an
// anonymous one, or a 401 for a header that does not prove an identity.
//
// The header is "Authorization: ANP2 <base64 of a signed event JSON>":
// kind 27235, empty content, created_at within ±60 s, a valid id and
// signature, a "method" tag equal to the request method and a "u" tag equal
// to the absolute request URL (query included); a "payload" tag, when
// present, must be the SHA-256 hex of the request body.
func (s *Server) reader(c echo.Context) (string, error) {
	e, err := s.authEvent(c)
	if e == nil || err != nil {
		return "", err
	}
	return e.AgentID, nil
}

// authEvent returns the verified kind 27235 event of a request's D4
// header (see reader), nil for an anonymous request. The address is
// charged one unit of its authentication allowance (RatePerAuth) before
// the signature is checked, whatever the outcome.
func (s *Server) authEvent(c echo.Context) (*protocol.Event, error) {
	h := c.Request().Header.Get(echo.HeaderAuthorization)
	if h == "" {
		return nil, nil
	}
	e, err := s.parseAuth(c, h)
	if err != nil {
		return nil, err
	}
	if ok, wait := s.byAuth.allow(s.ClientKey(c), s.cfg.Now(), true); !ok {
		return nil, &retryError{protocol.Errorf(CodeRateLimited, "too many authenticated requests from this address (%d per %s)", s.cfg.RatePerAuth, s.cfg.RateWindow), retrySeconds(wait)}
	}
	if err := e.CheckSig(); err != nil {
		return nil, unauthorized("Authorization event signature is invalid")
	}
	return e, nil
}

// parseAuth runs every check of a D4 header except the signature's.
func (s *Server) parseAuth(c echo.Context, h string) (*protocol.Event, error) {
	scheme, token, _ := strings.Cut(h, " ")
	if !strings.EqualFold(scheme, "ANP2") {
		return nil, unauthorized("Authorization scheme must be ANP2")
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(token))
	if err != nil {
		if raw, err = base64.RawURLEncoding.DecodeString(strings.TrimSpace(token)); err != nil {
			return nil, unauthorized("Authorization token is not base64")
		}
	}
	e, err := protocol.DecodeJSON(raw)
	if err != nil {
		return nil, unauthorized("Authorization event is malformed: " + err.Error())
	}
	if e.Kind != protocol.KindHTTPAuth || e.Content != "" {
		return nil, unauthorized("Authorization event must be kind 27235 with empty content")
	}
	if d := e.CreatedAt - s.now(); d > AuthMaxSkew || d < -AuthMaxSkew {
		return nil, unauthorized("Authorization event created_at is more than 60 s from the relay clock")
	}
	if e.TagValue("method") != c.Request().Method {
		return nil, unauthorized("Authorization method tag does not match the request method")
	}
	if !s.sameURL(c, e.TagValue("u")) {
		return nil, unauthorized("Authorization u tag does not match the request URL")
	}
	if want := e.TagValue("payload"); want != "" {
		if err := checkPayload(c, want); err != nil {
			return nil, err
		}
	}
	if err := e.CheckID(); err != nil {
		return nil, unauthorized("Authorization event id does not match its content")
	}
	return e, nil
}

func unauthorized(detail string) error { return protocol.Errorf(CodeUnauthorized, "%s", detail) }

// sameURL compares the signed URL with the request: path and query must be
// identical, and the host must be the request's Host or the public base
// URL's host (behind a proxy the two differ).
func (s *Server) sameURL(c echo.Context, signed string) bool {
	u, err := url.Parse(signed)
	if err != nil || !u.IsAbs() {
		return false
	}
	r := c.Request()
	if u.RequestURI() != r.URL.RequestURI() {
		return false
	}
	if u.Host == r.Host {
		return true
	}
	if b, err := url.Parse(s.cfg.PublicBaseURL); err == nil && b.Host != "" && b.Host == u.Host {
		return true
	}
	return false
}

func checkPayload(c echo.Context, want string) error {
	r := c.Request()
	if r.Body == nil {
		return unauthorized("Authorization payload tag given for a request without a body")
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return err
	}
	r.Body = io.NopCloser(strings.NewReader(string(body)))
	sum := sha256.Sum256(body)
	if hex.EncodeToString(sum[:]) != want {
		return unauthorized("Authorization payload tag does not match the request body")
	}
	return nil
}
