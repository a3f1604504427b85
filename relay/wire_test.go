package relay

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/sqlite"
	"github.com/labstack/echo/v4"
)

// TestPublishAnswerOnTheWire sends POST /events over a raw connection and
// checks the whole answer as the client reads it (status line, every
// header but Date, body) for a new event, a duplicate and a rejection,
// with and without gzip accepted and a browser Origin: the publish path's
// shortcuts must write exactly what Echo and the middlewares write.
func TestPublishAnswerOnTheWire(t *testing.T) {
	r := startRelay(t)
	host := strings.TrimPrefix(r.URL, "http://")
	k := key(3)
	now := r.clock.now().Unix()
	n := 0
	for _, enc := range []string{"", "gzip, deflate"} {
		for _, origin := range []string{"", "https://app.example"} {
			n++
			e := mk(k, now, 1, fmt.Sprint("wire ", n))
			body := protocol.AppendJSON(nil, e)
			bad := bytes.Replace(body, []byte(`"content":"wire`), []byte(`"content":"WIRE`), 1)
			cors := ""
			if origin != "" {
				cors = "Access-Control-Allow-Origin: *\r\nAccess-Control-Expose-Headers: Retry-After,X-ANP2-Through-Seq,X-ANP2-Hidden-Count,X-ANP2-Hidden-Included,X-ANP2-Hidden-Omitted,X-ANP2-Restricted\r\n"
			}
			ok := fmt.Sprintf(`{"id":%q,"accepted":true,"duplicate":%%v,"stored":true}`+"\n", e.ID)
			for _, tc := range []struct {
				name, body, status, answer string
			}{
				// The fresh log's n-th event is its leaf n-1 (SPEC §21).
				{"new", string(body), "200 OK", strings.Replace(fmt.Sprintf(ok, false), "}", fmt.Sprintf(`,"leaf_index":%d}`, n-1), 1)},
				{"duplicate", string(body), "200 OK", fmt.Sprintf(ok, true)},
				{"id mismatch", string(bad), "400 Bad Request", ""},
			} {
				got := rawPost(t, host, "/events", tc.body, enc, origin)
				gotHead, gotBody, _ := strings.Cut(got, "\r\n\r\n")
				if tc.answer == "" {
					tc.answer = gotBody // checked below for its code
					if !strings.Contains(gotBody, `"code":"id_mismatch"`) {
						t.Errorf("%s: body %q", tc.name, gotBody)
					}
				}
				want := "HTTP/1.1 " + tc.status + "\r\n" + cors +
					"Content-Length: " + strconv.Itoa(len(tc.answer)) + "\r\n" +
					"Content-Type: application/json\r\n" +
					"Vary: Origin\r\nVary: Accept-Encoding"
				if gotHead != want || gotBody != tc.answer {
					t.Errorf("%s, Accept-Encoding %q, Origin %q:\ngot\n%s\n\n%s\nwant\n%s\n\n%s", tc.name, enc, origin, gotHead, gotBody, want, tc.answer)
				}
			}
		}
	}
}

// rawPost sends one POST over a new connection and returns the answer
// as read: status line, headers sorted by name (each name's values in
// their order) without Date, body.
func rawPost(t *testing.T, host, path, body, enc, origin string) string {
	t.Helper()
	nc, err := net.Dial("tcp", host)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	req := "POST " + path + " HTTP/1.1\r\nHost: " + host + "\r\nContent-Type: application/json\r\n"
	if enc != "" {
		req += "Accept-Encoding: " + enc + "\r\n"
	}
	if origin != "" {
		req += "Origin: " + origin + "\r\n"
	}
	req += "Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
	if _, err := io.WriteString(nc, req); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(nc), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var head strings.Builder
	head.WriteString(resp.Proto + " " + resp.Status)
	resp.Header.Del("Date")
	names := make([]string, 0, len(resp.Header))
	for k := range resp.Header {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		for _, v := range resp.Header[k] {
			head.WriteString("\r\n" + k + ": " + v)
		}
	}
	return head.String() + "\r\n\r\n" + string(b)
}

// TestMiddlewareOnEveryKindOfRoute checks that the middleware chain, built
// once (chain), runs for every handler Echo's router may pick: a route, a
// 404, a 405, an OPTIONS preflight, a panicking handler (Recover) and a
// body over the limit (BodyLimit), each answering with CORS headers, and
// that a long answer is gzipped.
func TestMiddlewareOnEveryKindOfRoute(t *testing.T) {
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "relay.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	cfg := DefaultConfig()
	cfg.MaxBody = 100
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	srv, err := New(cfg, st)
	if err != nil {
		t.Fatal(err)
	}
	srv.echo.Logger.SetOutput(io.Discard) // Recover logs the panic's stack
	srv.Route(http.MethodGet, "/panics", func(echo.Context) error { panic("boom") })
	ts := newServer(t, srv)
	for _, tc := range []struct {
		method, path, body string
		status             int
		gzipped            bool
	}{
		{"GET", "/health", "", 200, false},
		{"GET", "/api/metrics", "", 200, true},
		{"GET", "/nowhere", "", 404, false},
		{"DELETE", "/events", "", 405, false},
		{"OPTIONS", "/events", "", 204, false},
		{"GET", "/panics", "", 500, false},
		{"POST", "/events", strings.Repeat("x", 200), 413, false},
	} {
		req, _ := http.NewRequest(tc.method, ts.URL+tc.path, strings.NewReader(tc.body))
		req.Header.Set("Origin", "https://app.example")
		req.Header.Set("Accept-Encoding", "gzip")
		if tc.method == "OPTIONS" {
			req.Header.Set("Access-Control-Request-Method", "POST")
		}
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		h := resp.Header
		if resp.StatusCode != tc.status || h.Get("Access-Control-Allow-Origin") != "*" ||
			(h.Get("Content-Encoding") == "gzip") != tc.gzipped || !strings.Contains(strings.Join(h.Values("Vary"), ","), "Origin") {
			t.Errorf("%s %s: %d %v", tc.method, tc.path, resp.StatusCode, h)
		}
		if tc.method == "OPTIONS" && !strings.Contains(h.Get("Access-Control-Allow-Methods"), "POST") {
			t.Errorf("preflight: %v", h)
		}
	}
}
