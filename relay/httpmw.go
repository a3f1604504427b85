package relay

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"

	"github.com/anp2net/relay/protocol"
	"github.com/klauspost/compress/zstd"
	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
)

// cors lets browser clients call every route: any origin, no credentials
// (reads are public and the D4 Authorization header is a signed event, not
// a cookie), preflights for POST, PATCH and DELETE with Content-Type and
// Authorization, and the relay's own response headers readable by
// scripts.
func cors() echo.MiddlewareFunc {
	return middleware.CORSWithConfig(middleware.CORSConfig{
		AllowOrigins: []string{"*"},
		AllowMethods: []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPatch, http.MethodDelete, http.MethodOptions},
		AllowHeaders: []string{echo.HeaderContentType, echo.HeaderAuthorization, echo.HeaderAccept,
			"Last-Event-ID", echo.HeaderAcceptEncoding, echo.HeaderContentEncoding},
		ExposeHeaders: []string{echo.HeaderRetryAfter, "X-ANP2-Through-Seq", "X-ANP2-Hidden-Count",
			"X-ANP2-Hidden-Included", "X-ANP2-Hidden-Omitted", "X-ANP2-Restricted"},
		MaxAge: 86400,
	})
}

// readBodies reads the body of every request that has one, on every
// route, before its handler runs, within the body timeout
// (Config.BodyTimeout): a body still incomplete then is a 408
// body_timeout and the connection is closed after the answer; one over
// the body limit is a 413 body_too_large. The handler reads the same
// bytes again from Request().Body (or, in the core, takes them without a
// copy: readBodyWithin). A body sent with Content-Encoding gzip or zstd
// is decoded here, its decoded size capped by the same body limit
// (bodyDecoder). A protocol upgrade (GET /ws) has no body to wait
// for.
func (s *Server) readBodies() echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			r := c.Request()
			if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 || r.Header.Get("Upgrade") != "" {
				return next(c)
			}
			body, err := readBodyWithin(c, s.cfg.BodyTimeout)
			if err != nil {
				return err
			}
			if body, err = s.bodies.decodeRequestBody(c, body); err != nil {
				return err
			}
			r.Body = newWholeBody(body)
			r.ContentLength = int64(len(body))
			return next(c)
		}
	}
}

// wholeBody is a request body readBodies read whole: the handler reads it
// again, or takes all of it at once (bodyRead).
type wholeBody struct {
	bytes.Reader
	all []byte
}

func newWholeBody(b []byte) *wholeBody {
	w := &wholeBody{all: b}
	w.Reset(b)
	return w
}

func (*wholeBody) Close() error { return nil }

// bodyRead returns the body readBodies read for r, if it did.
func bodyRead(r *http.Request) ([]byte, bool) {
	if b, ok := r.Body.(*wholeBody); ok {
		return b.all, true
	}
	return nil, false
}

// chain returns the middlewares mws (outermost first) as one middleware,
// applied once here rather than on every request: Echo wraps the handler
// of each request in every middleware given to Use anew (a closure apiece,
// CORS's a few hundred bytes). The chain ends in the handler Echo's router
// chose for the request, c.Handler() (a route's, or the 404, 405 and
// OPTIONS handlers), which is the handler Echo passes a middleware given
// to Use. So it must be the last (here the only) middleware given to Use:
// one given after it would never run. The middlewares must keep no
// per-handler state (Echo's Recover, CORS and BodyLimit, and compress,
// keep none).
func chain(mws ...echo.MiddlewareFunc) echo.MiddlewareFunc {
	h := func(c echo.Context) error { return c.Handler()(c) }
	for i := len(mws) - 1; i >= 0; i-- {
		h = mws[i](h)
	}
	return func(echo.HandlerFunc) echo.HandlerFunc { return h }
}

// compressMinLength is the smallest answer worth compressing: below it the
// gzip framing costs more than it saves.
const compressMinLength = 1024

