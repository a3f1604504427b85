package client

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/anp2net/relay/protocol"
	"github.com/coder/websocket"
)

// FromNow, as Subscribe's from, starts at the log's end when Subscribe
// is called: only events stored afterwards are delivered.
const FromNow = -1

// Transports of a subscription.
const (
	TransportAuto = ""    // WebSocket, falling back to SSE when the upgrade is refused
	TransportWS   = "ws"  // GET /ws only (SPEC §14)
	TransportSSE  = "sse" // GET /stream only (SPEC §7)
)

// Item is one event of a subscription with its log sequence on the relay
// that served it (sequences belong to one relay's log).
type Item struct {
	Seq   int64           // the event's position in the serving relay's log
	Event *protocol.Event // verified
}

// SubOptions tunes Subscribe; the zero value is fine.
type SubOptions struct {
	Transport string // TransportAuto, TransportWS or TransportSSE
	// Buffer is how many items may wait for the reader (default 256).
	// When it is full the relay drops the connection as too slow, and the
	// subscription resumes from its last seq: nothing is lost.
	Buffer int
	// MaxBackoff bounds the pause between reconnections (default 5 s).
	MaxBackoff time.Duration
	// UntilCaughtUp ends the subscription once the stored matches are
	// delivered (the WebSocket's EOSE, the stream's ": live").
	UntilCaughtUp bool
}

// Subscription delivers the events matching a filter in log order, each
// once: it reconnects after a dropped connection or a relay restart and
// resumes after the last seq it delivered, so there is neither gap nor
// duplicate. Read Events until it is closed, then Err says why.
type Subscription struct {
	c      *Client
	f      Filter
	opts   SubOptions
	out    chan Item
	cancel context.CancelFunc
	done   chan struct{}

	mu         sync.Mutex
	seq        int64 // last seq delivered (or skipped past)
	err        error
	reconnects int
	transport  string
}

// Subscribe opens a subscription to f's events with seq > from (0: the
// whole log; FromNow: only events stored after it returns). f.Limit is
// ignored. The connection is made in the background and retried until ctx
// ends or Close is called. Events are verified (VerifyEvent); a bad one
// ends the subscription with ErrBadEvent.
func (c *Client) Subscribe(ctx context.Context, f Filter, from int64, opts SubOptions) *Subscription {
	if opts.Buffer <= 0 {
		opts.Buffer = 256
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = 5 * time.Second
	}
	f.Limit = 0
	if from < 0 {
		// Fix the start now, so that what is stored after Subscribe
		// returns is delivered; on failure the connection loop retries.
		if seq, err := c.health(ctx); err == nil {
			from = seq
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	s := &Subscription{c: c, f: f, opts: opts, out: make(chan Item, opts.Buffer), cancel: cancel, done: make(chan struct{}), seq: from}
	go s.run(ctx)
	return s
}

// Events is the channel of items; it is closed when the subscription ends.
func (s *Subscription) Events() <-chan Item { return s.out }

// Seq returns the resume point: the last seq delivered or skipped past.
func (s *Subscription) Seq() int64 { s.mu.Lock(); defer s.mu.Unlock(); return s.seq }

// Reconnects counts the connections made after the first.
func (s *Subscription) Reconnects() int { s.mu.Lock(); defer s.mu.Unlock(); return s.reconnects }

// Transport names the transport of the current connection ("ws" or "sse").
func (s *Subscription) Transport() string { s.mu.Lock(); defer s.mu.Unlock(); return s.transport }

// Err returns why the subscription ended (nil after Close or UntilCaughtUp,
// ctx.Err() when its context ended); nil while it runs.
func (s *Subscription) Err() error { s.mu.Lock(); defer s.mu.Unlock(); return s.err }

// Close ends the subscription and waits for its goroutine.
func (s *Subscription) Close() {
	s.cancel()
	<-s.done
	s.mu.Lock()
	if errors.Is(s.err, context.Canceled) {
		s.err = nil
	}
	s.mu.Unlock()
}

// errPermanent marks a refusal that reconnecting cannot cure.
type errPermanent struct{ error }

// errCaughtUp ends an UntilCaughtUp subscription.
var errCaughtUp = errors.New("caught up")

func (s *Subscription) run(ctx context.Context) {
	defer close(s.done)
	defer close(s.out)
	backoff := 100 * time.Millisecond
	for first := true; ; first = false {
		if !first {
			s.mu.Lock()
			s.reconnects++
			s.mu.Unlock()
		}
		before := s.Seq()
		err := s.connect(ctx)
		if errors.Is(err, errCaughtUp) {
			return
		}
		var perm errPermanent
		if ctx.Err() != nil || errors.As(err, &perm) || errors.Is(err, ErrBadEvent) {
			if ctx.Err() != nil {
				err = ctx.Err()
			}
			s.mu.Lock()
			s.err = err
			s.mu.Unlock()
			return
		}
		if s.Seq() > before {
			backoff = 100 * time.Millisecond // it made progress: reconnect soon
		}
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, s.opts.MaxBackoff)
	}
}

// connect runs one connection until it breaks; the transport is chosen
// per connection.
func (s *Subscription) connect(ctx context.Context) error {
	if s.Seq() < 0 {
		h, err := s.c.health(ctx)
		if err != nil {
			return err
		}
		s.mu.Lock()
		s.seq = h
		s.mu.Unlock()
	}
	if s.opts.Transport == TransportSSE {
		return s.sse(ctx)
	}
	err := s.ws(ctx)
	var refused *wsRefused
	if s.opts.Transport == TransportAuto && errors.As(err, &refused) {
		return s.sse(ctx)
	}
	return err
}

// deliver hands an item over unless its seq is not beyond the cursor.
func (s *Subscription) deliver(ctx context.Context, seq int64, e *protocol.Event) error {
	if seq <= s.Seq() {
		return nil
	}
	if err := VerifyEvent(e); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrBadEvent, e.ID, err)
	}
	select {
	case s.out <- Item{Seq: seq, Event: e}:
	case <-ctx.Done():
		return ctx.Err()
	}
	s.advance(seq)
	return nil
}

