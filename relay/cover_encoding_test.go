package relay_test

import (
	"bytes"
	"compress/gzip"
	"io"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay"
	"github.com/anp2net/relay/relay/relaytest"
	"github.com/anp2net/relay/tasks/taskstest"
)

func coverGzip(t testing.TB, b []byte) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(b)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func coverZstd(t testing.TB, b []byte) []byte {
	zw, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer zw.Close()
	return zw.EncodeAll(b, nil)
}

// TestCompressedTransport: a real relay answers zstd for Accept-Encoding:
// zstd (preferred over gzip, never for q=0), decodes gzip- and
// zstd-encoded publish bodies into stored events, and refuses a
// decompression bomb (413, the decoded size counts against the body
// limit), an unknown Content-Encoding (415) and a body that does not
// decode (400), storing nothing for any of them.
func TestCompressedTransport(t *testing.T) {
	r := relaytest.Start(t, nil, func(c *relay.Config) { c.MaxBody = 64 << 10 })
	ag := taskstest.Pool(2)
	at := int64(relaytest.VectorTime - 60)

	for i, enc := range []string{"gzip", "zstd", "x-gzip", "ZSTD"} {
		e := ag[0].Sign(protocol.KindPost, at+int64(i), "compressed "+enc)
		raw := protocol.AppendJSON(nil, e)
		body := coverGzip(t, raw)
		if strings.EqualFold(enc, "zstd") {
			body = coverZstd(t, raw)
		}
		ans := r.Do(t, "POST", "/events", "application/json", body, "Content-Encoding", enc)
		if ans.Status != 200 {
			t.Fatalf("%s body: %d %s", enc, ans.Status, ans.Body)
		}
		if got := r.Do(t, "GET", "/events/"+e.ID, "", nil); got.Status != 200 {
			t.Fatalf("%s event not stored: %d", enc, got.Status)
		}
	}
	stored := r.Count(t)

	// Answers: a long list, compressed as asked.
	for _, c := range []struct{ ae, want string }{
		{"zstd", "zstd"}, {"gzip, zstd", "zstd"}, {"gzip", "gzip"}, {"zstd;q=0, gzip", "gzip"},
		{"zstd;q=0.0", ""}, {"br", ""},
	} {
		ans := r.Do(t, "GET", "/events?limit=100", "", nil, "Accept-Encoding", c.ae)
		if ans.Status != 200 || ans.Header.Get("Content-Encoding") != c.want {
			t.Fatalf("Accept-Encoding %q: %d, Content-Encoding %q; want %q", c.ae, ans.Status, ans.Header.Get("Content-Encoding"), c.want)
		}
		var plain []byte
		switch c.want {
		case "zstd":
			zr, err := zstd.NewReader(bytes.NewReader(ans.Body))
			if err != nil {
				t.Fatal(err)
			}
			plain, err = io.ReadAll(zr)
			zr.Close()
			if err != nil {
				t.Fatalf("zstd answer: %v", err)
			}
		case "gzip":
			zr, err := gzip.NewReader(bytes.NewReader(ans.Body))
			if err != nil {
				t.Fatal(err)
			}
			if plain, err = io.ReadAll(zr); err != nil {
				t.Fatal(err)
			}
		default:
			plain = ans.Body
		}
		if !bytes.Contains(plain, []byte("compressed zstd")) {
			t.Fatalf("Accept-Encoding %q: answer does not list the events: %.200s", c.ae, plain)
		}
	}

	// Refusals, none stored.
	bombSrc := []byte(`{"content":"` + strings.Repeat("A", 1<<20) + `"}`)
	for _, c := range []struct {
		name, ce string
		body     []byte
		status   int
		code     string
	}{
		{"gzip bomb", "gzip", coverGzip(t, bombSrc), 413, "body_too_large"},
		{"zstd bomb", "zstd", coverZstd(t, bombSrc), 413, "body_too_large"},
		{"unknown encoding", "br", []byte("whatever"), 415, relay.CodeUnsupportedEncoding},
		{"two encodings", "gzip, zstd", coverGzip(t, []byte("{}")), 415, relay.CodeUnsupportedEncoding},
		{"not gzip", "gzip", []byte("plainly not gzip"), 400, "invalid_parameter"},
		{"not zstd", "zstd", []byte("plainly not zstd"), 400, "invalid_parameter"},
	} {
		if len(c.body) >= 64<<10 {
			t.Fatalf("%s: the encoded body (%d bytes) must be under the limit to test the decoded cap", c.name, len(c.body))
		}
		ans := r.Do(t, "POST", "/events", "application/json", c.body, "Content-Encoding", c.ce, "Origin", "https://example.org")
		if ans.Status != c.status || ans.Code(t) != c.code {
			t.Fatalf("%s: %d %s; want %d %s", c.name, ans.Status, ans.Body, c.status, c.code)
		}
		if ans.Header.Get("Access-Control-Allow-Origin") != "*" {
			t.Fatalf("%s: no CORS header", c.name)
		}
	}
	if n := r.Count(t); n != stored {
		t.Fatalf("log holds %d events after refusals; want %d", n, stored)
	}
}