// compress compresses answers for clients that accept it (transport
// compression, seed §9.1 tier 1): zstd for `Accept-Encoding: zstd`, else
// gzip for `gzip`; /export and /stream included: the writer flushes
// through the compressor, so streamed events are not held back. The
// fastest level of each: on JSON it keeps most of the saving of the
// default level at a fraction of the CPU, which matters when a mirror
// reads a whole export. zstd uses a 256 KiB window, so a long-lived
// stream holds a small encoder. A protocol upgrade (GET /ws) is skipped:
// the writer would hold back its 101 answer.
//
// Its gzip answers are exactly Echo's middleware.Gzip with MinLength (the
// same headers and bytes), but it takes a compressor only once an answer
// proves long enough to compress: Echo's resets one for every request
// that accepts gzip and closes it into io.Discard after a short answer,
// which cost every publish a few microseconds.
func compress() echo.MiddlewareFunc {
	gzpool := sync.Pool{New: func() any {
		w, _ := gzip.NewWriterLevel(io.Discard, gzip.BestSpeed)
		return w
	}}
	zstdpool := sync.Pool{New: func() any {
		w, _ := zstd.NewWriter(io.Discard, zstd.WithEncoderLevel(zstd.SpeedFastest),
			zstd.WithEncoderConcurrency(1), zstd.WithWindowSize(zstdAnswerWindow), zstd.WithLowerEncoderMem(true))
		return w
	}}
	bpool := sync.Pool{New: func() any { return new(bytes.Buffer) }}
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			req := c.Request()
			if req.Header.Get("Upgrade") != "" {
				return next(c)
			}
			res := c.Response()
			res.Header().Add(echo.HeaderVary, echo.HeaderAcceptEncoding)
			enc := answerEncoding(req.Header.Get(echo.HeaderAcceptEncoding))
			if enc == "" {
				return next(c)
			}
			pool := &gzpool
			if enc == "zstd" {
				pool = &zstdpool
			}
			buf := bpool.Get().(*bytes.Buffer)
			buf.Reset()
			rw := res.Writer
			gw := &gzipWriter{ResponseWriter: rw, pool: pool, encoding: enc, buffer: buf}
			defer func() {
				gw.finish(res, rw)
				bpool.Put(buf)
			}()
			res.Writer = gw
			return next(c)
		}
	}
}

// zstdAnswerWindow is the zstd window of compressed answers.
const zstdAnswerWindow = 256 << 10

// answerEncoding returns the content coding to answer with for the
// Accept-Encoding header value ae: "zstd" when it accepts zstd, else
// "gzip" when it accepts gzip, else "" (identity). A coding listed with
// q=0 is refused, as RFC 9110 §12.5.3 says; other weights are not ranked
// (zstd is preferred whenever both are accepted).
func answerEncoding(ae string) string {
	if ae == "" {
		return ""
	}
	gz, zs := false, false
	for part := range strings.SplitSeq(ae, ",") {
		name, params, _ := strings.Cut(part, ";")
		name = strings.ToLower(strings.TrimSpace(name))
		if name != "gzip" && name != "zstd" && name != "x-gzip" {
			continue
		}
		if refusedQ(params) {
			continue
		}
		if name == "zstd" {
			zs = true
		} else {
			gz = true
		}
	}
	switch {
	case zs:
		return "zstd"
	case gz:
		return "gzip"
	}
	return ""
}

// refusedQ reports whether the parameters of one Accept-Encoding element
// give it weight q=0.
func refusedQ(params string) bool {
	for p := range strings.SplitSeq(params, ";") {
		k, v, ok := strings.Cut(strings.TrimSpace(p), "=")
		if !ok || !strings.EqualFold(strings.TrimSpace(k), "q") {
			continue
		}
		v = strings.TrimRight(strings.TrimSpace(v), "0")
		return v == "" || v == "." || v == "0."
	}
	return false
}

// encoder is what compress needs of a compressor: *gzip.Writer and
// *zstd.Encoder both are one.
type encoder interface {
	io.Writer
	Flush() error
	Close() error
	Reset(io.Writer)
}