func (s *Subscription) advance(seq int64) {
	s.mu.Lock()
	if seq > s.seq {
		s.seq = seq
	}
	s.mu.Unlock()
}

func (s *Subscription) setTransport(t string) { s.mu.Lock(); s.transport = t; s.mu.Unlock() }

// health returns the relay's last log sequence (GET /health's max_seq).
func (c *Client) health(ctx context.Context) (int64, error) {
	var h struct {
		MaxSeq int64 `json:"max_seq"`
	}
	err := c.GetJSON(ctx, "/health", nil, &h)
	return h.MaxSeq, err
}

// wsRefused is an upgrade the server answered with a plain HTTP status.
type wsRefused struct{ status int }

func (e *wsRefused) Error() string {
	return fmt.Sprintf("websocket upgrade refused: HTTP %d", e.status)
}

// reqFilter is f as a REQ filter object, resuming after seq.
func reqFilter(f Filter, seq int64) map[string]any {
	m := map[string]any{"after": seq}
	for k, v := range f.values() {
		m[k] = v[0]
	}
	return m
}

func (s *Subscription) ws(ctx context.Context) error {
	u := s.c.Base + "/ws"
	hdr := http.Header{}
	if s.c.Key != nil {
		hdr.Set("Authorization", AuthHeader(s.c.Key, http.MethodGet, u, nil, s.c.now().Unix()))
	}
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	conn, resp, err := websocket.Dial(dctx, u, &websocket.DialOptions{HTTPClient: s.c.HTTP, HTTPHeader: hdr})
	cancel()
	if err != nil {
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols && resp.StatusCode != http.StatusTooManyRequests && resp.StatusCode < 500 {
			return &wsRefused{resp.StatusCode}
		}
		return err
	}
	defer conn.CloseNow()
	conn.SetReadLimit(maxFrame)
	s.setTransport(TransportWS)
	req, _ := json.Marshal([]any{"REQ", "sub", reqFilter(s.f, s.Seq())})
	if err := conn.Write(ctx, websocket.MessageText, req); err != nil {
		return err
	}
	for {
		_, msg, err := conn.Read(ctx)
		if err != nil {
			return err
		}
		if err := s.wsFrame(ctx, msg); err != nil {
			if errors.Is(err, errCaughtUp) {
				conn.Close(websocket.StatusNormalClosure, "")
			}
			return err
		}
	}
}

// wsFrame handles one relay frame (SPEC §14 Relay frames).
func (s *Subscription) wsFrame(ctx context.Context, msg []byte) error {
	var frame []json.RawMessage
	if err := json.Unmarshal(msg, &frame); err != nil || len(frame) == 0 {
		return fmt.Errorf("bad frame from relay: %.80s", msg)
	}
	var typ string
	json.Unmarshal(frame[0], &typ)
	switch typ {
	case "EVENT":
		if len(frame) < 4 {
			return fmt.Errorf("EVENT without seq: %.80s", msg)
		}
		var seq int64
		if err := json.Unmarshal(frame[3], &seq); err != nil {
			return fmt.Errorf("EVENT seq: %w", err)
		}
		e, err := protocol.DecodeJSON(frame[2])
		if err != nil {
			return fmt.Errorf("%w: %v", ErrBadEvent, err)
		}
		return s.deliver(ctx, seq, e)
	case "EOSE":
		if s.opts.UntilCaughtUp {
			return errCaughtUp
		}
	case "CLOSED":
		var m string
		if len(frame) > 2 {
			json.Unmarshal(frame[2], &m)
		}
		return closedError(m)
	}
	return nil
}

