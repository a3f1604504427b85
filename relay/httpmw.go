package relay

import (
	"compress/gzip"
	"net/http"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
)

// cors lets browser clients call every route: any origin, no credentials
// (reads are public and the D4 Authorization header is a signed event, not
// a cookie), preflights for POST with Content-Type and Authorization, and
// the relay's own response headers readable by scripts.
func cors() echo.MiddlewareFunc {
	return middleware.CORSWithConfig(middleware.CORSConfig{
		AllowOrigins: []string{"*"},
		AllowMethods: []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodOptions},
		AllowHeaders: []string{echo.HeaderContentType, echo.HeaderAuthorization, echo.HeaderAccept,
			"Last-Event-ID", echo.HeaderAcceptEncoding},
		ExposeHeaders: []string{echo.HeaderRetryAfter, "X-ANP2-Through-Seq", "X-ANP2-Hidden-Count",
			"X-ANP2-Hidden-Included", "X-ANP2-Hidden-Omitted", "X-ANP2-Restricted"},
		MaxAge: 86400,
	})
}

// compressMinLength is the smallest answer worth compressing: below it the
// gzip framing costs more than it saves.
const compressMinLength = 1024

// compress gzips answers for clients that accept it (transport compression,
// seed §9.1 tier 1), /export and /stream included: the writer flushes
// through the compressor, so streamed events are not held back. Level 1
// (fastest): on JSON it keeps most of the saving of the default level at a
// fraction of the CPU, which matters when a mirror reads a whole export.
// A protocol upgrade (GET /ws) is skipped: the gzip writer would hold
// back its 101 answer.
func compress() echo.MiddlewareFunc {
	return middleware.GzipWithConfig(middleware.GzipConfig{Level: gzip.BestSpeed, MinLength: compressMinLength,
		Skipper: func(c echo.Context) bool { return c.Request().Header.Get("Upgrade") != "" }})
}