// gzipWriter is compress's response writer (gzip or zstd): it holds an answer back until
// it reaches compressMinLength bytes (or is flushed), then compresses it
// and what follows; a shorter answer goes out as it is.
type gzipWriter struct {
	http.ResponseWriter
	pool              *sync.Pool // of encoders of this encoding
	encoding          string     // "gzip" or "zstd"
	zw                encoder    // nil until the answer is compressed
	buffer            *bytes.Buffer
	code              int
	wroteHeader       bool
	wroteBody         bool
	minLengthExceeded bool
}

// gz returns the compressor, taking one writing to the client first.
func (w *gzipWriter) gz() encoder {
	if w.zw == nil {
		w.zw = w.pool.Get().(encoder)
		w.zw.Reset(w.ResponseWriter)
	}
	return w.zw
}

func (w *gzipWriter) WriteHeader(code int) {
	w.Header().Del(echo.HeaderContentLength)
	w.wroteHeader = true
	w.code = code
}

func (w *gzipWriter) Write(b []byte) (int, error) {
	if w.Header().Get(echo.HeaderContentType) == "" {
		w.Header().Set(echo.HeaderContentType, http.DetectContentType(b))
	}
	w.wroteBody = true
	if w.minLengthExceeded {
		return w.gz().Write(b)
	}
	n, err := w.buffer.Write(b)
	if w.buffer.Len() < compressMinLength {
		return n, err
	}
	w.startCompressing()
	return w.gz().Write(w.buffer.Bytes())
}

// startCompressing marks the answer as compressed and sends its header.
func (w *gzipWriter) startCompressing() {
	w.minLengthExceeded = true
	w.Header().Set(echo.HeaderContentEncoding, w.encoding)
	if w.wroteHeader {
		w.ResponseWriter.WriteHeader(w.code)
	}
}

