package relay

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
)

// TestCompressAnswersAsEchoGzip: the relay's compression middleware sends
// the very headers and bytes Echo's middleware.Gzip (same level, same
// MinLength) sends, for short, long, empty, flushed, streamed and failed
// answers, with and without Accept-Encoding: gzip; one suite drives both
// over real loopback HTTP.
func TestCompressAnswersAsEchoGzip(t *testing.T) {
	long := strings.Repeat(`{"id":"0123456789abcdef","accepted":true}`, 60)
	handlers := map[string]echo.HandlerFunc{
		"/short": func(c echo.Context) error { return c.String(http.StatusOK, "short answer") },
		"/json":  func(c echo.Context) error { return c.JSON(http.StatusOK, map[string]string{"a": long}) },
		"/exactly": func(c echo.Context) error {
			return c.Blob(http.StatusOK, "text/plain", []byte(long[:compressMinLength]))
		},
		"/below": func(c echo.Context) error { return c.Blob(http.StatusOK, "", []byte(long[:compressMinLength-1])) },
		"/none":  func(c echo.Context) error { return c.NoContent(http.StatusNoContent) },
		"/error": func(c echo.Context) error { return echo.NewHTTPError(http.StatusTeapot, "no") },
		"/pieces": func(c echo.Context) error {
			c.Response().WriteHeader(http.StatusCreated)
			for i := 0; i < 40; i++ {
				c.Response().Write([]byte(long[:100]))
			}
			return nil
		},
		"/flushed": func(c echo.Context) error {
			c.Response().Header().Set(echo.HeaderContentType, "text/event-stream")
			c.Response().WriteHeader(http.StatusOK)
			for i := 0; i < 3; i++ {
				c.Response().Write([]byte("data: x\n\n"))
				c.Response().Flush()
			}
			return nil
		},
		"/flush-only": func(c echo.Context) error {
			c.Response().WriteHeader(http.StatusOK)
			c.Response().Flush()
			return nil
		},
	}
	serve := func(mw echo.MiddlewareFunc) string {
		e := echo.New()
		e.Use(mw)
		for p, h := range handlers {
			e.GET(p, h)
		}
		ts := httptest.NewServer(e)
		t.Cleanup(ts.Close)
		return ts.URL
	}
	ours := serve(compress())
	echos := serve(middleware.GzipWithConfig(middleware.GzipConfig{Level: gzip.BestSpeed, MinLength: compressMinLength,
		Skipper: func(c echo.Context) bool { return c.Request().Header.Get("Upgrade") != "" }}))
	cl := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	get := func(base, path, enc string) (int, http.Header, []byte) {
		req, _ := http.NewRequest(http.MethodGet, base+path, nil)
		if enc != "" {
			req.Header.Set("Accept-Encoding", enc)
		}
		resp, err := cl.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		resp.Header.Del("Date")
		return resp.StatusCode, resp.Header, b
	}
	compressed := 0
	for p := range handlers {
		for _, enc := range []string{"", "gzip", "deflate, gzip", "identity"} {
			s1, h1, b1 := get(ours, p, enc)
			s2, h2, b2 := get(echos, p, enc)
			if s1 != s2 || !equalHeaders(h1, h2) || !bytes.Equal(b1, b2) {
				t.Errorf("%s (Accept-Encoding %q): ours %d %v %q, Echo's %d %v %q", p, enc, s1, h1, b1, s2, h2, b2)
			}
			if h1.Get("Content-Encoding") == "gzip" {
				compressed++
			}
		}
	}
	if compressed < 8 {
		t.Fatalf("only %d answers compressed: the suite does not exercise compression", compressed)
	}
}

func equalHeaders(a, b http.Header) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if strings.Join(v, "\x00") != strings.Join(b[k], "\x00") {
			return false
		}
	}
	return true
}

// TestCompressZstdStreamFlushes: a streamed answer compressed with zstd
// reaches the client event by event: the handler sends its second event
// only after the client decoded the first, so a compressor that held
// flushed bytes back would hang the test.
func TestCompressZstdStreamFlushes(t *testing.T) {
	read := make(chan struct{})
	e := echo.New()
	e.Use(compress())
	e.GET("/s", func(c echo.Context) error {
		c.Response().Header().Set(echo.HeaderContentType, "text/event-stream")
		c.Response().WriteHeader(http.StatusOK)
		c.Response().Write([]byte("data: one\n\n"))
		c.Response().Flush()
		<-read
		c.Response().Write([]byte("data: two\n\n"))
		return nil
	})
	ts := httptest.NewServer(e)
	defer ts.Close()
	req, _ := http.NewRequest("GET", ts.URL+"/s", nil)
	req.Header.Set("Accept-Encoding", "gzip;q=0.5, zstd")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.Header.Get("Content-Encoding") != "zstd" {
		close(read)
		t.Fatalf("Content-Encoding %q", resp.Header.Get("Content-Encoding"))
	}
	zr, err := zstd.NewReader(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	first := make([]byte, len("data: one\n\n"))
	if _, err := io.ReadFull(zr, first); err != nil || string(first) != "data: one\n\n" {
		close(read)
		t.Fatalf("first event %q: %v", first, err)
	}
	close(read)
	rest, err := io.ReadAll(zr)
	if err != nil || string(rest) != "data: two\n\n" {
		t.Fatalf("rest %q: %v", rest, err)
	}
}
