package relay

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/anp2net/relay/protocol"
	"github.com/labstack/echo/v4"
)

// authHeader signs a D4 header for key with exactly the tags given (no
// nonce, no automatic payload), at the relay clock.
func authHeader(r *testRelay, k int, tags ...[]string) string {
	e := mk(key(k), r.clock.now().Unix(), protocol.KindHTTPAuth, "", tags...)
	return "ANP2 " + base64.StdEncoding.EncodeToString(protocol.AppendJSON(nil, e))
}

// TestAuthBoundToThisRelay: the u tag must name this relay — its public
// base URL when configured, else the address the connection reached —
// whatever Host header the request carries; a header signed for another
// relay is 401 auth_wrong_relay even when the request's Host says that
// relay (the old check trusted Host).
func TestAuthBoundToThisRelay(t *testing.T) {
	r := startRelay(t)
	other := "http://relay.other.example/events"
	for name, tc := range map[string]struct {
		u, host string
		want    int
		code    string
	}{
		"own address":               {r.URL + "/events", "", 200, ""},
		"localhost for loopback":    {strings.Replace(r.URL, "127.0.0.1", "localhost", 1) + "/events", "", 200, ""},
		"other relay":               {other, "", 401, CodeAuthWrongRelay},
		"other relay, Host spoofed": {other, "relay.other.example", 401, CodeAuthWrongRelay},
		"own host, other port":      {"http://127.0.0.1:1/events", "", 401, CodeAuthWrongRelay},
		"own address, other path":   {r.URL + "/events?limit=1", "", 401, CodeUnauthorized},
		"own address, Host spoofed": {r.URL + "/events", "relay.other.example", 200, ""},
		"relative URL":              {"/events", "", 401, CodeUnauthorized},
	} {
		h := authHeader(r, 1, []string{"u", tc.u}, []string{"method", "GET"}, []string{"nonce", name})
		req, _ := http.NewRequest("GET", r.URL+"/events", nil)
		req.Header.Set("Authorization", h)
		if tc.host != "" {
			req.Host = tc.host
		}
		a := doReq(t, req)
		if a.status != tc.want || tc.code != "" && a.code(t) != tc.code {
			t.Errorf("%s: %d %s, want %d %s", name, a.status, a.body, tc.want, tc.code)
		}
	}

	// With a public base URL, its host is the one to name, and the
	// listening address no longer is.
	pub := startRelay(t, func(c *Config) { c.PublicBaseURL = "https://relay.example/" })
	for u, want := range map[string]int{
		"https://relay.example/events":     200,
		"https://RELAY.example:443/events": 200,
		"http://relay.example/events":      401, // port 80 is not 443
		pub.URL + "/events":                401,
	} {
		h := authHeader(pub, 1, []string{"u", u}, []string{"method", "GET"})
		if a := pub.do(t, "GET", "/events", "", nil, "Authorization", h); a.status != want {
			t.Errorf("base https://relay.example, u %s: %d %s, want %d", u, a.status, a.body, want)
		}
	}
}

func doReq(t *testing.T, req *http.Request) answer {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, resp.Header, b}
}

// TestAuthIsSingleUse: a header is accepted once; the same header again
// within its window is 401 auth_replayed, on the same route or another
// connection; a new header of the same reader is accepted.
func TestAuthIsSingleUse(t *testing.T) {
	r := startRelay(t)
	h := authHeader(r, 1, []string{"u", r.URL + "/events"}, []string{"method", "GET"})
	if a := r.do(t, "GET", "/events", "", nil, "Authorization", h); a.status != 200 {
		t.Fatalf("first use: %d %s", a.status, a.body)
	}
	a := r.do(t, "GET", "/events", "", nil, "Authorization", h)
	if a.status != 401 || a.code(t) != CodeAuthReplayed {
		t.Fatalf("replay: %d %s, want 401 %s", a.status, a.body, CodeAuthReplayed)
	}
	fresh := protocol.HTTPAuth(key(1), "GET", r.URL+"/events", nil, r.clock.now().Unix())
	again := protocol.HTTPAuth(key(1), "GET", r.URL+"/events", nil, r.clock.now().Unix())
	for _, h := range []string{fresh, again} {
		if a := r.do(t, "GET", "/events", "", nil, "Authorization", h); a.status != 200 {
			t.Fatalf("a new header in the same second: %d %s", a.status, a.body)
		}
	}
	// Once the header expired it is refused as stale, and forgotten.
	r.clock.add(2 * time.Minute)
	if a := r.do(t, "GET", "/events", "", nil, "Authorization", h); a.status != 401 || a.code(t) != CodeUnauthorized {
		t.Fatalf("expired header: %d %s", a.status, a.body)
	}
}

// TestAuthReplaySetIsBounded: when the set of remembered headers is full
// of unexpired ones, a new header is 503 auth_busy with Retry-After (it is
// never let through unremembered), and once they expire there is room.
func TestAuthReplaySetIsBounded(t *testing.T) {
	r := startRelay(t, func(c *Config) { c.AuthReplayBytes = 3 * seenEntryBytes })
	get := func() answer {
		return r.do(t, "GET", "/events", "", nil, "Authorization", protocol.HTTPAuth(key(1), "GET", r.URL+"/events", nil, r.clock.now().Unix()))
	}
	for i := range 3 {
		if a := get(); a.status != 200 {
			t.Fatalf("header %d: %d %s", i, a.status, a.body)
		}
	}
	a := get()
	if a.status != http.StatusServiceUnavailable || a.code(t) != CodeAuthBusy || a.header.Get("Retry-After") == "" {
		t.Fatalf("a header over the bound: %d %s (Retry-After %q)", a.status, a.body, a.header.Get("Retry-After"))
	}
	r.clock.add(61 * time.Second)
	if a := get(); a.status != 200 {
		t.Fatalf("after the remembered headers expired: %d %s", a.status, a.body)
	}
}

