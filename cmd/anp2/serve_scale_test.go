package main

import (
	"context"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
)

// scaleGet fetches url and returns its status and body.
func scaleGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestServeDebugAddr starts a real relay with --debug-addr on loopback:
// the profiles answer there, and only there.
func TestServeDebugAddr(t *testing.T) {
	c := newServe(io.Discard, io.Discard)
	db := filepath.Join(t.TempDir(), "relay.db")
	if err := c.ParseFlags([]string{"--addr", "127.0.0.1:0", "--db", db, "--debug-addr", "127.0.0.1:0"}); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.srv.Serve(ctx, c.ln) }()
	defer func() { cancel(); <-done; c.Close() }()
	if c.scale.debugBound == "" {
		t.Fatal("no profiling listener")
	}
	code, body := scaleGet(t, "http://"+c.scale.debugBound+"/debug/pprof/heap?debug=1")
	if code != 200 || !strings.Contains(body, "heap profile") {
		t.Fatalf("heap profile: %d %.200q", code, body)
	}
	if code, _ := scaleGet(t, "http://"+c.Addr()+"/debug/pprof/heap?debug=1"); code != 404 {
		t.Fatalf("the public listener answered the profile: %d", code)
	}
	if code, body := scaleGet(t, "http://"+c.Addr()+"/metrics"); code != 200 || !strings.Contains(body, "anp2_go_heap_inuse_bytes") {
		t.Fatalf("metrics: %d %.300q", code, body)
	}
}

// TestServeDebugAddrOff checks the profiling listener is off by default.
func TestServeDebugAddrOff(t *testing.T) {
	c := newServe(io.Discard, io.Discard)
	if err := c.ParseFlags([]string{"--db", filepath.Join(t.TempDir(), "relay.db")}); err != nil {
		t.Fatal(err)
	}
	if c.scale.debugAddr != "" {
		t.Fatalf("debug listener on by default: %q", c.scale.debugAddr)
	}
}

// TestServeDebugAddrLoopbackOnly checks that --debug-addr refuses every
// address that is not loopback.
func TestServeDebugAddrLoopbackOnly(t *testing.T) {
	for _, a := range []string{":6060", "0.0.0.0:6060", "[::]:6060", "10.1.2.3:6060", "example.com:6060", "127.0.0.1"} {
		c := newServe(io.Discard, io.Discard)
		if err := c.ParseFlags([]string{"--debug-addr", a}); err == nil {
			t.Errorf("--debug-addr %s accepted", a)
		}
	}
	for _, a := range []string{"127.0.0.1:6060", "[::1]:6060", "localhost:6060", "127.0.0.2:1"} {
		c := newServe(io.Discard, io.Discard)
		if err := c.ParseFlags([]string{"--debug-addr", a}); err != nil {
			t.Errorf("--debug-addr %s refused: %v", a, err)
		}
	}
}
