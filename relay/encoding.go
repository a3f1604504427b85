package relay

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/klauspost/compress/zstd"
	"github.com/labstack/echo/v4"

	"github.com/anp2net/relay/protocol"
)

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
