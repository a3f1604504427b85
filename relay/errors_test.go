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
