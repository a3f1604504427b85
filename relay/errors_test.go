package relay

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/anp2net/relay/relay/sqlite"
	"github.com/labstack/echo/v4"
)

// TestErrorHandlerClientGone: an error that is the request's own
// cancellation (the client hung up) is not logged as an internal error
// and gets no answer; any other error, a cancellation of something else
// included, is a logged 500.
func TestErrorHandlerClientGone(t *testing.T) {
	var logs bytes.Buffer
	h := errorHandler(slog.New(slog.NewTextHandler(&logs, nil)), newMetrics())
	e := echo.New()
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	for _, c := range []struct {
		name   string
		ctx    context.Context
		err    error
		status int
		logged bool
	}{
		{"client gone", gone, fmt.Errorf("stats: %w", context.Canceled), 200, false},
		{"canceled, client still there", context.Background(), fmt.Errorf("stats: %w", context.Canceled), 500, true},
		{"other error, client gone", gone, errors.New("disk on fire"), 500, true},
	} {
		logs.Reset()
		rec := httptest.NewRecorder()
		h(c.err, e.NewContext(httptest.NewRequest("GET", "/health", nil).WithContext(c.ctx), rec))
		if rec.Code != c.status || strings.Contains(logs.String(), "internal error") != c.logged {
			t.Errorf("%s: status %d (want %d), log %q", c.name, rec.Code, c.status, logs.String())
		}
	}
}

// TestErrorHandlerStorageFull: a write refused for want of space is a 507
// storage_full with Retry-After, counted in /metrics under its code, and
// logged only for the first refusal of an episode.
func TestErrorHandlerStorageFull(t *testing.T) {
	var logs bytes.Buffer
	m := newMetrics()
	h := errorHandler(slog.New(slog.NewTextHandler(&logs, nil)), m)
	e := echo.New()
	for i, first := range []bool{true, false, false} {
		err := fmt.Errorf("append: %w", &sqlite.FullError{Err: errors.New("database or disk is full (13)"), First: first})
		rec := httptest.NewRecorder()
		h(err, e.NewContext(httptest.NewRequest("POST", "/events", nil), rec))
		if rec.Code != 507 || rec.Header().Get("Retry-After") == "" || !strings.Contains(rec.Body.String(), `"storage_full"`) {
			t.Fatalf("refusal %d: %d, Retry-After %q, %s", i, rec.Code, rec.Header().Get("Retry-After"), rec.Body)
		}
	}
	if n := strings.Count(logs.String(), "level=ERROR"); n != 1 {
		t.Fatalf("logged %d times in one episode, want once:\n%s", n, logs.String())
	}
	var out bytes.Buffer
	m.write(&out, 0, 0)
	if !strings.Contains(out.String(), `anp2_events_rejected_total{code="storage_full"} 3`) {
		t.Fatalf("metrics:\n%s", out.String())
	}
}
