// Package ws is the relay's WebSocket endpoint, GET /ws (SPEC §5.3): a
// small framing modelled on Nostr's NIP-01 over the same filters,
// resume points, per-reader visibility and bounded buffers as GET /stream
// (it runs its own stream.Hub), plus publishing (EVENT, exactly POST
// /events' rules) and in-band reader authentication (AUTH, the D4 event).
package ws

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay"
	"github.com/anp2net/relay/relay/eventlog"
	"github.com/anp2net/relay/relay/httpx"
	"github.com/anp2net/relay/relay/stream"
	"github.com/coder/websocket"
	"github.com/labstack/echo/v4"
)

// CodeUpgradeRequired: GET /ws without a WebSocket upgrade (426).
const CodeUpgradeRequired = "upgrade_required"

// Options configure the module. Zero values take the defaults noted.
type Options struct {
	// MaxSubscriptions caps the open REQs of one connection (default 20).
	MaxSubscriptions int
	// Buffer is how many frames may wait for one subscription (default
	// 1024); one that falls further behind closes its connection.
	Buffer int
	// QueueBytes caps the bytes of frames waiting for one connection,
	// all its subscriptions together (default 4 MiB); one that would
	// hold more is closed as too slow.
	QueueBytes int64
	// TotalQueueBytes caps the bytes of frames waiting for every
	// connection together (default 128 MiB): beyond, the connections
	// with the most waiting are closed as too slow first.
	TotalQueueBytes int64
	// ReqRows is the read budget of one connection: the stored rows its
	// REQs may have the relay read and decode per minute of the relay
	// clock, as a bucket of that size (default 10,000).
	ReqRows int
	// ReqRowsPerAddr is the same budget for all the connections of one
	// client address (IPv6 by /64) together (default 50,000).
	ReqRowsPerAddr int
	// WriteTimeout bounds one frame's write (default 10 s); a client that
	// does not take it in time is disconnected.
	WriteTimeout time.Duration
	// PingInterval is the interval of WebSocket pings (default 30 s).
	PingInterval time.Duration
	// MaxReqsPerMinute caps the REQs of one connection per minute of the
	// relay clock (default 120).
	MaxReqsPerMinute int
	// Coalesce is how long a busy subscription gathers events before its
	// next write (default 10 ms): one that wrote less than this ago waits
	// for the module's next flush tick, so a stream of events costs a
	// write per tick, not one per event. An idle one writes at once.
	Coalesce time.Duration
}

func (o *Options) defaults() {
	if o.MaxSubscriptions <= 0 {
		o.MaxSubscriptions = 20
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = 10 * time.Second
	}
	if o.MaxReqsPerMinute <= 0 {
		o.MaxReqsPerMinute = 120
	}
	if o.PingInterval <= 0 {
		o.PingInterval = 30 * time.Second
	}
	if o.Coalesce <= 0 {
		o.Coalesce = 10 * time.Millisecond
	}
	if o.QueueBytes <= 0 {
		o.QueueBytes = 4 << 20
	}
	if o.TotalQueueBytes <= 0 {
		o.TotalQueueBytes = 128 << 20
	}
	if o.ReqRows <= 0 {
		o.ReqRows = 10_000
	}
	if o.ReqRowsPerAddr <= 0 {
		o.ReqRowsPerAddr = 50_000
	}
}

// Module serves GET /ws.
type Module struct {
	opts Options
	core *relay.Server
	hub  *stream.Hub

	// tick is closed (and replaced) every Coalesce: a busy subscription
	// waits for it before writing.
	tick atomic.Pointer[chan struct{}]

	budget budget

	mu     sync.Mutex
	perIP  map[string]int
	conns  map[*conn]struct{}
	closed bool
}

var _ relay.Runner = (*Module)(nil)

