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
	// QueueBytes caps the bytes waiting for one subscriber (default 4
	// MiB), counted as each frame's compact JSON size: one that would
	// hold more is disconnected as too slow. A first frame is always
	// queued, however large.
	QueueBytes int64
	// TotalBytes caps the bytes waiting for all subscribers together
	// (default 128 MiB): a frame that would go over it first disconnects
	// the subscribers with the most bytes waiting, as too slow, until it
	// fits.
	TotalBytes int64
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
	// ReadBudget, when set, is charged a row for every stored row a
	// resumed stream's replay reads, to the address ServeAddr names; a
	// replay it refuses ends with where to resume and when.
	ReadBudget *AddrBudget
	// Now is the clock ReadBudget refills by (default time.Now).
	Now func() time.Time
}

func (o *Options) defaults() {
	if o.MaxSubscribers <= 0 {
		o.MaxSubscribers = 4096
	}
	if o.Buffer <= 0 {
		o.Buffer = 1024
	}
	if o.QueueBytes <= 0 {
		o.QueueBytes = 4 << 20
	}
	if o.TotalBytes <= 0 {
		o.TotalBytes = 128 << 20
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
	if o.Now == nil {
		o.Now = time.Now
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
	// queued is the bytes waiting for all subscribers (Options.TotalBytes);
	// peak is its highest value, raised under mu.
	queued atomic.Int64
	peak   atomic.Int64
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
	// n is the bytes the entry counts against budgets (0: not yet
	// computed); set under the hub's mu.
	n int64
}

// frameOverhead is what a frame's framing adds to its body, for budgets.
const frameOverhead = 64

// size returns the bytes e counts against the queue budgets: its body's
// length, or, before the body is encoded, an upper bound of it computed
// without encoding (the commit hook stays cheap).
func (e *entry) size() int64 {
	if e.n == 0 {
		if e.body != nil {
			e.n = int64(len(e.body)) + frameOverhead
		} else {
			e.n = jsonSize(e.ev) + frameOverhead
		}
	}
	return e.n
}

// jsonSize bounds the length of protocol.AppendJSON(nil, e) from above.
func jsonSize(e *protocol.Event) int64 {
	n := int64(100) + strSize(e.ID) + strSize(e.AgentID) + strSize(e.Content) + strSize(e.Sig) + 40
	for _, t := range e.Tags {
		n += 3
		for _, v := range t {
			n += strSize(v) + 1
		}
	}
	return n
}

// strSize bounds a JSON string's encoded length: quotes, and at most six
// bytes for a control character.
func strSize(s string) int64 {
	n := int64(2 + len(s))
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 {
			n += 5
		} else if c == '"' || c == '\\' {
			n++
		}
	}
	return n
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

	// quota is the byte budget it shares with its connection's other
	// subscribers (nil: none); h is its hub.
	quota *Quota
	h     *Hub

	mu    sync.Mutex
	queue []*entry
	spare []*entry
	// bytes is what queue counts against the budgets; written under mu,
	// read atomically by the hub's shedding.
	bytes atomic.Int64
}

// Quota is a byte budget shared by several subscribers, such as the
// subscriptions of one WebSocket connection: when the bytes waiting for
// all of them would pass Limit, the one being offered a frame is
// disconnected as too slow. Its methods are safe for concurrent use.
type Quota struct {
	limit int64
	used  atomic.Int64
}

// NewQuota returns a quota of limit bytes (<= 0: unlimited).
func NewQuota(limit int64) *Quota { return &Quota{limit: limit} }

// Used returns the bytes now waiting under q.
func (q *Quota) Used() int64 {
	if q == nil {
		return 0
	}
	return q.used.Load()
}

// over reports whether n more bytes would pass q's limit; a quota with
// nothing waiting always takes one frame.
func (q *Quota) over(n int64) bool {
	if q == nil || q.limit <= 0 {
		return false
	}
	u := q.used.Load()
	return u > 0 && u+n > q.limit
}

func (q *Quota) add(n int64) {
	if q != nil {
		q.used.Add(n)
	}
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
	added := false
	for i := range entries {
		e := &entries[i]
		if !s.filter.Match(e.ev) {
			continue
		}
		if !h.enqueue(s, e) {
			return
		}
		added = true
	}
	if added {
		s.signal()
	}
}

// enqueue adds e to s's queue within the budgets (Buffer frames,
// QueueBytes and s's quota; TotalBytes, which sheds the largest queues
// first), or drops s as too slow and returns false. The caller holds
// h.mu and signals s.
func (h *Hub) enqueue(s *subscriber, e *entry) bool {
	n := e.size()
	if h.queued.Load()+n > h.opts.TotalBytes && !h.shed(n, s) {
		return false
	}
	s.mu.Lock()
	b := s.bytes.Load()
	over := len(s.queue) >= h.opts.Buffer || len(s.queue) > 0 && b+n > h.opts.QueueBytes || s.quota.over(n)
	if !over {
		s.queue = append(s.queue, e)
		s.bytes.Store(b + n)
		s.quota.add(n)
		if t := h.queued.Add(n); t > h.peak.Load() {
			h.peak.Store(t) // raised under h.mu only
		}
	}
	s.mu.Unlock()
	if over {
		h.drop(s, endSlow)
		return false
	}
	return true
}

// shed drops, as too slow, the subscribers with the most bytes waiting
// until n more bytes fit under TotalBytes; false when it dropped s
// itself. The caller holds h.mu.
func (h *Hub) shed(n int64, s *subscriber) bool {
	for h.queued.Load()+n > h.opts.TotalBytes {
		var big *subscriber
		var most int64
		for x := range h.subs {
			if b := x.bytes.Load(); b > most {
				big, most = x, b
			}
		}
		if big == nil {
			return true // nothing waits: the frame goes in alone
		}
		h.drop(big, endSlow)
		if big == s {
			return false
		}
	}
	return true
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
		if s.reader == agentID && h.enqueue(s, e) {
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
	s.release() // nobody takes them now: a resume replays them from the log
	if why == endSlow {
		h.dropped++
	}
	s.reason = why
	close(s.gone)
}

// register adds a subscriber, or fails with ErrClosed or a *BusyError.
func (h *Hub) register(f *Filter, reader string, q *Quota) (*subscriber, error) {
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
		last: &h.last, regAt: h.last.Load(), quota: q, h: h}
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
	s.release()
}

// release empties s's queue and returns its bytes to the budgets.
func (s *subscriber) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.unbudget()
	clear(s.queue)
	s.queue = s.queue[:0]
}

// unbudget returns the bytes of s's queue to the budgets; the caller
// holds s.mu and empties the queue.
func (s *subscriber) unbudget() {
	b := s.bytes.Swap(0)
	s.quota.add(-b)
	s.h.queued.Add(-b)
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
	s.unbudget()
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
	// QueuedBytes is what waits for all subscribers now, PeakQueuedBytes
	// the most that ever did (Options.TotalBytes bounds both, but for one
	// frame larger than the rest of the budget).
	QueuedBytes     int64 `json:"queued_bytes"`
	PeakQueuedBytes int64 `json:"peak_queued_bytes"`
}

// Stats returns the current number of streams, how many were dropped
// for being too slow since the hub started, and the bytes queued.
func (h *Hub) Stats() Stats {
	h.mu.Lock()
	defer h.mu.Unlock()
	return Stats{Subscribers: len(h.subs), Dropped: h.dropped, QueuedBytes: h.queued.Load(), PeakQueuedBytes: h.peak.Load()}
}
