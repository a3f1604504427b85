package delivery

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/httpx"
	"github.com/labstack/echo/v4"
)

// KindInvocationOutcome is the kind of the relay-signed PAP system
// events pap.agent.invocation.completed and .failed (SPEC §16): a kind of
// the protocol-extension range 11-99 no other rule uses.
const KindInvocationOutcome = 60

// Bounds of the outcome events (SPEC §16): at most OutcomeEventsPerMinute
// per owner per minute of the relay clock, counted for at most
// maxOutcomeOwners owners a minute, and at most maxOutcomeQueue waiting
// to be stored; the others are dropped and counted.
const (
	OutcomeEventsPerMinute = 60
	maxOutcomeOwners       = 4096
	maxOutcomeQueue        = 256
)

// AuditRecord is one line of GET /audit.
type AuditRecord struct {
	N          int64  `json:"n"`
	At         int64  `json:"at_ms"`
	Action     string `json:"action"`
	DeliveryID string `json:"delivery_id"`
	TriggerID  string `json:"trigger_id"`
	EventID    string `json:"event_id"`
	Agent      string `json:"agent"`
	Risk       string `json:"risk_level"`
	Detail     string `json:"detail,omitempty"`
}

// audit writes an audit record on ex (the transaction of the change it
// records).
func (m *Module) audit(ctx context.Context, ex execer, owner, action, deliveryID, triggerID, eventID, agent, risk, detail string) error {
	_, err := ex.ExecContext(ctx, `INSERT INTO audit(owner, at, action, delivery_id, trigger_id, event_id, agent, risk, detail)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`, owner, m.now(), action, deliveryID, triggerID, eventID, agent, risk, detail)
	return err
}

// getAudit is GET /audit[?limit=&before=]: the caller's audit records,
// newest first.
func (m *Module) getAudit(c echo.Context) error {
	v, err := httpx.Params(c, "limit", "before")
	if err != nil {
		return err
	}
	owner, err := m.reader(c)
	if err != nil {
		return err
	}
	limit, err := httpx.IntParam(v, "limit", 100, 1, 500)
	if err != nil {
		return err
	}
	before, err := httpx.IntParam(v, "before", 1<<62, 1, 1<<62)
	if err != nil {
		return err
	}
	rows, err := m.store.db.QueryContext(c.Request().Context(), `SELECT n, at, action, delivery_id, trigger_id, event_id, agent, risk, detail
		FROM audit WHERE owner = ? AND n < ? ORDER BY n DESC LIMIT ?`, owner, before, limit)
	if err != nil {
		return err
	}
	defer rows.Close()
	out := []AuditRecord{}
	for rows.Next() {
		var a AuditRecord
		if err := rows.Scan(&a.N, &a.At, &a.Action, &a.DeliveryID, &a.TriggerID, &a.EventID, &a.Agent, &a.Risk, &a.Detail); err != nil {
			return err
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"audit": out, "count": len(out)})
}

// waiting is a delivery awaiting approval, as approve and reject read it.
type waiting struct {
	claimed
	status   string
	deadline int64
}

func (m *Module) readWaiting(ctx context.Context, ex execer, id string) (*waiting, error) {
	w := &waiting{}
	err := ex.QueryRowContext(ctx, `SELECT id, owner, status, deadline, trigger_id, event_id, agent, risk, attempts, depth, owner_lease
		FROM deliveries WHERE id = ?`, id).Scan(&w.id, &w.owner, &w.status, &w.deadline, &w.triggerID, &w.eventID, &w.agent, &w.risk,
		&w.attempts, &w.depth, &w.lease)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	return w, err
}

func (m *Module) approveDelivery(c echo.Context) error { return m.decide(c, true) }
func (m *Module) rejectDelivery(c echo.Context) error  { return m.decide(c, false) }