// NewModule returns the WebSocket module.
func NewModule(opts Options) *Module {
	opts.defaults()
	m := &Module{opts: opts, perIP: map[string]int{}, conns: map[*conn]struct{}{}}
	m.budget.addrs = map[string]*stream.RowBucket{}
	ch := make(chan struct{})
	m.tick.Store(&ch)
	return m
}

// nextTick returns a channel closed at the next flush tick.
func (m *Module) nextTick() <-chan struct{} { return *m.tick.Load() }

// ticker closes the flush tick every Coalesce until ctx ends.
func (m *Module) ticker(ctx context.Context) {
	t := time.NewTicker(m.opts.Coalesce)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		ch := make(chan struct{})
		close(*m.tick.Swap(&ch))
	}
}

// Name is "ws".
func (m *Module) Name() string { return "ws" }

// Mount builds the module's hub over core's log and registers GET /ws.
func (m *Module) Mount(core *relay.Server) error {
	cfg := core.Config()
	m.core = core
	m.hub = stream.NewHub(stream.Options{
		Backlog:        core.Log().Export,
		MaxSubscribers: cfg.MaxSubscribers,
		Buffer:         m.opts.Buffer,
		QueueBytes:     m.opts.QueueBytes,
		TotalBytes:     m.opts.TotalQueueBytes,
		Logger:         cfg.Logger,
		Visible:        core.Sees,
	})
	core.OnCommit(m.publish)
	core.AddMetrics(m.writeMetrics)
	relay.RegisterStatus(CodeUpgradeRequired, http.StatusUpgradeRequired)
	core.Route(http.MethodGet, "/ws", m.get)
	core.Route(http.MethodGet, "/subscribe", m.getSeed)
	return nil
}

// Run closes every connection (with "going away") when ctx ends.
func (m *Module) Run(ctx context.Context) {
	m.ticker(ctx)
	m.hub.Close()
	m.mu.Lock()
	m.closed = true
	conns := make([]*conn, 0, len(m.conns))
	for c := range m.conns {
		conns = append(conns, c)
	}
	m.mu.Unlock()
	// At once: each waits up to closeWait for its client.
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.shut(websocket.StatusGoingAway, "relay shutting down")
		}()
	}
	wg.Wait()
}

// Stats are the module's figures: open connections, the REQ read
// budget's counters and the hub's.
type Stats struct {
	Connections int `json:"connections"`
	// ReqRows are the stored rows REQs were charged for; ReqRefused the
	// REQs refused or ended because a read budget ran out.
	ReqRows    int64 `json:"req_rows"`
	ReqRefused int64 `json:"req_refused"`
	stream.Stats
}

// Stats returns the open connections and subscriptions and how many were
// dropped for being too slow.
func (m *Module) Stats() Stats {
	m.mu.Lock()
	n := len(m.conns)
	m.mu.Unlock()
	rows, refused := m.budget.counters()
	return Stats{Connections: n, ReqRows: rows, ReqRefused: refused, Stats: m.hub.Stats()}
}

func (m *Module) writeMetrics(w io.Writer) {
	st := m.Stats()
	fmt.Fprintf(w, "# HELP anp2_ws_connections Open WebSocket connections.\n# TYPE anp2_ws_connections gauge\nanp2_ws_connections %d\n", st.Connections)
	fmt.Fprintf(w, "# HELP anp2_ws_subscriptions Open WebSocket subscriptions.\n# TYPE anp2_ws_subscriptions gauge\nanp2_ws_subscriptions %d\n", st.Subscribers)
	fmt.Fprintf(w, "# HELP anp2_ws_dropped_slow_total WebSocket subscriptions closed for falling behind.\n# TYPE anp2_ws_dropped_slow_total counter\nanp2_ws_dropped_slow_total %d\n", st.Dropped)
	fmt.Fprintf(w, "# HELP anp2_ws_req_rows_total Stored rows WebSocket REQs were charged for reading.\n# TYPE anp2_ws_req_rows_total counter\nanp2_ws_req_rows_total %d\n", st.ReqRows)
	fmt.Fprintf(w, "# HELP anp2_ws_req_refused_total WebSocket REQs refused or ended because a read budget ran out.\n# TYPE anp2_ws_req_refused_total counter\nanp2_ws_req_refused_total %d\n", st.ReqRefused)
	fmt.Fprintf(w, "# HELP anp2_ws_queued_bytes Bytes of frames waiting for WebSocket readers.\n# TYPE anp2_ws_queued_bytes gauge\nanp2_ws_queued_bytes %d\n", st.QueuedBytes)
	fmt.Fprintf(w, "# HELP anp2_ws_queued_bytes_peak The most bytes of frames that ever waited for WebSocket readers.\n# TYPE anp2_ws_queued_bytes_peak gauge\nanp2_ws_queued_bytes_peak %d\n", st.PeakQueuedBytes)
}

