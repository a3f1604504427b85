package a2a_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/anp2net/relay/a2a"
	"github.com/labstack/echo/v4"
)

// FuzzRPC: whatever the body, the endpoint answers HTTP 200 (or 204 for
// notifications only) with well-formed JSON-RPC 2.0 responses, never a
// 500 or a panic.
func FuzzRPC(f *testing.F) {
	for _, s := range []string{
		``, `{}`, `[]`, `[1]`, `null`, `{"jsonrpc":"2.0","id":1,"method":"agent/getCard"}`,
		`{"jsonrpc":"2.0","id":"a","method":"message/send","params":{"message":{"role":"user","messageId":"m","parts":[{"kind":"text","text":"join"}]}}}`,
		`{"jsonrpc":"2.0","id":2,"method":"message/stream","params":{"message":{"role":"user","messageId":"m","parts":[{"kind":"text","text":"hi"}]}}}`,
		`{"jsonrpc":"2.0","id":3,"method":"tasks/list","params":{"limit":5,"page_token":"YW5wMi50YXNrcy5vZmZzZXQuNQ"}}`,
		`[{"jsonrpc":"2.0","method":"x"},{"jsonrpc":"2.0","id":null,"method":"tasks/get","params":{"id":"q"}}]`,
		`{"jsonrpc":"2.0","id":4,"method":"tasks/resubscribe","params":{"id":"x"}}`,
		`{"jsonrpc":"2.0","id":5,"method":"tasks/list","params":{"branch":"main","metadata":{"branch":7}}}`,
		`{"jsonrpc":"2.0","id":6,"method":"tasks/get","params":{"id":"q","branch":"b-0123abcd","metadata":{"branch":"all"}}}`,
	} {
		f.Add([]byte(s))
	}
	e := echo.New()
	a2a.New(a2a.Options{Logger: quiet, MaxTasks: 8}).Mount(func(method, path string, h echo.HandlerFunc) { e.Add(method, path, h) })
	f.Fuzz(func(t *testing.T, body []byte) {
		req := httptest.NewRequest(http.MethodPost, "/a2a", bytes.NewReader(body))
		req.Header.Set("Accept", "text/event-stream")
		rec := httptest.NewRecorder()
		done := make(chan struct{})
		go func() { e.ServeHTTP(rec, req); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatalf("no answer within 5 s for %q", body)
		}
		switch rec.Code {
		case http.StatusNoContent:
			if rec.Body.Len() != 0 {
				t.Fatalf("204 with a body: %q", rec.Body)
			}
			return
		case http.StatusOK:
		default:
			t.Fatalf("HTTP %d for %q", rec.Code, body)
		}
		if rec.Header().Get("Content-Type") == "text/event-stream" {
			for _, line := range strings.Split(rec.Body.String(), "\n") {
				if d, ok := strings.CutPrefix(line, "data: "); ok {
					checkResponse(t, []byte(d))
				}
			}
			return
		}
		out := bytes.TrimSpace(rec.Body.Bytes())
		if len(out) > 0 && out[0] == '[' {
			var items []json.RawMessage
			if err := json.Unmarshal(out, &items); err != nil || len(items) == 0 {
				t.Fatalf("bad batch answer %s", out)
			}
			for _, it := range items {
				checkResponse(t, it)
			}
			return
		}
		checkResponse(t, out)
	})
}

func checkResponse(t *testing.T, b []byte) {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("not an object: %s", b)
	}
	_, hasResult := m["result"]
	_, hasError := m["error"]
	_, hasID := m["id"]
	if string(m["jsonrpc"]) != `"2.0"` || hasResult == hasError || !hasID {
		t.Fatalf("malformed response %s", b)
	}
	if hasError {
		var e a2a.Error
		if err := json.Unmarshal(m["error"], &e); err != nil || e.Code == 0 || e.Message == "" {
			t.Fatalf("malformed error %s", m["error"])
		}
	}
}
