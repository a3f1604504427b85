package stream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay"
	"github.com/anp2net/relay/relay/eventlog"
	"github.com/anp2net/relay/relay/httpx"
	"github.com/anp2net/relay/trust"
	"github.com/labstack/echo/v4"
)

// Module is the event stream as a relay capability module: GET /stream
// over a Hub that the core's commit hook feeds, showing each reader what
// §7.1 lets them see and greeting authors with notices of their hidden
// events (§7.2). Its limits come from the relay's config
// (MaxSubscribers, MaxStreamsPerIP). It keeps no fold: the log is its
// backlog.
type Module struct {
	opts    ModuleOptions
	core    *relay.Server
	hub     *Hub
	streams ipStreams
}

var _ relay.Runner = (*Module)(nil)

// ModuleOptions are the stream module's budgets; zero values take
// their defaults.
type ModuleOptions struct {
	// QueueBytes and TotalBytes are the hub's (Options).
	QueueBytes int64
	TotalBytes int64
	// ReplayRows is the stored rows the resumed streams of one client
	// address (IPv6 by /64) may have the relay read per minute of the
	// relay clock (default 50,000).
	ReplayRows int
}

// NewModule returns the stream module with the default budgets.
func NewModule() *Module { return &Module{} }

// NewModuleWith returns the stream module with budgets o.
func NewModuleWith(o ModuleOptions) *Module { return &Module{opts: o} }

// Name is "stream".
func (m *Module) Name() string { return "stream" }

// Mount builds the hub over core's log and registers GET /stream and the
// commit and moderation hooks that feed it.
func (m *Module) Mount(core *relay.Server) error {
	cfg := core.Config()
	m.core = core
	if m.opts.ReplayRows <= 0 {
		m.opts.ReplayRows = 50_000
	}
	m.hub = NewHub(Options{
		ReadBudget:     NewAddrBudget(m.opts.ReplayRows),
		Now:            cfg.Now,
		Backlog:        core.Log().Export,
		MaxSubscribers: cfg.MaxSubscribers,
		QueueBytes:     m.opts.QueueBytes,
		TotalBytes:     m.opts.TotalBytes,
		Logger:         cfg.Logger,
		Visible:        core.Sees,
		Notices: func(_ context.Context, reader string) ([][]byte, error) {
			var out [][]byte
			for _, h := range core.Views().Moderation.Current(core.Now()).HiddenBy(reader) {
				b, _ := json.Marshal(map[string]any{"event_id": h.EventID, "hidden": true,
					"flag_count": h.FlagCount, "first_hidden_at": h.FirstHiddenAt})
				out = append(out, b)
			}
			return out, nil
		},
	})
	core.OnCommit(m.publish)
	core.OnModeration(m.notifyAuthors)
	core.AddMetrics(m.writeMetrics)
	core.Route(http.MethodGet, "/stream", m.get)
	return nil
}

func (m *Module) writeMetrics(w io.Writer) {
	st := m.hub.Stats()
	rows, refused := m.hub.opts.ReadBudget.Counters()
	fmt.Fprintf(w, "# HELP anp2_stream_subscribers Open stream subscribers.\n# TYPE anp2_stream_subscribers gauge\nanp2_stream_subscribers %d\n", st.Subscribers)
	fmt.Fprintf(w, "# HELP anp2_stream_replay_rows_total Stored rows resumed streams were charged for reading.\n# TYPE anp2_stream_replay_rows_total counter\nanp2_stream_replay_rows_total %d\n", rows)
	fmt.Fprintf(w, "# HELP anp2_stream_replay_refused_total Stream replays ended because their address's read budget ran out.\n# TYPE anp2_stream_replay_refused_total counter\nanp2_stream_replay_refused_total %d\n", refused)
	fmt.Fprintf(w, "# HELP anp2_stream_dropped_slow_total Streams closed for falling behind.\n# TYPE anp2_stream_dropped_slow_total counter\nanp2_stream_dropped_slow_total %d\n", st.Dropped)
	fmt.Fprintf(w, "# HELP anp2_stream_queued_bytes Bytes of frames waiting for stream readers.\n# TYPE anp2_stream_queued_bytes gauge\nanp2_stream_queued_bytes %d\n", st.QueuedBytes)
	fmt.Fprintf(w, "# HELP anp2_stream_queued_bytes_peak The most bytes of frames that ever waited for stream readers.\n# TYPE anp2_stream_queued_bytes_peak gauge\nanp2_stream_queued_bytes_peak %d\n", st.PeakQueuedBytes)
}