// TestAuthPayloadRequiredWithBody: a header on a request with a body must
// bind it with a payload tag (401 auth_payload_required otherwise; the
// old check took any body), a wrong payload is 401, a right one passes,
// and a request without a body needs none.
func TestAuthPayloadRequiredWithBody(t *testing.T) {
	s := newCore(t)
	s.Route(http.MethodPost, "/whoami", func(c echo.Context) error {
		who, err := s.Reader(c)
		if err != nil {
			return err
		}
		b, _ := io.ReadAll(c.Request().Body)
		return c.String(200, who+" "+string(b))
	})
	ts := newServer(t, s)
	r := &testRelay{Server: ts, clock: &clock{t: time.Unix(vectorTime, 0)}}
	body := []byte(`{"attacker":"chosen"}`)
	u := r.URL + "/whoami"
	a := r.do(t, "POST", "/whoami", "application/json", body, "Authorization",
		authHeader(r, 1, []string{"u", u}, []string{"method", "POST"}))
	if a.status != 401 || a.code(t) != CodeAuthPayloadRequired {
		t.Fatalf("body without payload tag: %d %s", a.status, a.body)
	}
	a = r.do(t, "POST", "/whoami", "application/json", body, "Authorization",
		authHeader(r, 1, []string{"u", u}, []string{"method", "POST"}, []string{"payload", strings.Repeat("0", 64)}))
	if a.status != 401 || a.code(t) != CodeUnauthorized {
		t.Fatalf("wrong payload: %d %s", a.status, a.body)
	}
	who := protocol.AgentIDOf(key(1))
	if a := r.do(t, "POST", "/whoami", "application/json", body, "Authorization",
		protocol.HTTPAuth(key(1), "POST", u, body, vectorTime)); a.status != 200 || string(a.body) != who+" "+string(body) {
		t.Fatalf("right payload: %d %s", a.status, a.body)
	}
	if a := r.do(t, "POST", "/whoami", "", nil, "Authorization",
		protocol.HTTPAuth(key(1), "POST", u, nil, vectorTime)); a.status != 200 || string(a.body) != who+" " {
		t.Fatalf("no body, no payload: %d %s", a.status, a.body)
	}
}

// TestBodyDeadlineOnEveryRoute: a route of a module that reads its body
// itself gets the same body deadline as the publish routes: a stalled
// body is 408 body_timeout and the connection is closed after it.
func TestBodyDeadlineOnEveryRoute(t *testing.T) {
	s := newCore(t, func(c *Config) { c.BodyTimeout = 300 * time.Millisecond })
	reached := false
	s.Route(http.MethodPost, "/module", func(c echo.Context) error {
		reached = true
		b, err := io.ReadAll(c.Request().Body)
		if err != nil {
			return err
		}
		return c.String(200, fmt.Sprint(len(b)))
	})
	ts := newServer(t, s)
	conn, err := net.Dial("tcp", ts.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(conn, "POST /api/module HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{")
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusRequestTimeout || !bytes.Contains(b, []byte(`"body_timeout"`)) || reached {
		t.Fatalf("stalled body: %d %s (handler reached: %v)", resp.StatusCode, b, reached)
	}
	if _, err := conn.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("connection still open after the 408: %v", err)
	}
	// A body in time reaches the handler whole.
	resp2, err := http.Post(ts.URL+"/module", "text/plain", strings.NewReader(strings.Repeat("x", 5000)))
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp2.Body)
	resp2.Body.Close()
	if resp2.StatusCode != 200 || string(b) != "5000" {
		t.Fatalf("body in time: %d %s", resp2.StatusCode, b)
	}
}

// FuzzCheckURL: checkURL never panics, and a u tag it accepts names this
// relay's host and port and the request's path and query.
func FuzzCheckURL(f *testing.F) {
	for _, u := range []string{"https://relay.example/events?limit=1", "https://relay.example:443/events?limit=1",
		"http://relay.example/events?limit=1", "https://RELAY.EXAMPLE/base/events?limit=1", "//relay.example/events",
		"https://relay.example@other.example/events?limit=1", "https://[::1]:443/events", "https://relay.example:0443/events?limit=1", "%zz"} {
		f.Add(u)
	}
	s := &Server{}
	s.baseHost, s.basePath = baseHostOf("https://relay.example/base/")
	req, _ := http.NewRequest("GET", "http://127.0.0.1:1/events?limit=1", nil)
	f.Fuzz(func(t *testing.T, signed string) {
		if s.checkURL(req, signed) != nil {
			return
		}
		u, err := url.Parse(signed)
		if err != nil || hostPort(u) != "relay.example:443" || !strings.HasSuffix(u.RequestURI(), "/events?limit=1") {
			t.Fatalf("accepted %q", signed)
		}
	})
}
