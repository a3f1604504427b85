package delivery

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/anp2net/relay/protocol"
	"github.com/labstack/echo/v4"
)

// hit is a trigger that matched an event, with the event's throttle key
// for it.
type hit struct {
	t           *storedTrigger
	it          *matchItem
	throttleKey string
	dedupKey    string
}

// evaluate runs the triggers' conditions and filters over items, outside
// any transaction, and returns the matches in order. Each owner's filters
// have a budget per event (SPEC §20.2): RegexWork units of regex work
// (program size times bytes scanned, counted before a regex runs) and
// FilterBudget of wall time. The trigger that would cross either
// delivers nothing for that event and is paused, and that owner's other
// filtered triggers are passed over for that event.
func (m *Module) evaluate(ix *index, items []matchItem) []hit {
	var hits []hit
	var over []*storedTrigger
	var spent map[string]time.Duration
	var work map[string]int64
	for i := range items {
		it := &items[i]
		cands := ix.candidates(it.ev)
		if len(cands) == 0 {
			continue
		}
		dc := docCache{e: it.ev}
		clear(spent)
		clear(work)
		for _, t := range cands {
			if it.seq <= t.FromSeq {
				continue
			}
			var ok bool
			if len(t.Spec.Filter) == 0 {
				unlimited := int64(math.MaxInt64)
				ok = t.Spec.matchOn(&dc, &unlimited)
			} else {
				if spent == nil {
					spent, work = map[string]time.Duration{}, map[string]int64{}
				}
				w, seen := work[t.Owner]
				if !seen {
					w = m.opts.RegexWork
				}
				if w < 0 || spent[t.Owner] > m.opts.FilterBudget {
					m.overBudget.Add(1)
					continue // this owner's budget for the event is spent
				}
				start := time.Now()
				ok = t.Spec.matchOn(&dc, &w)
				work[t.Owner] = w
				if spent[t.Owner] += time.Since(start); w < 0 || spent[t.Owner] > m.opts.FilterBudget {
					over = append(over, t)
					m.overBudget.Add(1)
					continue
				}
			}
			if !ok || !m.core.Sees(t.Owner, it.ev) {
				continue
			}
			hits = append(hits, hit{t: t, it: it, throttleKey: t.Spec.throttleKeyOn(&dc), dedupKey: t.Spec.dedupKeyOn(&dc)})
		}
	}
	if len(over) > 0 {
		m.pause(over)
	}
	return hits
}

// docCache is an event's content parsed as JSON, once for all the
// triggers that filter it.
type docCache struct {
	e      *protocol.Event
	doc    any
	parsed bool
}

func (d *docCache) get() any {
	if !d.parsed {
		d.doc, d.parsed = content(d.e), true
	}
	return d.doc
}

// pause pauses the triggers in over (SPEC §20.2): they match nothing
// until their owner resumes them. The pause is stored, so it outlives a
// restart; a failure to store it is logged and the trigger is paused for
// this process.
func (m *Module) pause(over []*storedTrigger) {
	now := m.core.Now()
	reason := fmt.Sprintf("filter_budget_exceeded: this owner's filters would take over %d units of regex work or %s on one event", m.opts.RegexWork, m.opts.FilterBudget)
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, t := range over {
		cur, ok := m.trigs[t.ID]
		if !ok || cur.PausedAt != 0 {
			continue
		}
		p := *cur
		p.PausedAt, p.PausedReason = now, reason
		if _, err := m.store.db.ExecContext(context.Background(), `UPDATE triggers SET paused_at = ?, paused_reason = ? WHERE id = ?`,
			p.PausedAt, p.PausedReason, p.ID); err != nil {
			m.log.Warn("delivery: storing a pause failed", "trigger", p.ID, "err", err)
		}
		m.trigs[p.ID] = &p
		m.paused.Add(1)
		m.log.Info("delivery: trigger paused", "trigger", p.ID, "owner", p.Owner, "reason", reason)
		if err := m.noticePause(&p); err != nil {
			m.log.Warn("delivery: queueing a pause notice failed", "trigger", p.ID, "err", err)
		}
	}
	m.ix.Store(newIndex(m.trigs))
	m.wakeDispatcher()
}

