// Package redact is the relay's side of withheld events (SPEC §21.8):
// operator-side deletion of an event's body, recorded in the log as a
// kind 25 signed by a relay key, its transparency-log entry kept.
//
// The pure part lives where every view already excludes revoked events:
// the composed state (relay/state) counts a kind 25 by one of its
// Redactors as a revocation of the events it names, and a tombstone as an
// event of the set that is in no view. The core answers 451 and leaves
// withheld events out of its lists and exports (relay/visibility.go). This
// module adds what runs while the relay serves: it keeps withheld events
// out of the reconciliation index (so no peer is told to fetch what will
// never be served), replaces the body of an event a redaction it honors
// names with a tombstone (as anp2 redact does on the redacting relay),
// refuses a publish of a withheld event with the 451, lists the withheld
// events at GET /withheld and counts them in /metrics.
package redact

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay"
	"github.com/anp2net/relay/relay/eventlog"
	"github.com/anp2net/relay/relay/reconcile"
)

// Module is the redaction module.
type Module struct {
	core *relay.Server
	// due carries the ids whose stored body is to become a tombstone
	// (bounded: a redaction names few events; an id dropped when it is
	// full is taken up at the next start).
	due chan string
}

// dueCap bounds the ids waiting for their tombstone (64-byte strings:
// about 256 KiB).
const dueCap = 4096

// NewModule returns the module.
func NewModule() *Module { return &Module{due: make(chan string, dueCap)} }

// redactor is a log that can replace a body with a tombstone (both
// backends).
type redactor interface {
	Redact(ctx context.Context, id string, tombstone []byte) error
}

// Name is "redact".
func (m *Module) Name() string { return "redact" }

// Mount registers the commit hook, the publish gate, GET /withheld and
// the metric.
func (m *Module) Mount(core *relay.Server) error {
	m.core = core
	core.OnCommit(m.commit)
	core.OnPublish(m.gate)
	core.Route(http.MethodGet, "/withheld", m.list)
	core.AddMetrics(m.metrics)
	return nil
}

// commit runs after the state has folded batch: an event the state now
// withholds (named by a counted redaction, before or in this batch) leaves
// the reconciliation index, into which the core put it.
func (m *Module) commit(batch []eventlog.Committed) {
	st := m.core.State()
	for _, c := range batch {
		e := c.Event
		if _, ok := st.Withheld(e.ID); ok {
			m.core.Index().Remove(relay.ItemOf(e))
			m.schedule(e.ID)
		}
		if e.Kind != protocol.KindRedaction || !st.Redactor(e.AgentID) {
			continue
		}
		for _, id := range e.TagValues("e") {
			if w, ok := st.Withheld(id); ok && w.CreatedAt != 0 {
				it := reconcile.Item{CreatedAt: w.CreatedAt}
				if _, err := hex.Decode(it.ID[:], []byte(id)); err == nil {
					m.core.Index().Remove(it)
				}
				m.schedule(id)
			}
		}
	}
}

// schedule queues id for its tombstone, never blocking the commit hook.
func (m *Module) schedule(id string) {
	select {
	case m.due <- id:
	default:
		m.core.Config().Logger.Warn("redact: tombstone queue full; the body is withheld and replaced at the next start", "event", id)
	}
}

// Run replaces with tombstones the stored bodies of the events the state
// withholds (a redaction this relay honors names a body it holds, SPEC
// §21.8): those known at start, then each as its redaction or the event
// commits. Reads withhold the body from the moment the state does; this
// takes it out of the log as anp2 redact does.
func (m *Module) Run(ctx context.Context) {
	rd, ok := m.core.Log().(redactor)
	if !ok {
		return
	}
	for _, id := range m.core.State().WithheldIDs() {
		m.tombstone(ctx, rd, id)
	}
	for {
		select {
		case <-ctx.Done():
			return
		case id := <-m.due:
			m.tombstone(ctx, rd, id)
		}
	}
}

// tombstone replaces the stored body of id, when the log holds one.
func (m *Module) tombstone(ctx context.Context, rd redactor, id string) {
	st, err := m.core.Log().Get(ctx, id)
	if err != nil {
		return // not stored here (or the log is closing)
	}
	if _, _, done := eventlog.WithheldOf(st.Body); done {
		return
	}
	e, err := protocol.DecodeJSON(st.Body)
	w, ok := m.core.State().Withheld(id)
	if err != nil || !ok {
		return
	}
	w.CreatedAt = e.CreatedAt
	// ErrWithheld: another process over the same PostgreSQL log was first.
	if err := rd.Redact(ctx, id, eventlog.Tombstone(id, w)); err != nil && ctx.Err() == nil && !errors.Is(err, eventlog.ErrWithheld) {
		m.core.Config().Logger.Warn("redact: the body of a withheld event stays in the log", "event", id, "err", err)
	}
}

// gate refuses a direct publish of a withheld event with its 451.
func (m *Module) gate(_ context.Context, e *protocol.Event, _ time.Time) error {
	if w, ok := m.core.State().Withheld(e.ID); ok {
		return relay.WithheldError(e.ID, w)
	}
	return nil
}

// Entry is one row of GET /withheld.
type Entry struct {
	ID        string `json:"id"`
	Reason    string `json:"reason"`
	Redaction string `json:"redaction"`
}

// Answer is the body of GET /withheld.
type Answer struct {
	// Redactors are the relay keys whose kind 25s count here (the relay's
	// own and those its operator honors): what a replay needs to derive
	// this relay's state (state.Options.Redactors).
	Redactors []string `json:"redactors"`
	// Withheld lists every event this relay withholds, by id.
	Withheld []Entry `json:"withheld"`
}

// list answers GET /withheld.
func (m *Module) list(c echo.Context) error {
	st := m.core.State()
	ids := st.WithheldIDs()
	slices.Sort(ids)
	out := Answer{Redactors: relay.Redactors(m.core.Config()), Withheld: make([]Entry, 0, len(ids))}
	slices.Sort(out.Redactors)
	out.Redactors = slices.Compact(out.Redactors)
	for _, id := range ids {
		w, _ := st.Withheld(id)
		out.Withheld = append(out.Withheld, Entry{ID: id, Reason: w.Reason, Redaction: w.Redaction})
	}
	return c.JSON(http.StatusOK, out)
}

func (m *Module) metrics(w io.Writer) {
	fmt.Fprintf(w, "# HELP anp2_withheld_events Events whose body this relay withholds (SPEC §21.8).\n# TYPE anp2_withheld_events gauge\nanp2_withheld_events %d\n",
		len(m.core.State().WithheldIDs()))
}
