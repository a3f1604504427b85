package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestLoadConnReadsEveryFraming: the bench's HTTP/1.1 response reader
// returns the body net/http's server sent, whatever its framing
// (Content-Length, chunked, gzip, no body, Connection: close), on one
// keep-alive connection that it dials again after a close.
func TestLoadConnReadsEveryFraming(t *testing.T) {
	big := bytes.Repeat([]byte(`{"index":1,"id":"ab","status":200}`), 2000)
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		switch r.URL.Path {
		case "/echo":
			w.Write(body)
		case "/big": // past the server's buffer: chunked
			w.Write(big)
		case "/gzip":
			w.Header().Set("Content-Encoding", "gzip")
			zw := gzip.NewWriter(w)
			zw.Write(big)
			zw.Close()
		case "/empty":
			w.WriteHeader(http.StatusNoContent)
		case "/close":
			w.Header().Set("Connection", "close")
			w.WriteHeader(http.StatusTeapot)
			w.Write([]byte("bye"))
		}
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	tg, err := newLoadTarget(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	lc := &loadConn{t: tg}
	defer lc.close()
	for _, c := range []struct {
		path   string
		body   string
		status int
		want   []byte
	}{
		{"/echo", "hello", 200, []byte("hello")},
		{"/big", "", 200, big},
		{"/gzip", "x", 200, big},
		{"/empty", "", 204, nil},
		{"/close", "", 418, []byte("bye")},
		{"/echo", "again", 200, []byte("again")},
	} {
		status, body, err := lc.roundTrip(tg.request(c.path, []byte(c.body), nil).wire)
		if err != nil || status != c.status || !bytes.Equal(body, c.want) {
			t.Fatalf("%s: status %d, err %v, body %.80q (want %d, %.80q)", c.path, status, err, body, c.status, c.want)
		}
	}
	if n := conns.Load(); n != 2 {
		t.Fatalf("%d connections, want 2 (one kept alive until the relay closed it)", n)
	}
}

// TestAnswerChecks: the generator counts an answer as accepting only when
// it accepts the very event sent.
func TestAnswerChecks(t *testing.T) {
	id := strings.Repeat("ab", 32)
	for _, c := range []struct {
		body string
		ok   bool
	}{
		{`{"id":"` + id + `","accepted":true,"duplicate":false,"stored":true}` + "\n", true},
		{`{"id":"` + id + `","accepted":true,"duplicate":true,"stored":true}`, true},
		{`{"id":"` + id + `","accepted":true,"duplicate":false,"stored":true,"x":1}`, true},
		{`{"id":"` + strings.Repeat("cd", 32) + `","accepted":true,"duplicate":false,"stored":true}`, false},
		{`{"id":"` + id + `","accepted":false}`, false},
		{`{"detail":"x","code":"invalid"}`, false},
		{``, false},
	} {
		if got := publishAccepted([]byte(c.body), id); got != c.ok {
			t.Errorf("publishAccepted(%s) = %v", c.body, got)
		}
	}
	ids := []string{"a", "b", "c"}
	for _, c := range []struct {
		body string
		bad  int
	}{
		{`{"results":[{"index":0,"id":"a","status":200,"accepted":true},{"index":1,"id":"b","status":200,"accepted":true},{"index":2,"id":"c","status":200,"accepted":true}]}`, 0},
		{`{"results":[{"index":0,"id":"a","status":200,"accepted":true},{"index":1,"id":"b","status":400,"code":"x"},{"index":2,"id":"x","status":200,"accepted":true}]}`, 2},
		{`{"results":[{"index":0,"id":"a","status":200,"accepted":true}]}`, 3},
		{`not json`, 3},
	} {
		if got := batchNotAccepted([]byte(c.body), ids); got != c.bad {
			t.Errorf("batchNotAccepted(%s) = %d, want %d", c.body, got, c.bad)
		}
	}
}

// TestBenchPublishRuns runs a short publish bench against its own relay
// process: every publish, batched event and paced publish is accepted,
// and the relay's and the generator's CPU per event are printed.
func TestBenchPublishRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a relay process")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, binary, "bench", "--events", "400", "--agents", "50", "--batch", "50", "--queries", "5", "--pace-for", "300ms").CombinedOutput()
	if err != nil {
		t.Fatalf("bench: %v\n%s", err, out)
	}
	lines := regexp.MustCompile(`(?m)^(publish \(|batch publish|publish paced).*, 0 errors; relay CPU [^;]+; load generator CPU \S+ per accepted event$`).FindAll(out, -1)
	if len(lines) != 3 {
		t.Fatalf("want three publish lines with 0 errors and both CPU figures:\n%s", out)
	}
	if !bytes.Contains(out, []byte("400 events")) {
		t.Fatalf("the throughput run did not send 400 events:\n%s", out)
	}
}
