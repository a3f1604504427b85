package federation

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"
)

// What this relay reads from a peer is hostile input: every answer is
// capped in bytes, every line in it too, and every request has an overall
// deadline and an idle timeout (SPEC §20.1). A peer that breaks a cap is
// marked `error` and not asked again for capBackoff.

// Caps on what one peer answer may carry, in bytes.
const (
	// MaxPeerLine is the longest line read from a peer (an export line,
	// a stream frame line, one event of a page): the largest event a
	// publish carries is a 1 MiB body, and one that came as CBOR can grow
	// at most six-fold written as JSON (a control character becomes
	// \u00XX); the rest is slack for the export's {"seq"} wrapper and the
	// stream's "data: " prefix.
	MaxPeerLine = 6<<20 + 64<<10
	// maxPageBytes caps one GET /events answer (a page, or a fetch of
	// mirrorChunk ids).
	maxPageBytes = 64 << 20
	// maxSmallAnswer caps /health, /relays and a /gossip answer.
	maxSmallAnswer = 1 << 20
)

// Deadlines of peer requests. Variables so that tests can shorten them.
var (
	// peerDeadline bounds a request and its whole answer (not a stream
	// or an export).
	peerDeadline = 60 * time.Second
	// streamDeadline bounds one GET /stream or GET /export: a longer
	// stream is ended and the next round resumes it.
	streamDeadline = time.Hour
	// peerIdle ends a request when no byte of the answer arrives for that
	// long (the stream sends a keepalive every 15 s).
	peerIdle = 60 * time.Second
	// capBackoff is how long a peer that broke a cap is left alone.
	capBackoff = time.Minute
)

// capError says a peer's answer broke a cap.
type capError struct{ what string }

func (e *capError) Error() string { return "peer broke a cap: " + e.what }

// isCapError reports whether err is a broken cap.
func isCapError(err error) bool {
	var ce *capError
	return errors.As(err, &ce)
}

// peerTransport dials with a deadline, waits for the answer's headers at
// most peerDeadline, and never follows a redirect (see newPeerClient).
func peerTransport() *http.Transport {
	return &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: peerDeadline,
		MaxIdleConnsPerHost:   4,
		IdleConnTimeout:       90 * time.Second,
		ForceAttemptHTTP2:     true,
	}
}

// newPeerClient returns a client for peers: a redirect is answered as
// is (a 3xx, which fails the request), so a peer's URL cannot send the
// relay elsewhere; deadlines come from the request's context.
func newPeerClient() *http.Client {
	return &http.Client{Transport: peerTransport(),
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// idleBody ends its request (through cancel) when no byte arrives for
// idle; Read then fails with the context's cause.
type idleBody struct {
	io.ReadCloser
	t    *time.Timer
	idle time.Duration
}

// watchIdle wraps resp.Body so that the request whose context cancel
// ends is ended after idle without a byte.
func watchIdle(body io.ReadCloser, idle time.Duration, cancel context.CancelCauseFunc) io.ReadCloser {
	t := time.AfterFunc(idle, func() { cancel(fmt.Errorf("peer sent nothing for %s", idle)) })
	return &idleBody{ReadCloser: body, t: t, idle: idle}
}

func (b *idleBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.t.Reset(b.idle)
	}
	return n, err
}

func (b *idleBody) Close() error {
	b.t.Stop()
	return b.ReadCloser.Close()
}

// readCapped reads all of r, or a capError naming what when it holds
// more than limit bytes.
func readCapped(r io.Reader, limit int64, what string) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, &capError{fmt.Sprintf("%s longer than %d bytes", what, limit)}
	}
	return b, nil
}

// eachLine calls fn with every non-blank line of r, without its
// surrounding space, until r ends (nil) or fn returns false (errStopped).
// Lines are read in place, so the bytes are valid only during the call;
// one longer than the 1 MiB buffer is gathered, up to max bytes: a longer
// line is a capError.
func eachLine(r io.Reader, max int, fn func([]byte) bool) error {
	br := bufio.NewReaderSize(r, 1<<20)
	for {
		b, readErr := br.ReadSlice('\n')
		if readErr == bufio.ErrBufferFull {
			long := append([]byte(nil), b...)
			for readErr == bufio.ErrBufferFull {
				if len(long) > max {
					return &capError{fmt.Sprintf("a line longer than %d bytes", max)}
				}
				b, readErr = br.ReadSlice('\n')
				long = append(long, b...)
			}
			b = long
		}
		if len(bytes.TrimRight(b, "\r\n")) > max {
			return &capError{fmt.Sprintf("a line longer than %d bytes", max)}
		}
		if b = bytes.TrimSpace(b); len(b) > 0 && !fn(b) {
			return errStopped
		}
		if readErr == io.EOF {
			return nil
		}
		if readErr != nil {
			return readErr
		}
	}
}

// penalties remembers the peers (and relays asked by resolution) that
// broke a cap, until when they are left alone. At most maxPenalties are
// kept; the oldest go first.
type penalties struct {
	mu sync.Mutex
	m  map[string]time.Time
}

const maxPenalties = 1024

func (p *penalties) add(base string, until time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil {
		p.m = map[string]time.Time{}
	}
	if len(p.m) >= maxPenalties {
		now := time.Now()
		for k, t := range p.m {
			if t.Before(now) || len(p.m) >= maxPenalties {
				delete(p.m, k)
			}
		}
	}
	p.m[base] = until
}

// until returns when base's penalty ends (zero: none).
func (p *penalties) until(base string) time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	t := p.m[base]
	if !t.IsZero() && time.Now().After(t) {
		delete(p.m, base)
		return time.Time{}
	}
	return t
}