// Flush compresses from now on (more may come), and sends what is held.
func (w *gzipWriter) Flush() {
	if !w.minLengthExceeded {
		w.startCompressing()
		w.gz().Write(w.buffer.Bytes())
	}
	w.gz().Flush()
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

func (w *gzipWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// uncompressed is for a handler about to write, as its whole answer,
// fewer than compressMinLength bytes: compress would only hold them back
// and then send them as they are, so they go straight to the client (the
// same headers and bytes, without the copy). Call it before writing.
func uncompressed(c echo.Context) {
	res := c.Response()
	if w, ok := res.Writer.(*gzipWriter); ok && !w.wroteHeader && !w.wroteBody {
		res.Writer = w.ResponseWriter
	}
}

func (w *gzipWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return http.NewResponseController(w.ResponseWriter).Hijack()
}

func (w *gzipWriter) Push(target string, opts *http.PushOptions) error {
	if p, ok := w.ResponseWriter.(http.Pusher); ok {
		return p.Push(target, opts)
	}
	return http.ErrNotSupported
}

// finish ends the answer once the handler returned: an answer without a
// body gets its status only, a short one goes out uncompressed, a
// compressed one gets its gzip trailer.
func (w *gzipWriter) finish(res *echo.Response, rw http.ResponseWriter) {
	switch {
	case !w.wroteBody:
		if res.Header().Get(echo.HeaderContentEncoding) == w.encoding {
			res.Header().Del(echo.HeaderContentEncoding)
		}
		if w.wroteHeader {
			rw.WriteHeader(w.code)
		}
		res.Writer = rw
		if w.zw != nil {
			w.zw.Reset(io.Discard)
		}
	case !w.minLengthExceeded:
		res.Writer = rw
		if w.wroteHeader {
			rw.WriteHeader(w.code)
		}
		w.buffer.WriteTo(rw)
	}
	if w.zw != nil {
		w.zw.Close()
		w.zw.Reset(io.Discard)
		w.pool.Put(w.zw)
		w.zw = nil
	}
}

// CodeUnsupportedEncoding is the 415 of a request body in a
// Content-Encoding the relay does not decode.
const CodeUnsupportedEncoding = "unsupported_content_encoding"

// noLimitDecoded caps a decoded request body when the relay has no body
// limit (Config.MaxBody ≤ 0): a compressed body is never allowed to
// expand without bound.
const noLimitDecoded = 16 << 20

// zstdMaxWindow is the largest zstd window a request body may declare:
// RFC 8878 §3.1.1.1.2 asks decoders to support 8 MiB, and no compressor
// needs more for a body the relay would take.
const zstdMaxWindow = 8 << 20

// bodyDecoder decodes gzip- and zstd-encoded request bodies
// (Content-Encoding) into at most limit bytes: a decompression bomb is
// stopped at the limit, never expanded in full.
type bodyDecoder struct {
	limit int64
	zd    *zstd.Decoder // DecodeAll only: safe for concurrent use
}

// newBodyDecoder returns a decoder for bodies of at most maxBody decoded
// bytes (noLimitDecoded when maxBody ≤ 0).
func newBodyDecoder(maxBody int64) (*bodyDecoder, error) {
	limit := maxBody
	if limit <= 0 {
		limit = noLimitDecoded
	}
	// DecodeAll holds the whole output, so the output cap bounds the
	// decoder's memory; MaxMemory makes the library itself refuse a frame
	// that declares, or decodes to, more than the limit.
	zd, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(2),
		zstd.WithDecoderMaxMemory(uint64(limit)), zstd.WithDecoderMaxWindow(zstdMaxWindow))
	if err != nil {
		return nil, fmt.Errorf("zstd decoder: %w", err)
	}
	return &bodyDecoder{limit: limit, zd: zd}, nil
}

// decode returns body decoded per the Content-Encoding header value ce:
// unchanged for none or identity, decoded for gzip (x-gzip) and zstd.
// It fails with 415 unsupported_content_encoding for another encoding or
// a list of several, 413 body_too_large when the decoded body would pass
// the limit, and 400 invalid_parameter for a body that does not decode.
func (d *bodyDecoder) decode(ce string, body []byte) ([]byte, error) {
	switch strings.ToLower(strings.TrimSpace(ce)) {
	case "", "identity":
		return body, nil
	case "gzip", "x-gzip":
		return d.gunzip(body)
	case "zstd":
		return d.unzstd(body)
	}
	return nil, protocol.Errorf(CodeUnsupportedEncoding,
		"Content-Encoding %q is not supported: send identity, gzip or zstd", ce)
}

func (d *bodyDecoder) gunzip(body []byte) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(body))
	if err != nil {
		return nil, protocol.Errorf(CodeBadParameter, "cannot decode gzip body: %v", err)
	}
	out, err := io.ReadAll(io.LimitReader(zr, d.limit+1))
	if err != nil {
		return nil, protocol.Errorf(CodeBadParameter, "cannot decode gzip body: %v", err)
	}
	if int64(len(out)) > d.limit {
		return nil, d.tooLarge()
	}
	return out, nil
}

func (d *bodyDecoder) unzstd(body []byte) ([]byte, error) {
	out, err := d.zd.DecodeAll(body, nil)
	switch {
	case errors.Is(err, zstd.ErrDecoderSizeExceeded):
		return nil, d.tooLarge()
	case err != nil:
		return nil, protocol.Errorf(CodeBadParameter, "cannot decode zstd body: %v", err)
	case int64(len(out)) > d.limit: // belt and braces: the library checks per block
		return nil, d.tooLarge()
	}
	return out, nil
}

func (d *bodyDecoder) tooLarge() error {
	return protocol.Errorf(CodeBodyTooLarge, "request body too large once decoded (limit %d bytes)", d.limit)
}

// decodeRequestBody replaces r's encoded body (already read whole, as
// body) by its decoded bytes, and drops the Content-Encoding header so
// that handlers, and the D4 payload hash (§3.3), see the bytes the
// client encoded.
func (d *bodyDecoder) decodeRequestBody(c echo.Context, body []byte) ([]byte, error) {
	r := c.Request()
	ce := r.Header.Get(echo.HeaderContentEncoding)
	if ce == "" {
		return body, nil
	}
	out, err := d.decode(ce, body)
	if err != nil {
		return nil, err
	}
	r.Header.Del(echo.HeaderContentEncoding)
	return out, nil
}
