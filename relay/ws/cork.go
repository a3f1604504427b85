package ws

import (
	"bufio"
	"errors"
	"net"
	"net/http"
	"sync"
	"time"
)

// corkConn is the upgraded TCP connection with a cork: while corked,
// what the WebSocket library writes (it flushes every message) is
// gathered in memory, and the uncork sends it in one write. A
// subscription that wakes to several events then costs one system call,
// not one per event, which is most of a busy relay's fan-out cost.
// Uncorked, writes go straight through. Bytes keep their order: both
// paths append or write under mu.
type corkConn struct {
	net.Conn
	mu     sync.Mutex
	corked int
	buf    []byte
	err    error // a failed corked flush: every later write fails
}

// Write sends p, or gathers it while corked.
func (c *corkConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return 0, c.err
	}
	if c.corked > 0 {
		c.buf = append(c.buf, p...)
		return len(p), nil
	}
	return c.Conn.Write(p)
}

// cork starts gathering writes.
func (c *corkConn) cork() {
	c.mu.Lock()
	c.corked++
	c.mu.Unlock()
}

// maxKeptCork is the largest gathered buffer kept for reuse.
const maxKeptCork = 64 << 10

// uncork ends one cork; the last one sends what was gathered, within
// timeout. A failed send fails every later write too (the connection is
// then unusable: part of a frame may have gone out).
func (c *corkConn) uncork(timeout time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.corked--; c.corked > 0 || len(c.buf) == 0 {
		return c.err
	}
	if c.err == nil {
		_ = c.Conn.SetWriteDeadline(time.Now().Add(timeout))
		_, c.err = c.Conn.Write(c.buf)
		_ = c.Conn.SetWriteDeadline(time.Time{})
	}
	if cap(c.buf) > maxKeptCork {
		c.buf = nil
	} else {
		c.buf = c.buf[:0]
	}
	return c.err
}

// corkWriter is the upgrade's ResponseWriter: its Hijack hands the
// WebSocket library the corkConn instead of the bare connection.
type corkWriter struct {
	http.ResponseWriter
	cc *corkConn
}

// Hijack hijacks the underlying connection and wraps it in a corkConn
// (with a fresh write buffer over it: the server's buffer is empty after
// the 101 answer it flushed).
func (w *corkWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, brw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	if brw.Writer.Buffered() > 0 {
		conn.Close()
		return nil, nil, errors.New("ws: unflushed bytes at hijack")
	}
	w.cc = &corkConn{Conn: conn}
	return w.cc, bufio.NewReadWriter(brw.Reader, bufio.NewWriterSize(w.cc, 4096)), nil
}

// Unwrap lets http.ResponseController reach the server's writer.
func (w *corkWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
