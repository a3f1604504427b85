package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"syscall"
	"time"

	"github.com/anp2net/relay/protocol"
)

// The publish bench's load generator. On a 2-core machine the generator
// shares the CPU with the relay it measures, so every microsecond it spends
// per event is taken from the relay: with net/http's client (a request
// object, a header map, a transport's connection pool, a reader goroutine
// per connection, the answer decoded by reflection) it spent about 25 µs per
// event. Here each request is serialized once, before the clock starts, and
// written whole on a keep-alive TCP connection of the worker's own, and
// the answer is read by a minimal HTTP/1.1 response reader into a reused
// buffer. The measurement stays the same: a latency runs from the write of
// the request to the read of the complete answer, every answer's status
// and body are checked, and a failed request counts as an error.

// loadRequest is one pre-serialized request of the load generator: the
// whole HTTP/1.1 request on the wire, and what an accepting answer says.
type loadRequest struct {
	wire []byte
	// ids are the events' ids, in order; one for POST /events.
	ids []string
	// batch: a POST /events/batch (its answer lists one result per id).
	batch bool
}

// loadTarget is where the generator sends: the relay's host:port and the
// Host header.
type loadTarget struct{ addr, host string }

func newLoadTarget(base string) (loadTarget, error) {
	u, err := url.Parse(base)
	if err != nil || u.Scheme != "http" || u.Host == "" {
		return loadTarget{}, fmt.Errorf("bench load: need an http:// relay URL, got %q", base)
	}
	addr := u.Host
	if u.Port() == "" {
		addr = net.JoinHostPort(u.Hostname(), "80")
	}
	return loadTarget{addr: addr, host: u.Host}, nil
}

// request serializes a POST of body to path with the headers Go's own
// client sends (Accept-Encoding: gzip included, so the relay does the
// same work as for a net/http client).
func (t loadTarget) request(path string, body []byte, ids []string) loadRequest {
	b := make([]byte, 0, len(body)+160)
	b = append(b, "POST "...)
	b = append(b, path...)
	b = append(b, " HTTP/1.1\r\nHost: "...)
	b = append(b, t.host...)
	b = append(b, "\r\nUser-Agent: anp2-bench\r\nContent-Type: application/json\r\nContent-Length: "...)
	b = strconv.AppendInt(b, int64(len(body)), 10)
	b = append(b, "\r\nAccept-Encoding: gzip\r\n\r\n"...)
	b = append(b, body...)
	return loadRequest{wire: b, ids: ids}
}

// publishRequests serializes one POST /events per event.
func (t loadTarget) publishRequests(evs []*protocol.Event) []loadRequest {
	out := make([]loadRequest, len(evs))
	for i, e := range evs {
		out[i] = t.request("/events", protocol.AppendJSON(nil, e), []string{e.ID})
	}
	return out
}

// batchRequests serializes evs as POST /events/batch bodies of size events.
func (t loadTarget) batchRequests(evs []*protocol.Event, size int) []loadRequest {
	var out []loadRequest
	for i := 0; i < len(evs); i += size {
		part := evs[i:min(len(evs), i+size)]
		body := []byte{'['}
		ids := make([]string, len(part))
		for k, e := range part {
			if k > 0 {
				body = append(body, ',')
			}
			body = protocol.AppendJSON(body, e)
			ids[k] = e.ID
		}
		r := t.request("/events/batch", append(body, ']'), ids)
		r.batch = true
		out = append(out, r)
	}
	return out
}

// loadConn is one keep-alive connection of a generator worker, dialled
// again after the relay closes it or a request fails on it.
type loadConn struct {
	t    loadTarget
	c    net.Conn
	r    *bufio.Reader
	body []byte
	zr   *gzip.Reader
	zbuf bytes.Buffer
	// deadline is the connection's read and write deadline.
	deadline time.Time
}

