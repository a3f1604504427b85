package stream

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/anp2net/relay/protocol"
)

// Subscription is a hub subscriber driven by another transport than SSE
// (the WebSocket module): the caller replays, takes queued frames when
// Wake fires, and stops when Gone is closed. The hub never blocks on it:
// a subscription whose queue overflows Options.Buffer is let go with
// Slow reporting true.
type Subscription struct {
	h *Hub
	s *subscriber
}

// Frame is one queued item of a Subscription: a stored event (Seq > 0,
// Event and its compact JSON Body) or, with Meta set, an event: meta
// notice whose Body is the notice JSON.
type Frame struct {
	Seq   int64
	Event *protocol.Event
	Body  []byte
	Meta  bool
}

// Subscribe registers a subscriber matching f (nil: every event) for
// reader ("" when anonymous), counted against MaxSubscribers. It fails
// with ErrClosed or a *BusyError. Close it when done.
func (h *Hub) Subscribe(f *Filter, reader string) (*Subscription, error) {
	return h.SubscribeQuota(f, reader, nil)
}

// SubscribeQuota is Subscribe with a byte budget q shared with other
// subscriptions (those of one connection), on top of Options.QueueBytes
// and Options.TotalBytes; nil: none.
func (h *Hub) SubscribeQuota(f *Filter, reader string, q *Quota) (*Subscription, error) {
	if f == nil {
		f = &Filter{}
	}
	s, err := h.register(f, reader, q)
	if err != nil {
		return nil, err
	}
	return &Subscription{h: h, s: s}, nil
}

// Wake receives when frames are queued.
func (x *Subscription) Wake() <-chan struct{} { return x.s.wake }

// Gone is closed when the hub lets the subscription go (too slow, or the
// hub closed).
func (x *Subscription) Gone() <-chan struct{} { return x.s.gone }

// Slow reports whether the hub let the subscription go for falling too
// far behind: more than Options.Buffer frames, or more bytes waiting than
// Options.QueueBytes, its quota or its share of Options.TotalBytes allow
// (valid once Gone is closed).
func (x *Subscription) Slow() bool { return x.s.reason == endSlow }

// Take returns the queued frames in order and the last sequence Publish
// had considered for this subscription when they were taken: every
// matching event up to it is in this batch or an earlier one.
func (x *Subscription) Take() ([]Frame, int64) {
	q, seen := x.s.take()
	defer x.s.giveBack(q)
	out := make([]Frame, len(q))
	for i, e := range q {
		if e.meta {
			out[i] = Frame{Meta: true, Body: e.body}
		} else {
			out[i] = Frame{Seq: e.seq, Event: e.ev, Body: e.data()}
		}
	}
	return out, seen
}

// Close unregisters the subscription.
func (x *Subscription) Close() { x.h.unregister(x.s) }

// Visible reports whether reader may see e (Options.Visible).
func (h *Hub) Visible(reader string, e *protocol.Event) bool { return h.visible(reader, e) }

// Notices returns reader's pending meta notices (Options.Notices); nil
// for an anonymous reader.
func (h *Hub) Notices(ctx context.Context, reader string) ([][]byte, error) {
	if reader == "" || h.opts.Notices == nil {
		return nil, nil
	}
	return h.opts.Notices(ctx, reader)
}

// Replay calls fn, in log order, for every stored event with seq > after
// that x's filter matches and its reader may see, and returns the log's
// last sequence as of the call's start (after math.MaxInt64, it replays
// nothing and just reports the end). Events committed meanwhile are also
// queued on x; frames at or below the returned sequence were replayed
// already. It stops with an error when x is let go or fn fails.
func (x *Subscription) Replay(ctx context.Context, after int64, fn func(seq int64, body []byte) error) (int64, error) {
	return x.ReplayCounted(ctx, after, nil, fn)
}

// ReplayCounted is Replay with read called before every stored row is
// handled, matching or not (nil: none), when every row below seq has
// been: an error from it stops the replay there (a read budget that ran
// out).
func (x *Subscription) ReplayCounted(ctx context.Context, after int64, read func(seq int64) error, fn func(seq int64, body []byte) error) (int64, error) {
	through := int64(-1)
	start := func(t int64) error { through = t; return nil }
	each := func(seq int64, body []byte) error {
		if read != nil {
			if err := read(seq); err != nil {
				return err
			}
		}
		select {
		case <-x.s.gone:
			return errStopped
		default:
		}
		var ev protocol.Event
		if err := json.Unmarshal(body, &ev); err != nil {
			return nil
		}
		if x.s.filter.Match(&ev) && x.h.visible(x.s.reader, &ev) {
			return fn(seq, body)
		}
		return nil
	}
	if err := x.h.opts.Backlog(ctx, after, start, each); err != nil {
		return 0, err
	}
	if through < 0 {
		return 0, errors.New("backlog did not report the end of the log")
	}
	return through, nil
}

// Reader returns the reader the subscription was opened for.
func (x *Subscription) Reader() string { return x.s.reader }
