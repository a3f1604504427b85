package main

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/anp2net/relay/protocol"
)

// The abuse tests of SPEC §20.4: addresses, signed headers and
// connections, each against a real anp2 serve process.

// httpProxyArgs makes the relay believe X-Forwarded-For from loopback, so
// a test on loopback can speak for clients at any IPv6 address.
var httpProxyArgs = []string{"--trusted-proxies", "127.0.0.1/32,::1/128"}

// httpFrom sends one request as if from the client at ip (through the
// trusted loopback proxy) and returns its status and body.
func httpFrom(t *testing.T, ip, method, url string, body []byte, hdr ...string) (int, []byte) {
	t.Helper()
	st, _, b := httpDo(t, method, url, body, append([]string{"X-Forwarded-For", ip, "Content-Type", "application/json"}, hdr...)...)
	return st, b
}

// TestHTTPAbuseIPv6RotationIsOneClient: publishes rotated across the
// addresses of one IPv6 /64 share one allowance (the old relay counted
// each address alone: 599 of 600 passed), another /64 has its own, and
// the streams of one /64 share one cap of 64, so it cannot take every
// slot.
func TestHTTPAbuseIPv6RotationIsOneClient(t *testing.T) {
	p := startProc(t, t.TempDir()+"/r.db", append(httpProxyArgs, "--rate-ip", "5", "--rate-agent", "0")...)
	for i := range 8 {
		e := signed(seededKey(3700+i), 1, fmt.Sprint("rotated ", i))
		st, b := httpFrom(t, fmt.Sprintf("2001:db8:37:9:%x::1", i+1), "POST", p.base+"/events", protocol.AppendJSON(nil, e))
		want := http.StatusOK
		if i >= 5 {
			want = http.StatusTooManyRequests
		}
		if st != want {
			t.Fatalf("publish %d from a fresh address of one /64: %d %s, want %d", i, st, b, want)
		}
	}
	if st, b := httpFrom(t, "2001:db8:37:a::1", "POST", p.base+"/events", protocol.AppendJSON(nil, signed(seededKey(3790), 1, "next /64"))); st != http.StatusOK {
		t.Fatalf("publish from another /64: %d %s", st, b)
	}

	var open []io.Closer
	defer func() {
		for _, c := range open {
			c.Close()
		}
	}()
	stream := func(ip string) int {
		req, _ := http.NewRequest("GET", p.base+"/stream", nil)
		req.Header.Set("X-Forwarded-For", ip)
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode == http.StatusOK {
			open = append(open, resp.Body)
		} else {
			resp.Body.Close()
		}
		return resp.StatusCode
	}
	for i := range 64 {
		if st := stream(fmt.Sprintf("2001:db8:37:9::%x", 0x100+i)); st != http.StatusOK {
			t.Fatalf("stream %d of a /64: %d", i, st)
		}
	}
	if st := stream("2001:db8:37:9:ffff::1"); st != http.StatusTooManyRequests {
		t.Fatalf("stream 65 of one /64: %d, want 429", st)
	}
	if st := stream("2001:db8:37:a::2"); st != http.StatusOK {
		t.Fatalf("a stream from another /64: %d", st)
	}
}

// httpAuthHeader is a D4 header with exactly the tags given (no payload
// tag unless given), signed by k now.
func httpAuthHeader(k int, tags ...[]string) string {
	e := signed(seededKey(k), protocol.KindHTTPAuth, "", tags...)
	return "ANP2 " + base64.StdEncoding.EncodeToString(protocol.AppendJSON(nil, e))
}