// roundTrip writes req and reads the complete answer: its status and its
// body (gunzipped). An error leaves the connection closed. As net/http's
// client in the bench did, it gives up on an answer after 30 s.
func (lc *loadConn) roundTrip(req []byte) (int, []byte, error) {
	if err := lc.dial(); err != nil {
		return 0, nil, err
	}
	// The deadline is moved on only every 10 s, not per request: a
	// deadline costs the generator timer work.
	if now := time.Now(); lc.deadline.Sub(now) < 20*time.Second {
		lc.deadline = now.Add(30 * time.Second)
		lc.c.SetDeadline(lc.deadline)
	}
	status, body, keep, err := lc.exchange(req)
	if err != nil || !keep {
		lc.close()
	}
	return status, body, err
}

// dial connects unless connected (a worker dials before its first request
// so that no latency counts the TCP handshake).
func (lc *loadConn) dial() error {
	if lc.c != nil {
		return nil
	}
	c, err := net.Dial("tcp", lc.t.addr)
	if err != nil {
		return err
	}
	lc.c, lc.deadline = c, time.Time{}
	if lc.r == nil {
		lc.r = bufio.NewReaderSize(c, 16<<10)
	} else {
		lc.r.Reset(c)
	}
	return nil
}

func (lc *loadConn) close() {
	if lc.c != nil {
		lc.c.Close()
		lc.c = nil
	}
}

// exchange writes req and reads one HTTP/1.1 response: the status line,
// the headers it needs (Content-Length, Transfer-Encoding: chunked,
// Content-Encoding: gzip, Connection: close) and the body.
func (lc *loadConn) exchange(req []byte) (status int, body []byte, keep bool, err error) {
	if _, err := lc.c.Write(req); err != nil {
		return 0, nil, false, err
	}
	line, err := lc.r.ReadSlice('\n')
	if err != nil {
		return 0, nil, false, err
	}
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.1 ")) {
		return 0, nil, false, fmt.Errorf("bad status line %q", line)
	}
	status, err = strconv.Atoi(string(line[9:12]))
	if err != nil {
		return 0, nil, false, fmt.Errorf("bad status line %q", line)
	}
	length, chunked, gz := -1, false, false
	keep = true
	for {
		h, err := lc.r.ReadSlice('\n')
		if err != nil {
			return 0, nil, false, err
		}
		h = bytes.TrimRight(h, "\r\n")
		if len(h) == 0 {
			break
		}
		name, value, ok := bytes.Cut(h, []byte(":"))
		if !ok {
			return 0, nil, false, fmt.Errorf("bad header line %q", h)
		}
		value = bytes.TrimSpace(value)
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			if length, err = strconv.Atoi(string(value)); err != nil || length < 0 {
				return 0, nil, false, fmt.Errorf("bad Content-Length %q", value)
			}
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			chunked = bytes.EqualFold(value, []byte("chunked"))
		case bytes.EqualFold(name, []byte("Content-Encoding")):
			gz = bytes.EqualFold(value, []byte("gzip"))
		case bytes.EqualFold(name, []byte("Connection")):
			keep = !bytes.EqualFold(value, []byte("close"))
		}
	}
	lc.body = lc.body[:0]
	switch {
	case status == 204 || status == 304 || status < 200: // no body
	case chunked:
		err = lc.readChunked()
	case length >= 0:
		lc.body = grow(lc.body, length)
		_, err = io.ReadFull(lc.r, lc.body)
	default: // the body runs to the connection's end
		keep = false
		var b bytes.Buffer
		_, err = b.ReadFrom(lc.r)
		lc.body = b.Bytes()
	}
	if err != nil {
		return 0, nil, false, err
	}
	if gz {
		if err := lc.gunzip(); err != nil {
			return 0, nil, false, err
		}
	}
	return status, lc.body, keep, nil
}

