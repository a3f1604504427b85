package relay

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"

	"github.com/anp2net/relay/protocol"
	"github.com/labstack/echo/v4"
)

// AuthMaxSkew is how far a reader's kind 27235 created_at may be from the
// relay clock (D4).
const AuthMaxSkew = 60

// Reader-authentication error codes beyond CodeUnauthorized: each is a
// 401 (auth_busy a 503) whose code says what to fix.
const (
	// CodeAuthWrongRelay: the u tag names another relay than this one.
	CodeAuthWrongRelay = "auth_wrong_relay"
	// CodeAuthPayloadRequired: the request has a body and the header no
	// payload tag binding it.
	CodeAuthPayloadRequired = "auth_payload_required"
	// CodeAuthReplayed: this header was already used (a header is good for
	// one request).
	CodeAuthReplayed = "auth_replayed"
	// CodeAuthBusy: the relay remembers as many headers as it may hold and
	// cannot take another until the oldest expires.
	CodeAuthBusy = "auth_busy"
)

// authKey is the echo.Context key under which authEvent keeps a request's
// outcome, so that a header checked twice (by the core and a module) is
// charged and remembered once.
const authKey = "anp2.auth"

type authOutcome struct {
	e   *protocol.Event
	err error
}

// reader returns the agent a request is authenticated as (D4), "" for an
// anonymous one, or a 401 for a header that does not prove an identity.
//
// The header is "Authorization: ANP2 <base64 of a signed event JSON>":
// kind 27235, empty content, created_at within ±60 s, a valid id and
// signature, a "method" tag equal to the request method, a "u" tag naming
// this relay (its public base URL, else the address it was reached on)
// with the request's path and query, and a "payload" tag, the SHA-256 hex
// of the body, required when the request has a body. Each header is good
// for one request.
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
// the signature is checked, whatever the outcome; a header whose
// signature holds is remembered until it expires and refused
// (auth_replayed) if it comes again.
func (s *Server) authEvent(c echo.Context) (*protocol.Event, error) {
	h := c.Request().Header.Get(echo.HeaderAuthorization)
	if h == "" {
		return nil, nil
	}
	if o, ok := c.Get(authKey).(authOutcome); ok {
		return o.e, o.err
	}
	e, err := s.checkAuth(c, h)
	c.Set(authKey, authOutcome{e, err})
	return e, err
}

func (s *Server) checkAuth(c echo.Context, h string) (*protocol.Event, error) {
	e, err := s.parseAuth(c, h)
	if err != nil {
		return nil, err
	}
	now := s.cfg.Now()
	if ok, wait := s.byAuth.allow(s.ClientKey(c), now, true); !ok {
		return nil, &retryError{protocol.Errorf(CodeRateLimited, "too many authenticated requests from this address (%d per %s)", s.cfg.RatePerAuth, s.cfg.RateWindow), retrySeconds(wait)}
	}
	if err := e.CheckSig(); err != nil {
		return nil, unauthorized("Authorization event signature is invalid")
	}
	if err := s.seen.use(e.ID, e.CreatedAt+AuthMaxSkew, now.Unix()); err != nil {
		return nil, err
	}
	return e, nil
}

// parseAuth runs every check of a D4 header except the signature's and
// the replay check.
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
	if err := s.checkURL(c.Request(), e.TagValue("u")); err != nil {
		return nil, err
	}
	if err := checkPayload(c, e.TagValue("payload")); err != nil {
		return nil, err
	}
	if err := e.CheckID(); err != nil {
		return nil, unauthorized("Authorization event id does not match its content")
	}
	return e, nil
}

func unauthorized(detail string) error { return protocol.Errorf(CodeUnauthorized, "%s", detail) }

// checkURL checks the signed URL against the request: its path and query
// must be the request's (or the public base URL's path followed by
// them, for a proxy that strips it), and its host and port must be this
// relay's (relayHost), never merely the request's Host header, which the
// sender chooses: a header signed for another relay is auth_wrong_relay.
func (s *Server) checkURL(r *http.Request, signed string) error {
	u, err := url.Parse(signed)
	if err != nil || !u.IsAbs() || u.Host == "" {
		return unauthorized("Authorization u tag must be the absolute request URL")
	}
	if uri := u.RequestURI(); uri != r.URL.RequestURI() && uri != s.basePath+r.URL.RequestURI() {
		return unauthorized("Authorization u tag does not match the request URL")
	}
	want, loopback := s.relayHost(r)
	got := hostPort(u)
	if got == want && want != "" {
		return nil
	}
	if loopback && strings.EqualFold(u.Hostname(), "localhost") && u.Port() == portOf(want) {
		return nil
	}
	if want == "" {
		want = "unknown: set the public base URL"
	}
	return protocol.Errorf(CodeAuthWrongRelay, "Authorization u tag names %s, not this relay (%s)", got, want)
}

// relayHost is the host:port a signed URL must name: the public base
// URL's when one is configured (and is not an unspecified address such
// as 0.0.0.0), else the local address the request's connection was
// accepted on. loopback says that address is a loopback one, where
// "localhost" names it too.
func (s *Server) relayHost(r *http.Request) (hp string, loopback bool) {
	if s.baseHost != "" {
		return s.baseHost, false
	}
	a, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok {
		return "", false
	}
	ap, err := netip.ParseAddrPort(a.String())
	if err != nil {
		return "", false
	}
	ip := ap.Addr().Unmap().WithZone("")
	return netip.AddrPortFrom(ip, ap.Port()).String(), ip.IsLoopback()
}

