package stream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/anp2net/relay/protocol"
)

// errStopped ends a replay whose subscriber the hub let go.
var errStopped = errors.New("subscriber dropped")

// Serve answers one GET /stream: Server-Sent Events of the stored events
// matching f, as "id: <seq>" plus one "data:" line of compact JSON each,
// until the client leaves, falls too far behind, or the hub closes. reader is
// the authenticated agent id (D4), "" for an anonymous reader; it receives
// the event: meta notices sent to it with Notify.
//
// With a Last-Event-ID header (or, failing that, f.After) the stream first
// replays every matching stored event after that sequence, then continues
// live with neither gap nor duplicate; without one it starts live from now.
//
// A nil f matches every event. Serve returns an error only before the response starts: a malformed
// Last-Event-ID (*protocol.Error invalid_parameter), a full hub
// (*BusyError) or a closed one (ErrClosed). Once streaming it returns nil;
// failures are logged.
func (h *Hub) Serve(w http.ResponseWriter, r *http.Request, f *Filter, reader string) error {
	return h.ServeAddr(w, r, f, reader, "")
}

// ServeAddr is Serve for a client at addr (a per-address key, such as the core's
// ClientKey), whose replay is charged to Options.ReadBudget ("" or no
// budget: not charged). A replay the budget refuses ends the stream with
// a retry: field and the comment "read budget spent, resume with
// Last-Event-ID <seq>", so an EventSource comes back when it may.
func (h *Hub) ServeAddr(w http.ResponseWriter, r *http.Request, f *Filter, reader, addr string) error {
	if f == nil {
		f = &Filter{}
	}
	after, resume, err := resumePoint(r, f)
	if err != nil {
		return err
	}
	s, err := h.register(f, reader, nil)
	if err != nil {
		return err
	}
	defer h.unregister(s)
	c := newSSEWriter(w, h.opts.WriteTimeout)
	if err := c.start(r); err != nil {
		return nil
	}
	ctx := r.Context()
	h.notices(ctx, c, reader)
	if resume {
		c.sent = after
	} else {
		after = math.MaxInt64 // replay nothing; just learn where the log ends
	}
	if err := h.replay(ctx, c, s, after, addr); err != nil {
		var sp *spentError
		if errors.Is(err, errStopped) {
			h.final(c, s)
		} else if errors.As(err, &sp) {
			c.retry(sp.wait)
			c.comment(fmt.Sprintf("read budget spent, resume with Last-Event-ID %d", c.pos))
			_ = c.flush()
		} else if ctx.Err() == nil {
			h.opts.Logger.Warn("stream replay failed", "reader", reader, "after", after, "err", err)
			h.failed(c)
		}
		return nil
	}
	if resume {
		c.replayed = c.pos
	}
	c.comment("live")
	if c.flush() != nil {
		return nil
	}
	h.live(ctx, c, s)
	return nil
}

// resumePoint returns the sequence to resume after, if any: the
// Last-Event-ID header (what a reconnecting EventSource sends) wins over
// ?after=.
func resumePoint(r *http.Request, f *Filter) (after int64, ok bool, err error) {
	if v := strings.TrimSpace(r.Header.Get("Last-Event-ID")); v != "" {
		n, err := parseSeq(v)
		if err != nil {
			return 0, false, protocol.Errorf(CodeBadParameter, "Last-Event-ID must be a log sequence (a non-negative integer)")
		}
		return n, true, nil
	}
	if f.After != nil {
		return *f.After, true, nil
	}
	return 0, false, nil
}

// notices sends the reader's pending meta notices (Options.Notices).
func (h *Hub) notices(ctx context.Context, c *sseWriter, reader string) {
	if reader == "" || h.opts.Notices == nil {
		return
	}
	notes, err := h.opts.Notices(ctx, reader)
	if err != nil {
		h.opts.Logger.Warn("stream notices failed", "reader", reader, "err", err)
	}
	for _, n := range notes {
		c.meta(n)
	}
}