// PauseNotice is the body of the notice a webhook trigger's target gets
// when the trigger is paused (SPEC §20.2), signed like a delivery.
type PauseNotice struct {
	Notice    string `json:"notice"` // "trigger_paused"
	TriggerID string `json:"trigger_id"`
	PausedAt  int64  `json:"paused_at"`
	Reason    string `json:"reason"`
}

// noticePause queues the pause notice of webhook trigger t as a delivery
// of its own (owner t's, with no event; retried like any delivery; one
// per pause). An A2A target gets none: its owner sees the pause in GET
// /triggers.
func (m *Module) noticePause(t *storedTrigger) error {
	if t.Spec.Target == nil || t.Spec.Target.Type != TargetWebhook {
		return nil
	}
	body, err := json.Marshal(PauseNotice{Notice: "trigger_paused", TriggerID: t.ID, PausedAt: t.PausedAt, Reason: t.PausedReason})
	if err != nil {
		return err
	}
	now := m.now()
	key := IdempotencyKey("pause:"+strconv.FormatInt(t.PausedAt, 10), t.ID)
	_, err = m.store.db.ExecContext(context.Background(), `INSERT INTO deliveries(`+deliveryCols+`, owner, throttle_key, body, token)
		VALUES (?, ?, ?, '', 0, ?, 0, ?, 1, 0, ?, 0, '', ?, ?, ?, '', ?, '') ON CONFLICT(idem_key) DO NOTHING`,
		newID(), key, t.ID, t.Spec.Target.URL, StatusPending, now, now, now, t.Owner, body)
	return err
}

// reasonDisabled is the paused_reason of a trigger its owner disabled.
const reasonDisabled = "disabled: enabled is false (PATCH /triggers/{id} {\"enabled\": true} resumes it)"

// resumeTrigger is POST /triggers/{id}/resume: a paused trigger of the
// caller matches again, the events stored from then on.
func (m *Module) resumeTrigger(c echo.Context) error {
	owner, err := m.reader(c)
	if err != nil {
		return err
	}
	v, err := m.setEnabled(c.Request().Context(), owner, c.Param("id"), true)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, v)
}

// patchTrigger is PATCH /triggers/{id} {"enabled": bool}: false pauses
// the trigger without deleting it (PAP's enabled), true resumes it.
func (m *Module) patchTrigger(c echo.Context) error {
	owner, err := m.reader(c)
	if err != nil {
		return err
	}
	body, err := readDoc(c)
	if err != nil {
		return err
	}
	var p struct {
		Enabled *bool `json:"enabled"`
	}
	if err := strictDecode(body, &p, "PATCH body"); err != nil {
		return err
	}
	if p.Enabled == nil {
		return bad("PATCH /triggers/{id} takes {\"enabled\": true|false}")
	}
	v, err := m.setEnabled(c.Request().Context(), owner, c.Param("id"), *p.Enabled)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, v)
}

// setEnabled resumes (from the matcher's position on) or disables
// owner's trigger id; a trigger already in that state is left as it is.
func (m *Module) setEnabled(ctx context.Context, owner, id string, enabled bool) (triggerView, error) {
	m.matchMu.Lock() // it starts where the matcher stands
	defer m.matchMu.Unlock()
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.trigs[id]
	if !ok || t.Owner != owner {
		return triggerView{}, protocol.Errorf(CodeTriggerNotFound, "no trigger %q of yours", clip(id))
	}
	if enabled == (t.PausedAt == 0) {
		return viewOf(t), nil
	}
	p := *t
	if enabled {
		p.PausedAt, p.PausedReason, p.FromSeq = 0, "", max(t.FromSeq, m.cursor)
	} else {
		p.PausedAt, p.PausedReason = m.core.Now(), reasonDisabled
	}
	if _, err := m.store.db.ExecContext(ctx, `UPDATE triggers SET paused_at = ?, paused_reason = ?, from_seq = ? WHERE id = ?`,
		p.PausedAt, p.PausedReason, p.FromSeq, id); err != nil {
		return triggerView{}, fmt.Errorf("update trigger: %w", err)
	}
	m.trigs[id] = &p
	m.ix.Store(newIndex(m.trigs))
	return viewOf(&p), nil
}