// readChunked appends a chunked body to lc.body.
func (lc *loadConn) readChunked() error {
	for {
		line, err := lc.r.ReadSlice('\n')
		if err != nil {
			return err
		}
		size, _, _ := bytes.Cut(bytes.TrimRight(line, "\r\n"), []byte(";"))
		n, err := strconv.ParseInt(string(size), 16, 32)
		if err != nil || n < 0 {
			return fmt.Errorf("bad chunk size %q", line)
		}
		if n == 0 {
			for { // trailers, then the empty line
				t, err := lc.r.ReadSlice('\n')
				if err != nil {
					return err
				}
				if len(bytes.TrimRight(t, "\r\n")) == 0 {
					return nil
				}
			}
		}
		at := len(lc.body)
		lc.body = grow(lc.body, at+int(n))
		if _, err := io.ReadFull(lc.r, lc.body[at:]); err != nil {
			return err
		}
		if crlf, err := lc.r.ReadSlice('\n'); err != nil || len(bytes.TrimRight(crlf, "\r\n")) != 0 {
			return errors.New("bad chunk end")
		}
	}
}

// gunzip replaces lc.body by its gzip decompression.
func (lc *loadConn) gunzip() error {
	var err error
	if lc.zr == nil {
		lc.zr, err = gzip.NewReader(bytes.NewReader(lc.body))
	} else {
		err = lc.zr.Reset(bytes.NewReader(lc.body))
	}
	if err != nil {
		return err
	}
	lc.zbuf.Reset()
	if _, err := lc.zbuf.ReadFrom(lc.zr); err != nil {
		return err
	}
	lc.body = append(lc.body[:0], lc.zbuf.Bytes()...)
	return nil
}

// grow returns b resized to n bytes (its bytes kept), reusing its array
// when it is large enough.
func grow(b []byte, n int) []byte {
	if cap(b) >= n {
		return b[:n]
	}
	nb := make([]byte, n, max(n, 2*cap(b)))
	copy(nb, b)
	return nb
}

// publishAccepted reports whether body is the answer of POST /events
// accepting the event id: compared with the relay's exact answer first (no
// decoding), and otherwise decoded (a duplicate answer, a module's fields).
func publishAccepted(body []byte, id string) bool {
	const pre, post = `{"id":"`, `","accepted":true,"duplicate":false,"stored":true`
	if len(body) >= len(pre)+len(id)+len(post)+1 && string(body[:len(pre)]) == pre &&
		string(body[len(pre):len(pre)+len(id)]) == id &&
		string(body[len(pre)+len(id):len(pre)+len(id)+len(post)]) == post {
		// Then "}" or the leaf index (SPEC §21) and "}".
		tail := bytes.TrimRight(body[len(pre)+len(id)+len(post):], "\n")
		if string(tail) == "}" {
			return true
		}
		if n, ok := bytes.CutPrefix(tail, []byte(`,"leaf_index":`)); ok && len(n) > 1 && n[len(n)-1] == '}' {
			return true
		}
	}
	var a struct {
		ID       string `json:"id"`
		Accepted bool   `json:"accepted"`
	}
	return json.Unmarshal(body, &a) == nil && a.ID == id && a.Accepted
}

// batchNotAccepted returns how many of ids the answer of POST
// /events/batch does not accept (a duplicate counts as accepted, as for
// the single publish), checking each result's index and id.
func batchNotAccepted(body []byte, ids []string) int {
	var a struct {
		Results []struct {
			Index    int    `json:"index"`
			ID       string `json:"id"`
			Status   int    `json:"status"`
			Accepted bool   `json:"accepted"`
		} `json:"results"`
	}
	if json.Unmarshal(body, &a) != nil || len(a.Results) != len(ids) {
		return len(ids)
	}
	bad := 0
	for i, r := range a.Results {
		if r.Index != i || r.ID != ids[i] || r.Status != 200 || !r.Accepted {
			bad++
		}
	}
	return bad
}

// ownCPU returns the CPU time this process has used (user and system).
func ownCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