// Run ends every stream when ctx ends, so that the server's shutdown need
// not wait for them.
func (m *Module) Run(ctx context.Context) {
	<-ctx.Done()
	m.hub.Close()
}

// Hub returns the mounted hub (nil before Mount).
func (m *Module) Hub() *Hub { return m.hub }

// publish is the commit hook feeding the stream.
func (m *Module) publish(batch []eventlog.Committed) {
	items := make([]Item, len(batch))
	for i, c := range batch {
		items[i] = Item{Seq: c.Seq, Event: c.Event}
	}
	m.hub.Publish(items)
}

// notifyAuthors sends each author an event: meta notice when one of their
// events becomes hidden or visible again (§7.2).
func (m *Module) notifyAuthors(snap *trust.ModSnapshot) {
	for _, ch := range snap.Changed {
		if ch.Author == "" {
			continue
		}
		ev := snap.Event(ch.EventID)
		b, _ := json.Marshal(map[string]any{"event_id": ch.EventID, "hidden": ch.Visibility == trust.Hidden,
			"visibility": ch.Visibility, "at": ch.At, "flag_count": ev.FlagCount, "first_hidden_at": ev.FirstHiddenAt})
		m.hub.Notify(ch.Author, b)
	}
}

// CodeRateLimited is the relay's code for a client over an allowance.
const CodeRateLimited = "rate_limited"

// get is GET /stream (SPEC §7).
func (m *Module) get(c echo.Context) error {
	f, err := ParseFilterWith(c.QueryParams(), m.core)
	if err != nil {
		return err
	}
	keep, unknown, err := m.core.BranchFilter(f.Branches)
	if err != nil {
		return err
	}
	if len(unknown) > 0 {
		c.Response().Header().Set(relay.HeaderBranchUnknown, strings.Join(unknown, ","))
	}
	f.SetBranch(keep)
	reader, err := m.core.Reader(c)
	if err != nil {
		return err
	}
	key := m.core.ClientKey(c) // an IPv6 client counts by its network
	if !m.streams.acquire(key, m.core.Config().MaxStreamsPerIP) {
		return &httpx.RetryError{Err: protocol.Errorf(CodeRateLimited, "too many open streams from %s", key), After: 5}
	}
	defer m.streams.release(key)
	err = m.hub.ServeAddr(c.Response(), c.Request(), f, reader, key)
	var busy *BusyError
	if errors.As(err, &busy) {
		return &httpx.RetryError{Err: busy.Err, After: busy.RetryAfterSeconds(), Status: http.StatusServiceUnavailable}
	}
	return err
}

// ipStreams counts each client address's open streams.
type ipStreams struct {
	mu   sync.Mutex
	open map[string]int
}

// acquire takes a stream slot for ip unless it already holds max (0: 64,
// negative: no cap).
func (c *ipStreams) acquire(ip string, max int) bool {
	if max == 0 {
		max = 64
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if max > 0 && c.open[ip] >= max {
		return false
	}
	if c.open == nil {
		c.open = map[string]int{}
	}
	c.open[ip]++
	return true
}

func (c *ipStreams) release(ip string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.open[ip]--; c.open[ip] <= 0 {
		delete(c.open, ip)
	}
}

// Extras gives the extra stream parameters modules registered
// (relay.Server implements it).
type Extras interface {
	StreamFilterNames() []string
	StreamFilter(name, value string) (func(*protocol.Event) bool, bool, error)
}

// ParseFilterWith parses v as ParseFilter does, after taking out the
// extra parameters x knows (each given once), whose tests it adds to the
// filter.
func ParseFilterWith(v url.Values, x Extras) (*Filter, error) {
	var reqs []func(*protocol.Event) bool
	for _, name := range x.StreamFilterNames() {
		vals, ok := v[name]
		if !ok {
			continue
		}
		if len(vals) != 1 {
			return nil, protocol.Errorf(CodeBadParameter, "parameter %q given %d times", name, len(vals))
		}
		keep, _, err := x.StreamFilter(name, vals[0])
		if err != nil {
			return nil, err
		}
		reqs = append(reqs, keep)
		w := make(url.Values, len(v))
		for k, x := range v {
			if k != name {
				w[k] = x
			}
		}
		v = w
	}
	f, err := ParseFilter(v)
	if err != nil {
		return nil, err
	}
	for _, r := range reqs {
		f.Require(r)
	}
	return f, nil
}
