package stream

import (
	"errors"
	"net/http"
	"strconv"
	"time"
)

// flushAt is how many buffered bytes make sseWriter write before the end
// of a batch (a long replay reaches the client as it goes).
const flushAt = 32 << 10

// sseWriter frames one stream and remembers two positions: pos, the log
// sequence through which every matching event has been written (where a
// resume must start), and sent, the last id the client was given (its
// Last-Event-ID; -1 when none).
type sseWriter struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
	expiry  time.Time // the write deadline last set
	buf     []byte
	sent    int64
	pos     int64
	// replayed is the last sequence the log replay covered: queued live
	// events up to it were already sent. 0 for a live-only stream, whose
	// queue holds only events committed after it subscribed.
	replayed int64
}

func newSSEWriter(w http.ResponseWriter, timeout time.Duration) *sseWriter {
	return &sseWriter{w: w, rc: http.NewResponseController(w), timeout: timeout, sent: -1}
}

// start sends the response header.
func (c *sseWriter) start(r *http.Request) error {
	h := c.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	if r.ProtoMajor == 1 {
		// The stream leaves per-write deadlines on the connection; do not
		// hand it to another request afterwards.
		h.Set("Connection", "close")
	}
	// A server-wide ReadTimeout would otherwise cancel a long stream.
	_ = c.rc.SetReadDeadline(time.Time{})
	c.w.WriteHeader(http.StatusOK)
	return c.flush()
}

// event frames one stored event.
func (c *sseWriter) event(seq int64, body []byte) {
	c.buf = append(c.buf, "id: "...)
	c.buf = strconv.AppendInt(c.buf, seq, 10)
	c.buf = append(c.buf, '\n')
	c.buf = appendData(c.buf, body)
	c.buf = append(c.buf, '\n')
	c.sent, c.pos = seq, seq
}

// meta frames an event: meta notice; it carries no id (it is not in the log).
func (c *sseWriter) meta(data []byte) {
	c.buf = append(c.buf, "event: meta\n"...)
	c.buf = appendData(c.buf, data)
	c.buf = append(c.buf, '\n')
}

// retry sets the client's reconnection delay (the SSE retry: field,
// in whole milliseconds, at least a second); the next frame carries it.
func (c *sseWriter) retry(d time.Duration) {
	c.buf = append(c.buf, "retry: "...)
	c.buf = strconv.AppendInt(c.buf, max(d, time.Second).Milliseconds(), 10)
	c.buf = append(c.buf, '\n')
}

// comment frames a comment. When the resume position has moved past the
// last id sent (events skipped by the filter), the frame also carries
// "id: <pos>": per the SSE rules a frame without data dispatches nothing
// but updates the client's Last-Event-ID.
func (c *sseWriter) comment(text string) {
	if c.pos != c.sent {
		c.buf = append(c.buf, "id: "...)
		c.buf = strconv.AppendInt(c.buf, c.pos, 10)
		c.buf = append(c.buf, '\n')
		c.sent = c.pos
	}
	c.buf = append(c.buf, ": "...)
	c.buf = append(c.buf, text...)
	c.buf = append(c.buf, "\n\n"...)
}

// appendData appends data as "data:" lines, one per line of data (CR, LF
// and CRLF all end an SSE line; compact JSON holds none).
func appendData(dst, data []byte) []byte {
	for {
		dst = append(dst, "data: "...)
		i := 0
		for i < len(data) && data[i] != '\n' && data[i] != '\r' {
			i++
		}
		dst = append(dst, data[:i]...)
		dst = append(dst, '\n')
		if i == len(data) {
			return dst
		}
		if data[i] == '\r' && i+1 < len(data) && data[i+1] == '\n' {
			i++
		}
		data = data[i+1:]
	}
}

// maybeFlush writes once enough is buffered.
func (c *sseWriter) maybeFlush() error {
	if len(c.buf) < flushAt {
		return nil
	}
	return c.flush()
}

// flush writes what is buffered and pushes it to the client, failing when
// the client does not take it in time: the write deadline is renewed only
// once less than half the timeout is left (renewing costs a syscall-path
// call per flush), so a write gets between half and all of it.
func (c *sseWriter) flush() error {
	if now := time.Now(); c.expiry.Sub(now) < c.timeout/2 {
		c.expiry = now.Add(c.timeout)
		if err := c.rc.SetWriteDeadline(c.expiry); err != nil && !errors.Is(err, http.ErrNotSupported) {
			return err
		}
	}
	if len(c.buf) > 0 {
		if _, err := c.w.Write(c.buf); err != nil {
			return err
		}
		if cap(c.buf) > 4*flushAt {
			c.buf = nil // a long replay should not pin its buffer
		} else {
			c.buf = c.buf[:0]
		}
	}
	return c.rc.Flush()
}
