package relay

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"
)

// TestWriteAnswerAsJSON checks that the publish answer written without
// reflection is byte for byte what c.JSON writes, headers included, and
// that ?pretty still gets c.JSON's indented form.
func TestWriteAnswerAsJSON(t *testing.T) {
	e := echo.New()
	for _, target := range []string{"/events", "/events?pretty"} {
		for _, ans := range []PublishAnswer{
			{ID: strings.Repeat("ab", 32), Accepted: true, Stored: true},
			{ID: strings.Repeat("0f", 32), Accepted: true, Duplicate: true, Stored: true},
			{ID: strings.Repeat("9", 64), Accepted: true},
		} {
			fast, slow := httptest.NewRecorder(), httptest.NewRecorder()
			if err := writeAnswer(e.NewContext(httptest.NewRequest(http.MethodPost, target, nil), fast), &ans); err != nil {
				t.Fatal(err)
			}
			if err := e.NewContext(httptest.NewRequest(http.MethodPost, target, nil), slow).JSON(http.StatusOK, &ans); err != nil {
				t.Fatal(err)
			}
			if fast.Code != slow.Code || fast.Body.String() != slow.Body.String() || fast.Header().Get("Content-Type") != slow.Header().Get("Content-Type") {
				t.Fatalf("%s %+v: wrote %d %q %q, c.JSON %d %q %q", target, ans, fast.Code, fast.Header().Get("Content-Type"), fast.Body,
					slow.Code, slow.Header().Get("Content-Type"), slow.Body)
			}
		}
	}
}

// TestReadBody checks the Content-Length-sized read against io.ReadAll:
// declared and actual lengths equal, a body longer than declared, one
// shorter (an error), and none declared.
func TestReadBody(t *testing.T) {
	body := []byte(`{"kind":1,"content":"` + strings.Repeat("x", 3000) + `"}`)
	for _, tc := range []struct {
		name     string
		declared int64
		wantErr  bool
	}{
		{"exact", int64(len(body)), false},
		{"longer than declared", 10, false},
		{"shorter than declared", int64(len(body)) + 5, true},
		{"undeclared", -1, false},
	} {
		r := httptest.NewRequest(http.MethodPost, "/events", io.NopCloser(bytes.NewReader(body)))
		r.ContentLength = tc.declared
		got, err := readBody(r)
		if tc.wantErr {
			if err == nil {
				t.Fatalf("%s: no error", tc.name)
			}
			continue
		}
		if err != nil || !bytes.Equal(got, body) {
			t.Fatalf("%s: read %d bytes (%v), want %d", tc.name, len(got), err, len(body))
		}
	}
}
