package client_test

import (
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

var r0 = time.Unix(0, 0)

func asError[T error](err error, target *T) bool { return errors.As(err, target) }

// dropProxy forwards loopback TCP connections to a relay and can cut
// every one of them at once: a dropped connection, as a client sees it.
type dropProxy struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func newDropProxy(t *testing.T, target string) *dropProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &dropProxy{ln: ln}
	t.Cleanup(func() { ln.Close(); p.Drop() })
	addr := strings.TrimPrefix(target, "http://")
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", addr)
			if err != nil {
				in.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, in, out)
			p.mu.Unlock()
			go func() { io.Copy(out, in); out.Close() }()
			go func() { io.Copy(in, out); in.Close() }()
		}
	}()
	return p
}

// URL is the proxy's base URL.
func (p *dropProxy) URL() string { return "http://" + p.ln.Addr().String() }

// Drop closes every connection through the proxy.
func (p *dropProxy) Drop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}
