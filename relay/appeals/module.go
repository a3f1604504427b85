// Package appeals serves the appeal queue (seed §7.3: an appeal is
// "queued for high-trust readers"): GET /appeals lists the open appeals,
// newest first, with the flagged event and the weights that hide it, and
// every newly opened appeal is sent as a stream meta notice to the
// high-trust readers connected at that moment. The queue is a view of the
// moderation snapshot (its appeals are in the moderation digest), so it is
// derived and replayable like the rest.
package appeals

import (
	"encoding/json"
	"net/http"
	"sync"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay"
	"github.com/anp2net/relay/relay/httpx"
	"github.com/anp2net/relay/trust"
	"github.com/labstack/echo/v4"
)

// Notifier delivers meta notices to open streams (the stream module's
// hub): Readers lists the authenticated readers connected now, Notify
// sends one of them a notice.
type Notifier interface {
	Readers() []string
	Notify(agentID string, data []byte)
}

// Options configures the module.
type Options struct {
	// Notifier returns where notices go (nil: none), asked at each
	// moderation snapshot, so it may be mounted after this module.
	Notifier func() Notifier
}

// maxRemembered bounds the appeal ids remembered as already announced;
// past it, new appeals are listed but not announced.
const maxRemembered = 100_000

// Module is the appeals module.
type Module struct {
	opts Options
	core *relay.Server

	mu       sync.Mutex
	primed   bool
	notified map[string]bool // appeal ids open at the previous snapshot
}

var _ relay.Module = (*Module)(nil)

// NewModule returns the appeals module.
func NewModule(opts Options) *Module { return &Module{opts: opts, notified: map[string]bool{}} }

// Name is "appeals".
func (m *Module) Name() string { return "appeals" }

// Mount registers GET /appeals and the moderation hook that announces new
// appeals.
func (m *Module) Mount(core *relay.Server) error {
	m.core = core
	core.Route(http.MethodGet, "/appeals", m.get)
	core.OnModeration(m.announce)
	return nil
}

// item is one open appeal as GET /appeals answers it.
type item struct {
	trust.OpenAppeal
	// Event is the flagged event when the reader may see it (null
	// otherwise: ask with authentication and include_hidden=true).
	Event *protocol.Event `json:"event"`
}

// get is GET /appeals[?limit=&include_hidden=].
func (m *Module) get(c echo.Context) error {
	v, err := httpx.Params(c, "limit", "include_hidden")
	if err != nil {
		return err
	}
	limit, err := httpx.IntParam(v, "limit", 50, 1, 500)
	if err != nil {
		return err
	}
	includeHidden, err := httpx.BoolParam(v, "include_hidden")
	if err != nil {
		return err
	}
	reader, err := m.core.Reader(c)
	if err != nil {
		return err
	}
	includeHidden = includeHidden || m.core.TopReader(reader)
	snap := m.core.Views().Moderation.Current(m.core.Now())
	open := snap.OpenAppeals()
	total := len(open)
	open = open[:min(len(open), int(limit))]
	ids := make([]string, len(open))
	for i, a := range open {
		ids[i] = a.EventID
	}
	evs, err := m.core.EventsByID(c.Request().Context(), ids)
	if err != nil {
		return err
	}
	out := make([]item, len(open))
	for i, a := range open {
		out[i].OpenAppeal = a
		if e := evs[a.EventID]; e != nil && m.core.SeesHidden(reader, e, includeHidden) {
			out[i].Event = e
		}
	}
	return c.JSON(http.StatusOK, map[string]any{"appeals": out, "count": len(out), "total": total,
		"hide_threshold": snap.HideThreshold, "at": snap.Now})
}

// announce sends every appeal opened since the previous snapshot to the
// high-trust readers (relay.Server.TopReader) whose streams are open.
// The first snapshot only primes the set: a restart announces nothing old.
func (m *Module) announce(snap *trust.ModSnapshot) {
	open := snap.OpenAppeals()
	m.mu.Lock()
	var fresh []trust.OpenAppeal
	next := make(map[string]bool, len(open))
	for _, a := range open {
		if len(next) < maxRemembered {
			next[a.AppealID] = true
		}
		if m.primed && !m.notified[a.AppealID] {
			fresh = append(fresh, a)
		}
	}
	m.notified, m.primed = next, true
	m.mu.Unlock()
	if len(fresh) == 0 || m.opts.Notifier == nil {
		return
	}
	n := m.opts.Notifier()
	if n == nil {
		return
	}
	var readers []string
	for _, r := range n.Readers() {
		if m.core.TopReader(r) {
			readers = append(readers, r)
		}
	}
	for _, a := range fresh {
		b, _ := json.Marshal(map[string]any{"appeal": true, "appeal_id": a.AppealID, "event_id": a.EventID,
			"author": a.Author, "appeal_created_at": a.AppealCreatedAt, "flag_weight": a.FlagWeight,
			"hide_threshold": a.HideThreshold})
		for _, r := range readers {
			n.Notify(r, b)
		}
	}
}
