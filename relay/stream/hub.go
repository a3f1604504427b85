// Package stream is the relay's GET /stream: Server-Sent Events of newly
// stored events, filtered per subscriber, resumable without gaps from the
// log, with bounded per-subscriber buffers. It knows nothing of Echo or SQL:
// the log is reached through a Backlog function (eventlog.Log.Export fits).
package stream

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anp2net/relay/protocol"
)

// Backlog walks the log for resume: it calls start once with the log's last
// sequence at the time of the call (through), then fn for every stored
// event with after < seq <= through, in sequence order, stopping at fn's
// first error. (eventlog.Log).Export has exactly this shape.
type Backlog func(ctx context.Context, after int64, start func(through int64) error, fn func(seq int64, body []byte) error) error

// Options configure a Hub. Zero values take the defaults noted.
type Options struct {
	// Backlog reads the stored log; required.
	Backlog Backlog
	// MaxSubscribers caps concurrent streams (default 4096); beyond it
	// Serve returns a *BusyError.
	MaxSubscribers int
	// Buffer is how many frames may wait for one subscriber (default 1024);
	// a subscriber that falls further behind is disconnected.
	Buffer int
	// Keepalive is the interval of keepalive comments (default 15 s).
	Keepalive time.Duration
	// WriteTimeout bounds how long a client may leave written frames
	// untaken before its stream ends (default 10 s; the deadline is
	// renewed lazily, so a write gets between half and all of it).
	WriteTimeout time.Duration
	// RetryAfter is what a *BusyError suggests (default 5 s).
	RetryAfter time.Duration
	// Visible, when set, is asked before each event is written; false
	// skips it (moderation §7.1, revocation). It runs on the subscriber's
	// goroutine, never on Publish's.
	Visible func(reader string, e *protocol.Event) bool
	// Notices, when set, is asked once when an authenticated reader
	// connects, for the meta notices it should see first (§7.2: "on the
	// author's next subscribe stream"). Each is sent as an event: meta frame.
	Notices func(ctx context.Context, reader string) ([][]byte, error)
	// Logger receives the hub's logs (default slog.Default()).
	Logger *slog.Logger
}