func (m *Module) publish(batch []eventlog.Committed) {
	items := make([]stream.Item, len(batch))
	for i, c := range batch {
		items[i] = stream.Item{Seq: c.Seq, Event: c.Event}
	}
	m.hub.Publish(items)
}

// get is GET /ws: it authenticates an optional D4 header, takes a
// connection slot for the client's address, and upgrades.
func (m *Module) get(c echo.Context) error { return m.upgrade(c, false) }

// upgrade serves GET /ws, or with seed GET /subscribe (seed.go).
func (m *Module) upgrade(c echo.Context, seed bool) error {
	r := c.Request()
	if !strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
		return protocol.Errorf(CodeUpgradeRequired, "GET %s needs a WebSocket upgrade (Upgrade: websocket)", r.URL.Path)
	}
	reader, err := m.core.Reader(c)
	if err != nil {
		return err
	}
	ip := c.RealIP()
	key := m.core.ClientKey(c) // the connection cap counts an IPv6 client by its network
	if err := m.acquire(key); err != nil {
		return err
	}
	defer m.release(key)
	cw := &corkWriter{ResponseWriter: c.Response()}
	wsc, err := websocket.Accept(cw, r, &websocket.AcceptOptions{
		// Any origin: nothing rides on cookies; identity is a signed event.
		InsecureSkipVerify: true,
	})
	if err != nil {
		return nil // Accept has answered
	}
	cn := newConn(m, wsc, cw.cc, r, ip, key, reader)
	cn.seed = seed
	if !m.add(cn) {
		wsc.Close(websocket.StatusGoingAway, "relay shutting down")
		return nil
	}
	defer m.remove(cn)
	cn.serve()
	return nil
}

// acquire takes a connection slot for ip: at most MaxStreamsPerIP (0:
// 64, negative: no cap) per address and MaxSubscribers in all.
func (m *Module) acquire(ip string) error {
	cfg := m.core.Config()
	per := cfg.MaxStreamsPerIP
	if per == 0 {
		per = 64
	}
	total := cfg.MaxSubscribers
	if total <= 0 {
		total = 4096
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if per > 0 && m.perIP[ip] >= per {
		return &httpx.RetryError{Err: protocol.Errorf(stream.CodeRateLimited, "too many open WebSocket connections from %s", ip), After: 5}
	}
	if len(m.conns) >= total {
		return &httpx.RetryError{Err: protocol.Errorf(stream.CodeTooManySubscribers, "the relay is serving its maximum of %d WebSocket connections; retry later", total),
			After: 5, Status: http.StatusServiceUnavailable}
	}
	m.perIP[ip]++
	return nil
}

func (m *Module) release(ip string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.perIP[ip]--; m.perIP[ip] <= 0 {
		delete(m.perIP, ip)
	}
}

func (m *Module) add(c *conn) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return false
	}
	m.conns[c] = struct{}{}
	return true
}

func (m *Module) remove(c *conn) {
	m.mu.Lock()
	delete(m.conns, c)
	m.mu.Unlock()
}
