package relay

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"testing/iotest"
	"time"
)

// TestReadBodyAllocatesAsBytesArrive: a body declaring 1 MiB that sends
// one byte costs at most bodyChunk, not its declared length (the old
// readBody allocated the declared length up front: 16 such requests took
// 16 MiB).
func TestReadBodyAllocatesAsBytesArrive(t *testing.T) {
	const reqs = 16
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := 0; i < reqs; i++ {
		r := httptest.NewRequest("POST", "/events", strings.NewReader("{"))
		r.ContentLength = 1 << 20
		if _, err := readBody(r); err != io.ErrUnexpectedEOF {
			t.Fatalf("short body: %v, want unexpected EOF", err)
		}
	}
	runtime.ReadMemStats(&after)
	if got := after.TotalAlloc - before.TotalAlloc; got > reqs*(bodyChunk+32<<10) {
		t.Fatalf("%d short requests declaring 1 MiB allocated %d bytes", reqs, got)
	}
}

// TestReadBodyShapes: readBody returns the body exactly, however it is cut
// and whatever length it declares.
func TestReadBodyShapes(t *testing.T) {
	big := bytes.Repeat([]byte("0123456789abcdef"), 70000) // > 1 MiB
	for _, size := range []int{0, 1, 100, bodyChunk - 1, bodyChunk, bodyChunk + 1, 300000, 1 << 20, len(big)} {
		body := big[:size]
		for _, declared := range []int64{-1, int64(size), int64(size) - 1, int64(size) + 5} {
			for name, wrap := range map[string]func(io.Reader) io.Reader{"whole": func(r io.Reader) io.Reader { return r }, "half": iotest.HalfReader, "data-err": iotest.DataErrReader} {
				r := httptest.NewRequest("POST", "/events", wrap(bytes.NewReader(body)))
				r.ContentLength = declared
				got, err := readBody(r)
				if declared > int64(size) {
					if err != io.ErrUnexpectedEOF {
						t.Fatalf("%d bytes declared %d (%s): %v, want unexpected EOF", size, declared, name, err)
					}
					continue
				}
				if err != nil || !bytes.Equal(got, body) {
					t.Fatalf("%d bytes declared %d (%s): %d bytes, %v", size, declared, name, len(got), err)
				}
			}
		}
	}
}

// TestBodyTimeout: a publish body that stalls is answered 408 body_timeout
// once the body timeout passes, and the connection is closed (before, the
// connection and its buffer were held for as long as the client liked).
// The request asks for gzip, so the deadline is set through the
// compression middleware's writer.
func TestBodyTimeout(t *testing.T) {
	r := startRelay(t, func(c *Config) { c.BodyTimeout = 300 * time.Millisecond })
	for _, path := range []string{"/events", "/events/batch", "/api/events"} {
		conn, err := net.Dial("tcp", r.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		// A failure must not hang the test: the client gives up long after
		// the relay should have (and closes, ending the handler's read).
		conn.SetDeadline(time.Now().Add(10 * time.Second))
		fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nAccept-Encoding: gzip\r\nContent-Length: 1048576\r\n\r\n{", path)
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestTimeout || !bytes.Contains(b, []byte(`"body_timeout"`)) {
			t.Fatalf("%s: %d %s, want 408 body_timeout", path, resp.StatusCode, b)
		}
		// The relay closes the connection: the next read ends.
		if _, err := conn.Read(make([]byte, 1)); err != io.EOF {
			t.Fatalf("%s: connection still open after the timeout: %v", path, err)
		}
	}
	// A publish in time is unaffected.
	if a := r.post(t, mk(key(1), vectorTime, 1, "in time")); a.status != http.StatusOK {
		t.Fatalf("publish: %d %s", a.status, a.body)
	}
}

// stallingBody gives its first byte, then reports that the handler is
// reading it and blocks until released.
type stallingBody struct {
	reads   int
	reading chan struct{}
	release chan struct{}
}

func (b *stallingBody) Read(p []byte) (int, error) {
	b.reads++
	if b.reads == 1 {
		p[0] = '{'
		return 1, nil
	}
	if b.reads == 2 {
		close(b.reading)
		<-b.release
	}
	return 0, io.EOF
}

// TestStalledBodyNotAnnounced: a publish whose body is still arriving is
// not announced to the log's writer (before, it was from its first byte,
// and every transaction meanwhile waited the whole gathering window for
// it), and a lone publish meanwhile is committed.
func TestStalledBodyNotAnnounced(t *testing.T) {
	r := startRelay(t, func(c *Config) { c.Checker.PoW.Kinds = nil })
	srv, err := New(func() Config {
		cfg := DefaultConfig()
		cfg.Now = r.clock.now
		return cfg
	}(), r.store)
	if err != nil {
		t.Fatal(err)
	}
	body := &stallingBody{reading: make(chan struct{}), release: make(chan struct{})}
	req := httptest.NewRequest("POST", "/events", body)
	req.ContentLength = 1000
	req.Header.Set("Content-Type", "application/json")
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		srv.Handler().ServeHTTP(httptest.NewRecorder(), req)
	}()
	<-body.reading
	if n := r.store.Expected(); n != 0 {
		t.Fatalf("a stalled body is announced to the writer (%d expected appends)", n)
	}
	if a := r.post(t, mk(key(2), vectorTime, 1, "lone")); a.status != http.StatusOK {
		t.Fatalf("lone publish: %d %s", a.status, a.body)
	}
	close(body.release)
	wg.Wait()
	if n := r.store.Expected(); n != 0 {
		t.Fatalf("%d announcements left after both publishes", n)
	}
}