func (o *Options) defaults() {
	if o.MaxSubscribers <= 0 {
		o.MaxSubscribers = 4096
	}
	if o.Buffer <= 0 {
		o.Buffer = 1024
	}
	if o.Keepalive <= 0 {
		o.Keepalive = 15 * time.Second
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = 10 * time.Second
	}
	if o.RetryAfter <= 0 {
		o.RetryAfter = 5 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

// Item is one newly committed event, as handed to Publish.
type Item struct {
	Seq   int64
	Event *protocol.Event
	// Body is the event's compact JSON (protocol.AppendJSON). When nil it
	// is encoded once, off Publish's goroutine, by the first subscriber
	// that writes the event.
	Body []byte
}

// Hub fans newly committed events out to subscribers. Its methods are safe
// for concurrent use.
type Hub struct {
	opts Options

	mu      sync.Mutex
	subs    map[*subscriber]struct{}
	closed  bool
	dropped uint64 // subscribers disconnected for being too slow
	// The routing index (route.go), under mu: routes files subscribers
	// by key, scan holds those offered everything; gen, cands and key are
	// candidates' scratch.
	routes map[string]map[*subscriber]struct{}
	scan   map[*subscriber]struct{}
	gen    uint64
	cands  []*subscriber
	key    []byte
	// last is the last sequence Publish has handed out (stored once the
	// batch's offers are done).
	last atomic.Int64
}

// NewHub returns a hub; it panics when opts.Backlog is nil.
func NewHub(opts Options) *Hub {
	if opts.Backlog == nil {
		panic("stream: Options.Backlog is required")
	}
	opts.defaults()
	return &Hub{opts: opts, subs: map[*subscriber]struct{}{}, routes: map[string]map[*subscriber]struct{}{},
		scan: map[*subscriber]struct{}{}}
}

// entry is one frame waiting for subscribers; entries are shared.
type entry struct {
	seq  int64
	ev   *protocol.Event
	meta bool // an event: meta notice; body is its data

	once sync.Once
	body []byte
}

func (e *entry) data() []byte {
	e.once.Do(func() {
		if e.body == nil {
			e.body = protocol.AppendJSON(nil, e.ev)
		}
	})
	return e.body
}

// endReason says why the hub let a subscriber go.
type endReason int

const (
	endSlow endReason = iota + 1
	endClosed
)

// subscriber is one stream's hub-side state.
type subscriber struct {
	filter *Filter
	reader string
	wake   chan struct{} // cap 1: "the queue has something"
	gone   chan struct{} // closed when the hub drops it; reason is set first
	reason endReason

	// keys are its routing keys (nil: offered everything); mark is the
	// last candidates pass that listed it; both under the hub's mu.
	keys []string
	mark uint64
	// last is the hub's; regAt its value when s registered.
	last  *atomic.Int64
	regAt int64

	mu    sync.Mutex
	queue []*entry
	spare []*entry
}

// Publish hands newly committed events to every matching subscriber. items
// must come in commit (sequence) order from one caller, the store's commit
// hook; an item at or below a sequence already published is skipped by
// subscribers. It never blocks on a subscriber: one whose buffer is full is
// disconnected, and told where to resume.
func (h *Hub) Publish(items []Item) {
	if len(items) == 0 {
		return
	}
	entries := make([]entry, len(items))
	for i, it := range items {
		entries[i].seq, entries[i].ev, entries[i].body = it.Seq, it.Event, it.Body
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	cands := h.candidates(entries)
	for _, s := range cands {
		h.offer(s, entries)
	}
	clear(cands)
	// Every subscriber has now been offered what it matches up to here.
	h.last.Store(entries[len(entries)-1].seq)
}

// offer queues the entries s matches; the caller holds h.mu.
func (h *Hub) offer(s *subscriber, entries []entry) {
	s.mu.Lock()
	added := false
	for i := range entries {
		e := &entries[i]
		if !s.filter.Match(e.ev) {
			continue
		}
		if len(s.queue) >= h.opts.Buffer {
			s.mu.Unlock()
			h.drop(s, endSlow)
			return
		}
		s.queue = append(s.queue, e)
		added = true
	}
	s.mu.Unlock()
	if added {
		s.signal()
	}
}

// Notify sends data as an event: meta frame to every stream authenticated
// as agentID (§7.2 hide and unhide notices). data is copied; it should be
// one line of compact JSON. Notices are not in the log: a stream that is
// not connected misses them (see Options.Notices).
func (h *Hub) Notify(agentID string, data []byte) {
	if agentID == "" {
		return
	}
	e := &entry{meta: true, body: append([]byte(nil), data...)}
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs {
		if s.reader != agentID {
			continue
		}
		s.mu.Lock()
		full := len(s.queue) >= h.opts.Buffer
		if !full {
			s.queue = append(s.queue, e)
		}
		s.mu.Unlock()
		if full {
			h.drop(s, endSlow)
		} else {
			s.signal()
		}
	}
}

func (s *subscriber) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// drop lets s go; the caller holds h.mu.
func (h *Hub) drop(s *subscriber, why endReason) {
	if _, ok := h.subs[s]; !ok {
		return
	}
	delete(h.subs, s)
	h.unfile(s)
	if why == endSlow {
		h.dropped++
	}
	s.reason = why
	close(s.gone)
}

// register adds a subscriber, or fails with ErrClosed or a *BusyError.
func (h *Hub) register(f *Filter, reader string) (*subscriber, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, ErrClosed
	}
	if len(h.subs) >= h.opts.MaxSubscribers {
		return nil, &BusyError{
			Err:        protocol.Errorf(CodeTooManySubscribers, "the relay is serving its maximum of %d streams; retry later", h.opts.MaxSubscribers),
			RetryAfter: h.opts.RetryAfter,
		}
	}
	s := &subscriber{filter: f, reader: reader, wake: make(chan struct{}, 1), gone: make(chan struct{}),
		last: &h.last, regAt: h.last.Load()}
	h.subs[s] = struct{}{}
	h.file(s)
	return s, nil
}

func (h *Hub) unregister(s *subscriber) {
	h.mu.Lock()
	if _, ok := h.subs[s]; ok {
		delete(h.subs, s)
		h.unfile(s)
	}
	h.mu.Unlock()
}

// take swaps out s's queue, returning the queued entries and the last
// sequence Publish had considered for s when they were taken (0 before
// the first batch published since s registered).
func (s *subscriber) take() ([]*entry, int64) {
	// Read before the queue: the offers of every batch up to last were
	// done when it was stored, so their entries are in this queue or an
	// earlier one.
	seen := s.last.Load()
	if seen <= s.regAt {
		seen = 0
	}
	select {
	case <-s.gone:
		// Dropped by an offer that found its queue full, before last
		// moved past the entries it did not queue: those are not here,
		// and the resume position must stay below them.
		seen = 0
	default:
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.queue
	s.queue, s.spare = s.spare[:0], nil
	return q, seen
}

// keepQueueCap is the largest drained queue a subscriber keeps for reuse.
const keepQueueCap = 256

// giveBack returns a drained queue slice for reuse.
func (s *subscriber) giveBack(q []*entry) {
	clear(q)
	if cap(q) > keepQueueCap { // do not pin a burst's worth of memory on an idle stream
		q = nil
	}
	s.mu.Lock()
	s.spare = q[:0]
	s.mu.Unlock()
}

// Close ends every stream (each gets a final comment naming where to
// resume) and makes Serve return ErrClosed from then on. Call it before
// http.Server.Shutdown, which otherwise waits for streams forever.
func (h *Hub) Close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return
	}
	h.closed = true
	for s := range h.subs {
		h.drop(s, endClosed)
	}
}

// Stats are the hub's figures for /metrics.
type Stats struct {
	Subscribers int    `json:"subscribers"`
	Dropped     uint64 `json:"dropped_slow"`
}

// Stats returns the current number of streams and how many were dropped
// for being too slow since the hub started.
func (h *Hub) Stats() Stats {
	h.mu.Lock()
	defer h.mu.Unlock()
	return Stats{Subscribers: len(h.subs), Dropped: h.dropped}
}