// closedError sorts a CLOSED message: the relay's load and shutdown are
// retried, a refused filter is permanent.
func closedError(m string) error {
	code, _, _ := strings.Cut(m, ":")
	switch code {
	case "too_slow", "rate_limited", "too_many_subscribers", "too_many_subscriptions", "", "unavailable":
		return fmt.Errorf("subscription closed: %s", m)
	}
	if strings.Contains(m, "shutting down") {
		return fmt.Errorf("subscription closed: %s", m)
	}
	return errPermanent{fmt.Errorf("subscription refused: %s", m)}
}

// sse reads GET /stream (SPEC §7) resuming with Last-Event-ID.
func (s *Subscription) sse(ctx context.Context) error {
	q := s.f.values()
	path := "/stream"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.c.Base+path, nil)
	if err != nil {
		return errPermanent{err}
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Last-Event-ID", strconv.FormatInt(s.Seq(), 10))
	s.c.authorize(req, nil)
	resp, err := s.c.HTTP.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b := make([]byte, 4096)
		n, _ := resp.Body.Read(b)
		err := decodeError(resp.StatusCode, b[:n])
		if resp.StatusCode == http.StatusBadRequest {
			return errPermanent{err}
		}
		return err
	}
	s.setTransport(TransportSSE)
	return s.readSSE(ctx, bufio.NewReaderSize(resp.Body, 64<<10))
}

// readSSE parses frames: "id: <seq>" then "data: <event>" for an event,
// an id alone for a position, ": live" once caught up.
func (s *Subscription) readSSE(ctx context.Context, r *bufio.Reader) error {
	var id int64 = -1
	var data []byte
	for {
		line, err := readLine(r, maxFrame)
		if err != nil {
			return err
		}
		l := strings.TrimRight(string(line), "\r\n")
		switch {
		case l == "":
			if data != nil && id >= 0 {
				e, err := protocol.DecodeJSON(data)
				if err != nil {
					return fmt.Errorf("%w: %v", ErrBadEvent, err)
				}
				if err := s.deliver(ctx, id, e); err != nil {
					return err
				}
			} else if id >= 0 {
				s.advance(id) // a position frame or a last comment
			}
			id, data = -1, nil
		case strings.HasPrefix(l, "id:"):
			id, _ = strconv.ParseInt(strings.TrimSpace(l[3:]), 10, 64)
		case strings.HasPrefix(l, "data:"):
			data = []byte(strings.TrimPrefix(l[5:], " "))
		case strings.HasPrefix(l, "event:"):
			id, data = -1, nil // meta notices carry no event
			for {
				l2, err := readLine(r, maxFrame)
				if err != nil {
					return err
				}
				if strings.TrimSpace(string(l2)) == "" {
					break
				}
			}
		case strings.HasPrefix(l, ": live") && s.opts.UntilCaughtUp:
			if id >= 0 {
				s.advance(id)
			}
			return errCaughtUp
		}
	}
}

// Scan delivers every stored event matching f with seq > after, in log
// order, to fn, and returns the last seq seen: give it back as after to
// continue where it stopped. It reconnects as a Subscription does, so a
// dropped connection neither skips nor repeats an event. fn's error ends
// the scan and is returned.
func (c *Client) Scan(ctx context.Context, f Filter, after int64, fn func(Item) error) (int64, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sub := c.Subscribe(ctx, f, after, SubOptions{UntilCaughtUp: true})
	for it := range sub.Events() {
		if err := fn(it); err != nil {
			cancel()
			sub.Close()
			return after, err
		}
		after = it.Seq
	}
	sub.Close()
	return max(after, sub.Seq()), sub.Err()
}

// maxFrame bounds one SSE line or WebSocket message from a relay: an
// event is at most the relay's 1 MiB body, escaped.
const maxFrame = 2 << 20

// readLine returns the next line of r, failing past max bytes.
func readLine(r *bufio.Reader, max int) ([]byte, error) {
	var line []byte
	for {
		part, err := r.ReadSlice('\n')
		if len(line)+len(part) > max {
			return nil, fmt.Errorf("stream line longer than %d bytes", max)
		}
		line = append(line, part...)
		if err != bufio.ErrBufferFull {
			return line, err
		}
	}
}
