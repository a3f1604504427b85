package relay

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"sync"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/httpx"
	"github.com/anp2net/relay/relay/sqlite"
	"github.com/labstack/echo/v4"
)

// Relay-level error codes (protocol codes come from package protocol).
const (
	CodeRateLimited     = "rate_limited"
	CodeNotFound        = "not_found"
	CodeRevoked         = "revoked"
	CodeRevokeNotOwner  = "revoke_not_owner"
	CodeBadParameter    = httpx.CodeBadParameter
	CodeUnknownParam    = httpx.CodeUnknownParam
	CodeBodyTooLarge    = "body_too_large"
	CodeBodyTimeout     = "body_timeout"
	CodeUnsupportedType = "unsupported_media_type"
	CodeMethod          = "method_not_allowed"
	CodeUnavailable     = "unavailable"
	CodeUnauthorized    = "unauthorized"
	CodeNotMirrored     = "kind_11_not_mirrored"
	CodeStorageFull     = "storage_full"
)

// storageFullRetry is the Retry-After (seconds) of a 507 storage_full:
// space comes back when an operator acts, not in a second.
const storageFullRetry = 60

// statusOf maps a stable code to its HTTP status; anything not listed is a 400.
var statusOf = map[string]int{
	CodeRateLimited:         http.StatusTooManyRequests,
	CodeNotFound:            http.StatusNotFound,
	CodeRevoked:             http.StatusNotFound,
	CodeBodyTooLarge:        http.StatusRequestEntityTooLarge,
	CodeBodyTimeout:         http.StatusRequestTimeout,
	CodeUnsupportedType:     http.StatusUnsupportedMediaType,
	CodeUnsupportedEncoding: http.StatusUnsupportedMediaType,
	CodeMethod:              http.StatusMethodNotAllowed,
	CodeUnavailable:         http.StatusServiceUnavailable,
	CodeUnauthorized:        http.StatusUnauthorized,
	CodeAuthWrongRelay:      http.StatusUnauthorized,
	CodeAuthPayloadRequired: http.StatusUnauthorized,
	CodeAuthReplayed:        http.StatusUnauthorized,
	CodeAuthBusy:            http.StatusServiceUnavailable,
	CodeHidden:              http.StatusForbidden,
	CodeStorageFull:         http.StatusInsufficientStorage,
	CodeForbidden:           http.StatusForbidden,
	CodeWithheld:            http.StatusUnavailableForLegalReasons,
}

// statusMu guards statusOf against modules registering codes while other
// relays (in tests) answer.
var statusMu sync.RWMutex

// CodeForbidden is a generic 403: an authenticated reader asked for what
// is not theirs.
const CodeForbidden = "forbidden"

// RegisterStatus maps a module's stable error code to an HTTP status (a
// code not registered is a 400). Modules call it from Mount.
func RegisterStatus(code string, status int) {
	statusMu.Lock()
	statusOf[code] = status
	statusMu.Unlock()
}

// retryError is a 429/503 that tells the client when to come back.
type retryError struct {
	err   *protocol.Error
	after int
}

func (e *retryError) Error() string { return e.err.Detail }
func (e *retryError) Unwrap() error { return e.err }

// errorHandler is the relay's single mapping from errors to HTTP answers:
// {"detail","code"} bodies, 422 with per-field details, and a logged,
// opaque 500 for anything unexpected.
func errorHandler(log *slog.Logger, m *metrics) echo.HTTPErrorHandler {
	return func(err error, c echo.Context) {
		if c.Response().Committed {
			return
		}
		var env *protocol.EnvelopeError
		var pe *protocol.Error
		var re *retryError
		var hre *httpx.RetryError
		var he *echo.HTTPError
		switch {
		case errors.As(err, &env):
			m.rejected("malformed_envelope")
			_ = c.JSON(http.StatusUnprocessableEntity, map[string]any{"detail": env.Fields})
		case errors.As(err, &re):
			c.Response().Header().Set("Retry-After", strconv.Itoa(re.after))
			writeCoded(c, re.err)
		case errors.As(err, &hre):
			c.Response().Header().Set("Retry-After", strconv.Itoa(hre.After))
			if hre.Status != 0 {
				_ = c.JSON(hre.Status, map[string]string{"detail": hre.Err.Detail, "code": hre.Err.Code})
			} else {
				writeCoded(c, hre.Err)
			}
		case errors.As(err, &pe):
			writeCoded(c, pe)
		case errors.Is(err, sqlite.ErrFull):
			storageFull(log, m, err, c)
		case errors.As(err, &he):
			writeCoded(c, httpErrorCode(he))
		case errors.Is(err, context.Canceled) && c.Request().Context().Err() != nil:
			// The client went away before its answer: nothing broke, and
			// there is no one to answer.
			log.Debug("client went away", "err", err, "method", c.Request().Method, "path", c.Request().URL.Path)
		default:
			log.Error("internal error", "err", err, "method", c.Request().Method, "path", c.Request().URL.Path)
			_ = c.JSON(http.StatusInternalServerError, map[string]string{"detail": "internal error", "code": "internal"})
		}
	}
}

// storageFull answers a write refused for want of disk space: 507
// storage_full with Retry-After, counted among rejections. It is logged
// once per episode (an episode ends at the next successful commit), not
// once per request; reads go on being served meanwhile.
func storageFull(log *slog.Logger, m *metrics, err error, c echo.Context) {
	m.rejected(CodeStorageFull)
	var fe *sqlite.FullError
	if errors.As(err, &fe) && fe.First {
		log.Error("storage full: refusing writes with 507 until a commit succeeds again", "err", err)
	}
	c.Response().Header().Set("Retry-After", strconv.Itoa(storageFullRetry))
	writeCoded(c, protocol.Errorf(CodeStorageFull, "the relay's storage is full; nothing was stored, try again later"))
}

func writeCoded(c echo.Context, pe *protocol.Error) {
	statusMu.RLock()
	status, ok := statusOf[pe.Code]
	statusMu.RUnlock()
	if !ok {
		status = http.StatusBadRequest
	}
	_ = c.JSON(status, map[string]string{"detail": pe.Detail, "code": pe.Code})
}

func httpErrorCode(he *echo.HTTPError) *protocol.Error {
	msg := http.StatusText(he.Code)
	switch he.Code {
	case http.StatusNotFound:
		return protocol.Errorf(CodeNotFound, "no such route")
	case http.StatusMethodNotAllowed:
		return protocol.Errorf(CodeMethod, "method not allowed")
	case http.StatusRequestEntityTooLarge:
		return protocol.Errorf(CodeBodyTooLarge, "request body too large")
	case http.StatusUnsupportedMediaType:
		return protocol.Errorf(CodeUnsupportedType, "unsupported media type")
	}
	if he.Code >= 500 {
		return protocol.Errorf(CodeUnavailable, "%s", msg)
	}
	return protocol.Errorf("http_"+strconv.Itoa(he.Code), "%s", msg)
}