// replay writes the matching stored events with seq > after. The
// subscriber is already registered, so every event committed from here on
// is also queued live; replay leaves c.pos at the log's end as of its
// start, and live skips queued events at or below it. An after beyond the
// log's end is taken as the end.
func (h *Hub) replay(ctx context.Context, c *sseWriter, s *subscriber, after int64, addr string) error {
	through := int64(-1)
	start := func(t int64) error { through = t; return nil }
	fn := func(seq int64, body []byte) error {
		select {
		case <-s.gone:
			return errStopped
		default:
		}
		if err := h.charge(addr); err != nil {
			return err // every row below seq was handled: c.pos is the resume point
		}
		var ev protocol.Event
		if err := json.Unmarshal(body, &ev); err != nil {
			h.opts.Logger.Warn("stream skipped an undecodable stored event", "seq", seq, "err", err)
		} else if s.filter.Match(&ev) && h.visible(s.reader, &ev) {
			c.event(seq, body)
		}
		c.pos = seq
		return c.maybeFlush()
	}
	c.pos = after
	if err := h.opts.Backlog(ctx, after, start, fn); err != nil {
		return err
	}
	if through < 0 {
		return errors.New("backlog did not report the end of the log")
	}
	c.pos = through
	return nil
}

// spentError ends a replay whose read budget ran out; wait is how long
// until it could go on.
type spentError struct{ wait time.Duration }

func (e *spentError) Error() string { return "read budget spent" }

// charge charges one stored row to addr's read budget.
func (h *Hub) charge(addr string) error {
	if h.opts.ReadBudget == nil || addr == "" {
		return nil
	}
	if ok, wait := h.opts.ReadBudget.Take(h.opts.Now(), addr, 1); !ok {
		return &spentError{wait: wait}
	}
	return nil
}

func (h *Hub) visible(reader string, e *protocol.Event) bool {
	return h.opts.Visible == nil || h.opts.Visible(reader, e)
}

// live writes queued frames as they come, with keepalives in between,
// until the client leaves or the hub lets the subscriber go.
func (h *Hub) live(ctx context.Context, c *sseWriter, s *subscriber) {
	tick := time.NewTicker(h.opts.Keepalive)
	defer tick.Stop()
	for {
		select {
		case <-s.gone: // takes precedence over queued frames
			h.final(c, s)
			return
		default:
		}
		var err error
		select {
		case <-ctx.Done():
			return
		case <-s.gone:
			h.final(c, s)
			return
		case <-s.wake:
			err = h.drain(c, s)
		case <-tick.C:
			if err = h.drain(c, s); err == nil { // moves the position on
				c.comment("keepalive")
			}
		}
		if err == nil {
			err = c.flush()
		}
		if err != nil {
			return
		}
	}
}

// drain frames everything queued for s; the caller flushes.
func (h *Hub) drain(c *sseWriter, s *subscriber) error {
	q, seen := s.take()
	defer s.giveBack(q)
	for _, e := range q {
		switch {
		case e.meta:
			c.meta(e.body)
		case e.seq <= c.replayed: // already replayed from the log
			continue
		default:
			if h.visible(s.reader, e.ev) {
				c.event(e.seq, e.data())
			}
			c.pos = max(c.pos, e.seq)
		}
		if err := c.maybeFlush(); err != nil {
			return err
		}
	}
	// Every event up to seen that s matches was in this queue or an
	// earlier one, so the resume position may move up to it.
	c.pos = max(c.pos, seen)
	return nil
}

// failed ends a stream whose log read failed, with where to resume when
// that is known (a live-only stream that never learned the log's end has
// no position to offer).
func (h *Hub) failed(c *sseWriter) {
	if c.pos == math.MaxInt64 {
		c.pos = c.sent
		c.comment("log unavailable, reconnect later")
	} else {
		c.comment(fmt.Sprintf("replay failed, resume with Last-Event-ID %d", c.pos))
	}
	_ = c.flush()
}

// final tells a subscriber the hub let go where to resume.
func (h *Hub) final(c *sseWriter, s *subscriber) {
	switch s.reason {
	case endSlow:
		h.opts.Logger.Info("stream subscriber too slow, disconnected", "reader", s.reader, "resume_after", c.pos)
		c.comment(fmt.Sprintf("too slow, resume with Last-Event-ID %d", c.pos))
	case endClosed:
		c.comment(fmt.Sprintf("relay shutting down, resume with Last-Event-ID %d", c.pos))
	}
	_ = c.flush()
}