// baseHostOf returns the host:port and path of a public base URL for
// relayHost, "" for none, for an unparsable one, or for one whose host is
// an unspecified address (a listen-everywhere default names no relay).
func baseHostOf(base string) (hostport, path string) {
	b, err := url.Parse(strings.TrimRight(base, "/"))
	if err != nil || b.Host == "" {
		return "", ""
	}
	if ip, err := netip.ParseAddr(b.Hostname()); err == nil && ip.IsUnspecified() {
		return "", ""
	}
	return hostPort(b), b.EscapedPath()
}

// hostPort is u's lowercased host and port, the scheme's default port
// when none is given, IPv6 literals in brackets and IPv4-mapped ones as
// IPv4.
func hostPort(u *url.URL) string {
	host, port := strings.ToLower(u.Hostname()), u.Port()
	if port == "" {
		switch strings.ToLower(u.Scheme) {
		case "https", "wss":
			port = "443"
		default:
			port = "80"
		}
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		host = ip.Unmap().String()
	}
	return net.JoinHostPort(host, port)
}

func portOf(hostport string) string {
	_, p, _ := net.SplitHostPort(hostport)
	return p
}

// checkPayload checks the payload tag want against the request body: a
// request with a body needs one (auth_payload_required), and one given
// must be the body's SHA-256 hex.
func checkPayload(c echo.Context, want string) error {
	body, err := requestBody(c)
	if err != nil {
		return err
	}
	if want == "" {
		if len(body) > 0 {
			return protocol.Errorf(CodeAuthPayloadRequired, "the request has a body: the Authorization event needs a payload tag, the SHA-256 hex of the body")
		}
		return nil
	}
	sum := sha256.Sum256(body)
	if hex.EncodeToString(sum[:]) != want {
		return unauthorized("Authorization payload tag does not match the request body")
	}
	return nil
}

// requestBody is the request's body, as readBodies kept it, or read now
// (and put back) for a request that did not pass through it.
func requestBody(c echo.Context) ([]byte, error) {
	r := c.Request()
	if b, ok := bodyRead(r); ok {
		return b, nil
	}
	if r.Body == nil || r.Body == http.NoBody {
		return nil, nil
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, err
	}
	r.Body = newWholeBody(body)
	return body, nil
}

// seenEntryBytes is what one remembered header costs the replay set: its
// 32-byte id, its expiry, and the map and bucket slots that hold them.
const seenEntryBytes = 96

// defaultAuthReplayBytes is Config.AuthReplayBytes's default: 16 MiB,
// about 175,000 headers, which is 1,450 accepted headers a second for
// as long as each stays valid (two minutes).
const defaultAuthReplayBytes = 16 << 20

// seenIDs remembers the id of every D4 header accepted until the header
// expires, so each is good for one request. It is bounded in bytes: when
// full of headers that have not expired it refuses new ones (auth_busy)
// rather than forget one early, which would let it be replayed.
type seenIDs struct {
	mu  sync.Mutex
	max int                   // entries
	ids map[[32]byte]struct{} // remembered ids
	exp map[int64][][32]byte  // ids by expiry (unix s)
	low int64                 // no bucket below this expiry is left
}

func newSeenIDs(maxBytes int64) *seenIDs {
	if maxBytes <= 0 {
		maxBytes = defaultAuthReplayBytes
	}
	return &seenIDs{max: int(max(1, maxBytes/seenEntryBytes)), ids: map[[32]byte]struct{}{}, exp: map[int64][][32]byte{}}
}

// use records the header id (64 hex) valid until expires (unix s) at now,
// or returns auth_replayed when it was already used, or a 503 auth_busy
// (Retry-After: until the oldest expires) when the set is full.
func (s *seenIDs) use(id string, expires, now int64) error {
	var k [32]byte
	if !protocol.IsHex64(id) {
		return unauthorized("Authorization event id is malformed")
	}
	for i := range k {
		k[i] = unhex(id[2*i])<<4 | unhex(id[2*i+1])
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sweep(now)
	if _, ok := s.ids[k]; ok {
		return protocol.Errorf(CodeAuthReplayed, "this Authorization header was already used: sign a new one for each request")
	}
	if len(s.ids) >= s.max {
		return &retryError{protocol.Errorf(CodeAuthBusy, "the relay holds as many unexpired Authorization headers as it may; retry shortly"), retrySecondsUnix(s.low - now + 1)}
	}
	s.ids[k] = struct{}{}
	s.exp[expires] = append(s.exp[expires], k)
	if len(s.ids) == 1 || expires < s.low {
		s.low = expires
	}
	return nil
}

// sweep forgets every id whose header expired before now.
func (s *seenIDs) sweep(now int64) {
	if len(s.ids) == 0 {
		return
	}
	if now-s.low > 4*AuthMaxSkew {
		// A clock moved far (tests) or a long quiet spell: walk the buckets
		// rather than every second in between.
		for t, ids := range s.exp {
			if t < now {
				s.forget(t, ids)
			}
		}
		s.low = now
		return
	}
	for ; s.low < now; s.low++ {
		s.forget(s.low, s.exp[s.low])
	}
}

func (s *seenIDs) forget(t int64, ids [][32]byte) {
	for _, k := range ids {
		delete(s.ids, k)
	}
	delete(s.exp, t)
}

func unhex(c byte) byte {
	if c >= 'a' {
		return c - 'a' + 10
	}
	return c - '0'
}

func retrySecondsUnix(d int64) int { return int(max(1, d)) }