// TestHTTPAbuseSignedHeaders: a header signed for another relay is
// refused even when the request's Host names that relay; a header used
// twice is refused the second time; a header on a request with a body
// must bind the body (an attacker who holds a header for POST /triggers
// cannot send a trigger of their choosing with it).
func TestHTTPAbuseSignedHeaders(t *testing.T) {
	p := startProc(t, t.TempDir()+"/r.db")
	code := func(b []byte) string {
		var m struct{ Code string }
		_ = json.Unmarshal(b, &m)
		return m.Code
	}

	// Signed for another relay, sent here with that relay's Host.
	h := httpAuthHeader(1, []string{"u", "http://relay.other.example/events"}, []string{"method", "GET"})
	req, _ := http.NewRequest("GET", p.base+"/events", nil)
	req.Host = "relay.other.example"
	req.Header.Set("Authorization", h)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || code(b) != "auth_wrong_relay" {
		t.Fatalf("header for another relay: %d %s, want 401 auth_wrong_relay", resp.StatusCode, b)
	}

	// Replayed.
	h = httpAuthHeader(1, []string{"u", p.base + "/triggers"}, []string{"method", "GET"})
	if st, _, b := httpDo(t, "GET", p.base+"/triggers", nil, "Authorization", h); st != http.StatusOK {
		t.Fatalf("first use of a header: %d %s", st, b)
	}
	if st, _, b := httpDo(t, "GET", p.base+"/triggers", nil, "Authorization", h); st != http.StatusUnauthorized || code(b) != "auth_replayed" {
		t.Fatalf("replayed header: %d %s, want 401 auth_replayed", st, b)
	}

	// A body the header does not bind.
	spec := []byte(`{"match":{"kinds":[1]},"target":{"type":"webhook","url":"https://attacker.example/hook"}}`)
	h = httpAuthHeader(2, []string{"u", p.base + "/triggers"}, []string{"method", "POST"})
	if st, _, b := httpDo(t, "POST", p.base+"/triggers", spec, "Authorization", h, "Content-Type", "application/json"); st != http.StatusUnauthorized || code(b) != "auth_payload_required" {
		t.Fatalf("trigger body without a payload tag: %d %s, want 401 auth_payload_required", st, b)
	}
	list := protocol.HTTPAuth(seededKey(2), "GET", p.base+"/triggers", nil, time.Now().Unix())
	if st, _, b := httpDo(t, "GET", p.base+"/triggers", nil, "Authorization", list); st != http.StatusOK || !bytes.Contains(b, []byte(`"count":0`)) {
		t.Fatalf("the victim's triggers after the attack: %d %s, want none", st, b)
	}
}

// TestHTTPAbuseIdleConnectionsClosed: a keep-alive connection that sends
// nothing after its answer is closed after --idle-timeout (the old relay
// kept 3,000 of them open indefinitely).
func TestHTTPAbuseIdleConnectionsClosed(t *testing.T) {
	p := startProc(t, t.TempDir()+"/r.db", "--idle-timeout", "300ms")
	conn, err := net.Dial("tcp", strings.TrimPrefix(p.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// A failure must not hang the test: the client gives up long after
	// the relay should have.
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	fmt.Fprintf(conn, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Close {
		t.Fatalf("GET /health: %d (close %v), want a kept-alive 200", resp.StatusCode, resp.Close)
	}
	if _, err := br.ReadByte(); !httpClosed(err) {
		t.Fatalf("an idle keep-alive connection: %v, want it closed by the relay", err)
	}
}

// httpClosed reports whether err says the peer closed the connection (an
// orderly close, or a reset when it closed with bytes unread).
func httpClosed(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET)
}

// TestHTTPAbuseTrickledBodies: a body trickled a byte at a time to any
// route that reads one is answered 408 body_timeout once --body-timeout
// passes, and the connection is closed after the answer (the old relay
// timed out only the publish routes, and kept even those connections
// open).
func TestHTTPAbuseTrickledBodies(t *testing.T) {
	p := startProc(t, t.TempDir()+"/r.db", "--body-timeout", "500ms")
	for _, path := range []string{"/sync", "/triggers", "/a2a", "/mcp", "/gossip", "/events", "/api/events/batch"} {
		t.Run(strings.TrimPrefix(path, "/"), func(t *testing.T) {
			conn, err := net.Dial("tcp", strings.TrimPrefix(p.base, "http://"))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			conn.SetDeadline(time.Now().Add(20 * time.Second))
			fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n", path)
			stop := make(chan struct{})
			defer close(stop)
			go func() { // one byte every 50 ms until answered
				for {
					select {
					case <-stop:
						return
					case <-time.After(50 * time.Millisecond):
						if _, err := conn.Write([]byte(" ")); err != nil {
							return
						}
					}
				}
			}()
			br := bufio.NewReader(conn)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusRequestTimeout || !bytes.Contains(b, []byte(`"body_timeout"`)) {
				t.Fatalf("trickled body: %d %s, want 408 body_timeout", resp.StatusCode, b)
			}
			if _, err := br.ReadByte(); !httpClosed(err) {
				t.Fatalf("connection after the 408: %v, want closed", err)
			}
		})
	}
}

// httpLoopbackAddr returns a loopback address with a port free a moment
// ago, for a relay whose public base URL must be known before it starts.
func httpLoopbackAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