// decide is POST /deliveries/{id}/approve and /reject: the owner of a
// delivery awaiting approval (a high-risk agent's invocation) lets it run
// (pending, due now) or ends it (failed, "rejected by its owner"). Each is
// audited; a rejection is an outcome (its failure event, when the
// manifest asks for one).
func (m *Module) decide(c echo.Context, approve bool) error {
	owner, err := m.reader(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	id := c.Param("id")
	tx, err := m.store.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	w, err := m.readWaiting(ctx, tx, id)
	if err != nil {
		return err
	}
	if w == nil || w.owner != owner {
		return protocol.Errorf(CodeDeliveryNotFound, "no delivery %q of yours", clip(id))
	}
	now := m.now()
	if w.status != StatusAwaitingApproval || w.deadline <= now {
		return protocol.Errorf(CodeNotAwaiting, "delivery %s is %s, not awaiting approval", id, map[bool]string{true: "past its approval deadline", false: w.status}[w.status == StatusAwaitingApproval])
	}
	var ok bool
	action := "approved"
	if approve {
		ok, err = m.store.casOn(ctx, tx, id, w.lease, []string{StatusAwaitingApproval},
			`status = 'pending', owner_lease = owner_lease + 1, next_at = ?, deadline = 0, updated_at = ?`, now, now)
	} else {
		action = "rejected"
		ok, err = m.store.casOn(ctx, tx, id, w.lease, []string{StatusAwaitingApproval},
			`status = 'failed', owner_lease = owner_lease + 1, last_error = 'rejected by its owner', updated_at = ?`, now)
	}
	if err != nil {
		return err
	}
	if !ok {
		return protocol.Errorf(CodeNotAwaiting, "delivery %s changed meanwhile", id)
	}
	if err := m.audit(ctx, tx, owner, action, id, w.triggerID, w.eventID, w.agent, w.risk, ""); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	if approve {
		m.wakeDispatcher()
	} else if mf := m.manifest(owner, w.agent); mf != nil {
		m.emitOutcome(mf, w.claimed, "rejected", "rejected by its owner")
	}
	d, err := m.store.get(ctx, id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, d)
}

// expireApprovals fails every delivery whose approval deadline passed
// (audited "expired"; a failure outcome).
func (m *Module) expireApprovals(ctx context.Context, now int64) error {
	var one int
	err := m.store.db.QueryRowContext(ctx, `SELECT 1 FROM deliveries INDEXED BY deliveries_approval
		WHERE status = 'awaiting_approval' AND deadline <= ? LIMIT 1`, now).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return nil // the usual case: no write transaction
	}
	if err != nil {
		return err
	}
	tx, err := m.store.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	rows, err := tx.QueryContext(ctx, `UPDATE deliveries SET status = 'failed', owner_lease = owner_lease + 1,
		last_error = 'approval expired', updated_at = ? WHERE status = 'awaiting_approval' AND deadline <= ?
		RETURNING id, owner, trigger_id, event_id, agent, risk, attempts, depth`, now, now)
	if err != nil {
		return err
	}
	var gone []claimed
	for rows.Next() {
		var c claimed
		if err := rows.Scan(&c.id, &c.owner, &c.triggerID, &c.eventID, &c.agent, &c.risk, &c.attempts, &c.depth); err != nil {
			rows.Close()
			return err
		}
		gone = append(gone, c)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, c := range gone {
		if err := m.audit(ctx, tx, c.owner, "expired", c.id, c.triggerID, c.eventID, c.agent, c.risk, "approval expired"); err != nil {
			return err
		}
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	for _, c := range gone {
		if mf := m.manifest(c.owner, c.agent); mf != nil {
			m.emitOutcome(mf, c, "expired", "approval expired")
		}
	}
	return nil
}

// OutcomeData is the data of an outcome event.
type OutcomeData struct {
	DeliveryID   string `json:"delivery_id"`
	InvocationID string `json:"invocation_id"`
	TriggerID    string `json:"trigger_id"`
	EventID      string `json:"event_id"`
	Agent        string `json:"agent"`
	Attempts     int    `json:"attempts"`
	// Outcome is delivered (completed), or failed, rejected or expired.
	Outcome   string `json:"outcome"`
	LastError string `json:"last_error,omitempty"`
}

// OutcomeContent is an outcome event's content: a PAP event (seed 002 §3).
type OutcomeContent struct {
	PAPVersion string      `json:"pap_version"`
	ID         string      `json:"id"`
	Type       string      `json:"type"`
	Source     string      `json:"source"`
	Time       string      `json:"time"`
	Data       OutcomeData `json:"data"`
}

// outcomeGate bounds the outcome events (fixed one-minute windows of the
// relay clock, per owner).
type outcomeGate struct {
	mu     sync.Mutex
	window int64
	counts map[string]int
}

func (g *outcomeGate) allow(owner string, nowMs int64) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if w := nowMs / 60000; w != g.window || g.counts == nil {
		g.window, g.counts = w, map[string]int{}
	}
	n, seen := g.counts[owner]
	if n >= OutcomeEventsPerMinute || (!seen && len(g.counts) >= maxOutcomeOwners) {
		return false
	}
	g.counts[owner] = n + 1
	return true
}

// emitOutcome queues the outcome event of c's invocation (outcome
// delivered, failed, rejected or expired) when its manifest asks for it,
// within the bounds above.
func (m *Module) emitOutcome(mf *Manifest, c claimed, outcome, lastErr string) {
	typ := EventFailed
	on := mf.OnFailure
	attempts := c.attempts + 1
	switch outcome {
	case "delivered":
		typ, on = EventCompleted, mf.OnComplete
	case "rejected", "expired":
		attempts = c.attempts
	}
	if on == nil || on.EmitEvent == "" {
		return
	}
	if !m.outGate.allow(c.owner, m.now()) {
		m.outcomesDropped.Add(1)
		return
	}
	now := m.core.Config().Now()
	content, _ := json.Marshal(OutcomeContent{PAPVersion: PAPVersion, ID: c.id, Type: typ, Source: "anp2.relay",
		Time: now.UTC().Format(time.RFC3339), Data: OutcomeData{DeliveryID: c.id, InvocationID: c.id, TriggerID: c.triggerID,
			EventID: c.eventID, Agent: c.agent, Attempts: attempts, Outcome: outcome, LastError: lastErr}})
	e := &protocol.Event{CreatedAt: now.Unix(), Kind: KindInvocationOutcome, Content: string(content),
		Tags: [][]string{{"t", typ}, {"p", c.owner}, {"triggered_by", c.id}}}
	select {
	case m.outcomes <- e:
	default:
		m.outcomesDropped.Add(1)
	}
}

// emitter signs and stores the queued outcome events until ctx ends.
func (m *Module) emitter(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case e := <-m.outcomes:
			e.Sign(m.key)
			if _, rejected, err := m.core.IngestMirrored(ctx, []*protocol.Event{e}); err != nil || rejected > 0 {
				if ctx.Err() == nil {
					m.log.Warn("delivery: outcome event not stored", "rejected", rejected, "err", err)
				}
				m.outcomesDropped.Add(1)
				continue
			}
			m.outcomesEmitted.Add(1)
		}
	}
}
