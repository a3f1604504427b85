package delivery

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strconv"
	"time"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/eventlog"
	"github.com/anp2net/relay/relay/netguard"
)

// IdempotencyKey is SHA-256(event.id + trigger.id) in hex (seed 002 §4).
func IdempotencyKey(eventID, triggerID string) string {
	sum := sha256.Sum256([]byte(eventID + triggerID))
	return hex.EncodeToString(sum[:])
}

func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// newDeliveryID is a delivery's id (its invocation id): 32 hex like
// newID, the first 8 bytes the wall clock in nanoseconds, so the queue's
// primary-key index grows at its end instead of at a random page per
// insert (each random page is one more page written per commit), the
// other 8 random.
func newDeliveryID() string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], uint64(time.Now().UnixNano()))
	_, _ = rand.Read(b[8:])
	return hex.EncodeToString(b[:])
}

// errChunk stops a log read once a chunk is full.
var errChunk = errors.New("chunk full")

// matchChunk is how many log events one matcher transaction covers at
// most, maxMatched about how many deliveries it may queue (a chunk ends
// at the first event past it).
const (
	matchChunk = 512
	maxMatched = 1024
)

// matchItem is one event the matcher considers: its sequence, the event
// and, when some trigger may match it, its stored JSON.
type matchItem struct {
	seq  int64
	ev   *protocol.Event
	body []byte
}

// matchOnce matches the events past the cursor against the triggers, one
// chunk per transaction (the deliveries and the cursor move together, so
// a crash neither loses nor repeats a match). The events come from the
// feed (the relay's commit hook) when it holds all of them, else from
// the log. It reports whether it reached the log's end.
func (m *Module) matchOnce(ctx context.Context) (bool, error) {
	m.matchMu.Lock()
	defer m.matchMu.Unlock()
	if m.ix.Load().all == 0 {
		// Nothing to match: no read, no write. A trigger created later
		// first moves the cursor to the log's end (postTrigger, skipTo).
		return true, nil
	}
	after := m.cursor
	ix := m.ix.Load()
	items, last, done, err := m.fromFeed(ix, after)
	if last == -1 {
		items, last, done, err = m.fromLog(ctx, ix, after)
	}
	if err != nil {
		return false, err
	}
	if last == after {
		return true, nil
	}
	if err := m.queue(ctx, ix, items, last); err != nil {
		return false, err
	}
	return done, nil
}

// fromFeed returns a chunk of the feed's events past after, the last
// sequence it covers and whether the feed holds no more; last is -1 when
// the feed may lack some events (the log must be read).
func (m *Module) fromFeed(ix *index, after int64) ([]matchItem, int64, bool, error) {
	evs, ok := m.feed.after(after, matchChunk)
	if !ok {
		return nil, -1, false, nil
	}
	last, cands := after, 0
	items := make([]matchItem, 0, len(evs))
	for _, c := range evs {
		if cands >= maxMatched {
			return items, last, false, nil
		}
		it := matchItem{seq: c.Seq, ev: c.Event}
		if n := len(ix.candidates(c.Event)); n > 0 {
			cands += n
			// What the log stores of it (eventlog.Record's Body).
			it.body = protocol.AppendJSON(nil, c.Event)
		}
		items = append(items, it)
		last = c.Seq
	}
	return items, last, len(evs) < matchChunk, nil
}

// fromLog reads a chunk of the log's events past after: the events, the
// last sequence it covers and whether it reached the log's end.
func (m *Module) fromLog(ctx context.Context, ix *index, after int64) ([]matchItem, int64, bool, error) {
	var items []matchItem
	last := after
	// A chunk ends at matchChunk events or once it may queue maxMatched
	// deliveries: the transaction holds the queue's one connection, and
	// the claims and outcomes wait for it.
	cands := 0
	err := m.core.Log().Export(ctx, after, func(int64) error { return nil }, func(seq int64, body []byte) error {
		if len(items) >= matchChunk || cands >= maxMatched {
			return errChunk
		}
		last = seq
		if _, _, withheld := eventlog.WithheldOf(body); withheld {
			return nil // a tombstone (SPEC §21.8) triggers nothing
		}
		var ev protocol.Event
		if json.Unmarshal(body, &ev) == nil {
			it := matchItem{seq: seq, ev: &ev}
			if n := len(ix.candidates(&ev)); n > 0 {
				cands += n
				it.body = bytes.Clone(body) // fn's body is the log's until it returns
			}
			items = append(items, it)
		}
		return nil
	})
	if err != nil && !errors.Is(err, errChunk) {
		return nil, after, false, err
	}
	return items, last, err == nil, nil
}

// queue queues the deliveries of items and moves the cursor to last, in
// one transaction; the caller holds matchMu. The triggers' conditions and
// filters are evaluated first, outside the transaction (evaluate): the
// queue's one connection is not held while a filter runs, so claims and
// outcomes go on. The deadline of a delivery the matcher sends itself is
// taken after that, when it is handed out.
func (m *Module) queue(ctx context.Context, ix *index, items []matchItem, last int64) error {
	hits := m.evaluate(ix, items)
	now := m.now()
	tx, err := m.store.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	// Deliveries the matcher sends itself (direct): each holds a slot
	// until its worker starts, or is given back if the chunk fails.
	var direct []claimed
	defer func() {
		for _, c := range direct {
			m.fair.release(c.owner, c.host, notSent, m.now())
			<-m.slots
		}
	}()
	made := 0
	queued := map[string]bool{}
	for _, h := range hits {
		n, err := m.match(ctx, tx, h, now, &direct)
		if err != nil {
			return err
		}
		if n > 0 && !queued[h.it.ev.ID] {
			// Its attempts will need the body: keep it now rather than
			// read it back from the log at the first attempt.
			queued[h.it.ev.ID] = true
			m.keepBody(h.it.ev.ID, h.it.body)
		}
		made += n
	}
	if _, err := m.store.exec(ctx, tx, qCursor, last); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	m.cursor = last
	for _, c := range direct {
		m.startWorker(ctx, c)
	}
	if made > len(direct) {
		m.wakeDispatcher()
	}
	direct = nil
	return nil
}

// skipTo moves the cursor from after to the log's end without reading
// the events between: while no trigger exists the matcher leaves the
// cursor alone, and the first trigger created starts at the end. The
// caller holds matchMu.
func (m *Module) skipTo(ctx context.Context, after int64) (bool, error) {
	var through int64
	err := m.core.Log().Export(ctx, after, func(t int64) error { through = t; return errChunk },
		func(int64, []byte) error { return errChunk })
	if err != nil && !errors.Is(err, errChunk) {
		return false, err
	}
	if through <= after {
		return true, nil
	}
	if _, err := m.store.exec(ctx, m.store.db, qCursor, through); err != nil {
		return false, err
	}
	m.cursor = through
	return true, nil
}

// match queues the delivery of a hit (a trigger that matched an event,
// evaluate) when it passes the cascade and throttle checks and is not
// already queued; it returns 1 when queued. While the queue has no
// backlog, a worker is free and the owner and target host are under
// their shares (fair), the delivery is queued locked under lease 2 with
// its deadline, as a claim would leave it (pending → dispatched → locked
// at its creation, SPEC §16), and added to direct with a slot held: the
// matcher starts its worker once the transaction has committed, saving
// the claim's transaction and a wake-up.
func (m *Module) match(ctx context.Context, tx *sql.Tx, h hit, now int64, direct *[]claimed) (int, error) {
	t, ev := h.t, h.it.ev
	depth, err := m.depth(ctx, tx, ev)
	if err != nil {
		return 0, err
	}
	if depth >= MaxCascadeDepth {
		m.cascadeRejected.Add(1)
		return 0, nil
	}
	// A throttled trigger's deliveries carry "=" and the key's value; the
	// others an empty key, which the throttle index leaves out.
	key := ""
	if th := t.Spec.Throttle; th != nil {
		key = "=" + h.throttleKey
		var n int
		err := m.store.queryRow(ctx, tx, qThrottle, t.ID, key, now-th.WindowSeconds*1000).Scan(&n)
		if err != nil {
			return 0, err
		}
		if n >= th.MaxPerWindow {
			m.throttled.Add(1)
			return 0, nil
		}
	}
	if h.dedupKey != "" {
		n, err := m.upsert(ctx, tx, h, depth, now)
		if n > 0 || err != nil {
			return n, err
		}
	}
	// The agent (seed 002 §5): its manifest gives the target, a limit on
	// invocations per window and the risk level.
	tg, agent, risk := t.Spec.Target, "", ""
	if t.Spec.Agent != "" {
		agent = t.Spec.Agent
		mf := m.manifest(t.Owner, agent)
		if mf == nil {
			// Its manifest was deleted: a dead letter its owner sees.
			_, err := m.store.exec(ctx, tx, qInsertFailed, newDeliveryID(), IdempotencyKey(ev.ID, t.ID), t.ID, ev.ID, h.it.seq, "", depth,
				now, "agent manifest "+clip(agent)+" is not registered", now, now, t.Owner, key, "", h.dedupKey, agent)
			return 0, err
		}
		tg, risk = mf.Target, mf.risk
		if l := mf.Limits; l != nil && l.MaxInvocations > 0 {
			var n int
			if err := m.store.queryRow(ctx, tx, qAgentCount, t.Owner, agent, now-int64(l.WindowSeconds)*1000).Scan(&n); err != nil {
				return 0, err
			}
			if n >= l.MaxInvocations {
				m.throttled.Add(1)
				return 0, nil
			}
		}
	}
	host := targetHost(tg.URL)
	status, lease, deadline, slot := StatusPending, int64(1), int64(0), false
	switch {
	case risk == "high":
		// Risk check: it waits for its owner's approval (no worker).
		status, deadline = StatusAwaitingApproval, now+m.opts.ApprovalTTL.Milliseconds()
	case !m.backlog.Load() && m.fair.acquire(t.Owner, host, now) == admitted:
		select {
		case m.slots <- struct{}{}:
			status, lease, deadline, slot = StatusDispatched, 2, now+m.opts.WatchdogTTL.Milliseconds(), true
		default:
			m.fair.release(t.Owner, host, notSent, now)
		}
	}
	id, idem := newDeliveryID(), IdempotencyKey(ev.ID, t.ID)
	res, err := m.store.exec(ctx, tx, qInsert,
		id, idem, t.ID, ev.ID, h.it.seq, tg.URL, depth, status, lease,
		now, deadline, now, now, t.Owner, key, tg.Type, h.dedupKey, agent, risk)
	var n int64
	if err == nil {
		n, _ = res.RowsAffected()
	}
	if err == nil && n == 1 && (risk == "medium" || risk == "high") {
		action := "invoked"
		if risk == "high" {
			action = "awaiting_approval"
		}
		err = m.audit(ctx, tx, t.Owner, action, id, t.ID, ev.ID, agent, risk, "")
	}
	if slot {
		if n == 1 {
			*direct = append(*direct, claimed{id: id, eventID: ev.ID, triggerID: t.ID, idemKey: idem,
				target: tg.URL, targetType: tg.Type, lease: lease, owner: t.Owner, host: host, agent: agent, risk: risk, depth: depth})
		} else {
			m.fair.release(t.Owner, host, notSent, now)
			<-m.slots
		}
	}
	return int(n), err
}

// upsert applies seed 000 §7 to a match with a deduplication key: when
// the trigger has a delivery with the same key not yet delivered
// (pending or dispatched), that delivery takes the new
// event instead of a new one being queued, and its deadline starts over.
// A dispatched one (an attempt under way) goes back to pending with a
// new lease, so the attempt's outcome is discarded as stale and the new
// event is sent in its place. It returns 1 when it replaced one; 0 sends
// the match on to be queued (no such delivery, or only a delivered,
// escalated or failed one: a new notification, §7).
func (m *Module) upsert(ctx context.Context, tx *sql.Tx, h hit, depth int, now int64) (int, error) {
	var rowid int64
	var status string
	err := m.store.queryRow(ctx, tx, qDedup, h.t.ID, h.dedupKey).Scan(&rowid, &status)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	ev := h.it.ev
	set := `event_id = ?, seq = ?, idem_key = ?, depth = ?, updated_at = ?, deadline = ?`
	args := []any{ev.ID, h.it.seq, IdempotencyKey(ev.ID, h.t.ID), depth, now}
	switch status {
	case StatusDispatched:
		set += `, status = 'pending', owner_lease = owner_lease + 1, next_at = ?, last_error = 'superseded by a re-announcement'`
		args = append(args, 0, now)
	default:
		args = append(args, 0)
	}
	res, err := tx.ExecContext(ctx, `UPDATE deliveries SET `+set+` WHERE rowid = ? AND status = ?`, append(args, rowid, status)...)
	if err != nil {
		return 0, err
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return 0, nil
	}
	m.upserts.Add(1)
	return 1, nil
}

// MaxCascadeDepth: an event at this depth of triggered_by links or deeper
// provokes no delivery (seed 002: "Depth ≥ 3 → reject").
const MaxCascadeDepth = 3

// cascadeGate refuses, at publish, an event whose triggered_by chain
// would reach MaxCascadeDepth (seed 002: "the dispatcher MUST reject
// events where the triggered_by chain exceeds 3 levels"). Events from
// peers and imports pass no gate; the matcher then queues nothing for
// them.
func (m *Module) cascadeGate(ctx context.Context, e *protocol.Event, _ time.Time) error {
	inv := e.TagValue("triggered_by")
	if inv == "" {
		return nil
	}
	var d int
	err := m.store.queryRow(ctx, m.store.db, qDepth, inv).Scan(&d)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return err
	}
	if d+1 >= MaxCascadeDepth {
		return protocol.Errorf(CodeCascadeTooDeep, "triggered_by %s is an invocation at depth %d; an event at depth %d or more is refused", clip(inv), d, MaxCascadeDepth)
	}
	return nil
}

// depth is ev's cascade depth: 0 without a triggered_by tag, else one more
// than the depth of the event that caused the named invocation (an
// invocation this relay does not know counts as depth 0).
func (m *Module) depth(ctx context.Context, tx *sql.Tx, ev *protocol.Event) (int, error) {
	inv := ev.TagValue("triggered_by")
	if inv == "" {
		return 0, nil
	}
	var d int
	err := m.store.queryRow(ctx, tx, qDepth, inv).Scan(&d)
	if errors.Is(err, sql.ErrNoRows) {
		return 1, nil
	}
	if err != nil {
		return 0, err
	}
	return d + 1, nil
}

// claimed is a delivery a worker owns under lease.
type claimed struct {
	id, eventID, triggerID, idemKey, target string
	targetType                              string
	lease                                   int64
	escalated                               bool
	attempts                                int
	body                                    []byte // an A2A notification's body; nil for an event
	token                                   string
	// owner and host are the delivery's shares in fair (the trigger's
	// owner, "" for an A2A notification; the target URL's host).
	owner, host string
	// agent and risk are its agent manifest and effective risk ("" for a
	// trigger with a direct target); depth its cascade depth.
	agent, risk string
	depth       int
}

// watchdog escalates every dispatched or locked delivery past its
// deadline, taking ownership with a new lease (seed 000 §6.2): a late
// acknowledgement of the old attempt then fails its compare-and-swap.
func (m *Module) watchdog(ctx context.Context, now int64) error {
	if _, err := m.store.exec(ctx, m.store.db, qWatchdog, StatusEscalated, now, now, StatusDispatched, StatusLocked, now); err != nil {
		return err
	}
	return m.expireApprovals(ctx, now)
}

// claim takes up to n due deliveries in one transaction, shared fairly
// (SPEC §20.2): the owners with due work take turns, one delivery each
// per round (starting after the owner the last claim reached), and each
// delivery must be admitted by fair (its owner's and its target host's
// shares; a host whose breaker is open has its due deliveries put off
// until the breaker half-opens). Within an owner the oldest due go first.
// An escalated delivery stays escalated, not due again before its new
// deadline; a pending one moves to locked (through dispatched: the relay
// is its own dispatcher and worker, so the two transitions are one step,
// SPEC §16). Each gets lease + 1 and a deadline; each UPDATE is the
// compare-and-swap of its row under the queue's write lock. It also
// reports whether due work was left behind for a share.
func (m *Module) claim(ctx context.Context, now int64, n int) ([]claimed, bool, error) {
	deadline := now + m.opts.WatchdogTTL.Milliseconds()
	tx, err := m.store.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, false, err
	}
	defer tx.Rollback()
	var out []claimed
	committed := false
	defer func() {
		if !committed {
			for _, c := range out {
				m.fair.release(c.owner, c.host, notSent, now)
			}
		}
	}()
	owners, err := m.dueOwners(ctx, tx)
	if err != nil {
		return nil, false, err
	}
	if len(owners) == 0 {
		return nil, false, nil
	}
	// Turns start after the last owner the previous claim reached, so
	// every owner with waiting work gets its turn however many there are.
	start := sort.Search(len(owners), func(i int) bool { return owners[i] > m.lastTurn })
	owners = append(owners[start:], owners[:start]...)
	// An owner's due deliveries are read at its first turn: its part of
	// the claim (twice an even split, at least 2, at most what its share
	// can take), so a claim reads about 2n rows however many wait. An
	// owner whose part ran out while it had more counts as work left.
	cands := make([][]candidate, len(owners))
	read := make([]bool, len(owners))
	full := make([]bool, len(owners))
	part := max(2, 2*n/len(owners)+1)
	left := false
	for more := true; more && len(out) < n; {
		more = false
		for i, o := range owners {
			if len(out) >= n {
				break
			}
			if !read[i] {
				read[i] = true
				m.lastTurn = o
				room := min(part, m.fair.room(o))
				if room <= 0 {
					left = true
					continue
				}
				if cands[i], err = m.dueOf(ctx, tx, o, now, room); err != nil {
					return nil, false, err
				}
				full[i] = len(cands[i]) == room
			}
			c, ok, err := m.takeOne(ctx, tx, &cands[i], now, deadline, &left)
			if err != nil {
				return nil, false, err
			}
			if ok {
				out = append(out, c)
			}
			more = more || len(cands[i]) > 0
		}
	}
	for i := range owners {
		left = left || (full[i] && len(cands[i]) == 0)
	}
	if err := tx.Commit(); err != nil {
		return nil, false, err
	}
	committed = true
	return out, left, nil
}

// candidate is a due delivery claim considers.
type candidate struct {
	rowid         int64
	escalated     bool
	owner, target string
}

// dueOwners lists the owners with pending or escalated deliveries, in
// order, by walking the index of waiting deliveries (one probe per
// owner, whatever the number of rows each holds).
func (m *Module) dueOwners(ctx context.Context, tx *sql.Tx) ([]string, error) {
	rows, err := m.store.stmt(ctx, tx, qOwners).QueryContext(ctx)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var o string
		if err := rows.Scan(&o); err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	return out, rows.Err()
}

// dueOf returns up to n of owner's due deliveries, oldest first.
func (m *Module) dueOf(ctx context.Context, tx *sql.Tx, owner string, now int64, n int) ([]candidate, error) {
	rows, err := m.store.stmt(ctx, tx, qDueOf).QueryContext(ctx, owner, now, n)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []candidate
	for rows.Next() {
		c := candidate{owner: owner}
		var st string
		if err := rows.Scan(&c.rowid, &c.target, &st); err != nil {
			return nil, err
		}
		c.escalated = st == StatusEscalated
		out = append(out, c)
	}
	return out, rows.Err()
}

// takeOne claims the first of cands that fair admits, dropping from cands
// those it passes over; left is set when one stays due for lack of a
// share. A delivery to a host whose breaker is open is put off until the
// breaker half-opens.
func (m *Module) takeOne(ctx context.Context, tx *sql.Tx, cands *[]candidate, now, deadline int64, left *bool) (claimed, bool, error) {
	for len(*cands) > 0 {
		cd := (*cands)[0]
		*cands = (*cands)[1:]
		host := targetHost(cd.target)
		a, until := m.fair.admit(cd.owner, host, now)
		switch a {
		case busy:
			*left = true
			continue
		case broken:
			if _, err := m.store.exec(ctx, tx, qPutOff, until, cd.rowid); err != nil {
				return claimed{}, false, err
			}
			continue
		}
		c := claimed{escalated: cd.escalated, owner: cd.owner, host: host}
		var err error
		if cd.escalated {
			err = m.store.queryRow(ctx, tx, qClaimEscalated, deadline, deadline, now, cd.rowid).Scan(claimDest(&c)...)
		} else {
			err = m.store.queryRow(ctx, tx, qClaimPending, deadline, now, cd.rowid).Scan(claimDest(&c)...)
		}
		if err != nil {
			m.fair.release(cd.owner, host, notSent, now)
			if errors.Is(err, sql.ErrNoRows) {
				continue
			}
			return claimed{}, false, err
		}
		return c, true, nil
	}
	return claimed{}, false, nil
}

// manifest returns c's agent manifest, or nil.
func (c claimed) manifest(m *Module) *Manifest {
	if c.agent == "" {
		return nil
	}
	return m.manifest(c.owner, c.agent)
}

// claimDest are the fields a claim's RETURNING claimCols fills.
func claimDest(c *claimed) []any {
	return []any{&c.id, &c.eventID, &c.triggerID, &c.idemKey, &c.target, &c.targetType, &c.lease, &c.attempts, &c.body, &c.token, &c.agent, &c.risk, &c.depth}
}

// deliver runs one claimed delivery (locked, or escalated, under c.lease
// since the claim): send, then record the outcome under the lease (a
// stale lease means the watchdog took it; the outcome is discarded).
func (m *Module) deliver(ctx context.Context, c claimed) {
	sendErr := m.send(ctx, c)
	now := m.now()
	if sendErr == nil {
		m.fair.release(c.owner, c.host, sentOK, now)
	} else {
		m.fair.release(c.owner, c.host, sentFailed, now)
	}
	from := fromAttempt
	// The outcome is handed to the group-commit writer and the worker
	// moves on: it waits neither for the commit nor for the others in its
	// group. A crash before the commit leaves the delivery locked, and the
	// restart sends it again (at least once).
	after := func(ok bool, err error) {
		if err != nil && ctx.Err() == nil {
			m.log.Warn("delivery outcome not recorded", "delivery", c.id, "err", err)
		}
		if err == nil && !ok {
			m.staleAcks.Add(1)
		}
	}
	var mf *Manifest
	if c.agent != "" {
		mf = m.manifest(c.owner, c.agent)
	}
	maxAttempts, backoff := m.opts.MaxAttempts, m.backoff(c.attempts+1)
	if mf != nil && mf.OnFailure != nil && mf.OnFailure.Retry != nil {
		r := mf.OnFailure.Retry
		maxAttempts = r.MaxAttempts
		backoff = min(time.Duration(r.BackoffSeconds)*time.Second<<min(c.attempts, 20), m.opts.MaxBackoff)
	}
	// A terminal outcome of an agent's invocation is audited (medium and
	// high risk) in the outcome's transaction, and announced as a PAP
	// system event when the manifest asks (after the commit).
	final := func(outcome, lastErr string) func(context.Context, execer) error {
		if c.agent == "" {
			return nil
		}
		return func(ctx context.Context, ex execer) error {
			if c.risk == "medium" || c.risk == "high" {
				if err := m.audit(ctx, ex, c.owner, outcome, c.id, c.triggerID, c.eventID, c.agent, c.risk, lastErr); err != nil {
					return err
				}
			}
			return nil
		}
	}
	emit := func(outcome, lastErr string) func(bool, error) {
		if mf == nil {
			return after // no manifest: nothing to announce
		}
		return func(ok bool, err error) {
			after(ok, err)
			if ok && err == nil {
				m.emitOutcome(mf, c, outcome, lastErr)
			}
		}
	}
	switch {
	case sendErr == nil:
		m.store.casAsyncX(ctx, emit("delivered", ""), final("delivered", ""), c.id, c.lease, from, setDelivered, now)
	case c.attempts+1 >= maxAttempts:
		m.store.casAsyncX(ctx, emit("failed", clipErr(sendErr)), final("failed", clipErr(sendErr)), c.id, c.lease, from, setFailed, clipErr(sendErr), now)
	default:
		// A failed attempt hands the delivery to the fallback path
		// (escalated) with a new lease, due again after the backoff.
		m.store.casAsync(ctx, after, c.id, c.lease, from, setEscalate, now+backoff.Milliseconds(), clipErr(sendErr), now)
	}
}

// backoff is the wait before attempt n+1: 1 s doubled per attempt, at
// most MaxBackoff.
func (m *Module) backoff(n int) time.Duration {
	d := time.Second << min(n-1, 20)
	return min(d, m.opts.MaxBackoff)
}

// Headers of a webhook request.
const (
	HeaderIdempotencyKey = "Idempotency-Key"
	HeaderTimestamp      = "X-ANP2-Timestamp"
	HeaderSignature      = "X-ANP2-Signature"
	HeaderRelay          = "X-ANP2-Relay"
	HeaderDelivery       = "X-ANP2-Delivery"
)

// Attempt says which delivery and which attempt a request is.
type Attempt struct {
	DeliveryID     string `json:"delivery_id"`
	InvocationID   string `json:"invocation_id"`
	TriggerID      string `json:"trigger_id"`
	IdempotencyKey string `json:"idempotency_key"`
	OwnerLease     int64  `json:"owner_lease"`
	Attempt        int    `json:"attempt"`
}

// Payload is a webhook body: the attempt's fields and the event.
type Payload struct {
	Attempt
	Event json.RawMessage `json:"event"`
}

// appendPayload appends the Payload of a and the stored event ev to b,
// the event's bytes as the log stores them (compact JSON): what an
// encoder without HTML escaping makes of Payload{a, ev}, without
// encoding the event again per delivery.
func appendPayload(b []byte, a Attempt, ev []byte) []byte {
	str := func(b []byte, name, v string) []byte {
		b = append(b, `"`+name+`":`...)
		for i := 0; i < len(v); i++ {
			if c := v[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
				q, _ := json.Marshal(v) // rare: the ids are hex
				return append(b, q...)
			}
		}
		return append(append(append(b, '"'), v...), '"')
	}
	b = append(b, '{')
	b = str(b, "delivery_id", a.DeliveryID)
	b = str(append(b, ','), "invocation_id", a.InvocationID)
	b = str(append(b, ','), "trigger_id", a.TriggerID)
	b = str(append(b, ','), "idempotency_key", a.IdempotencyKey)
	b = strconv.AppendInt(append(b, `,"owner_lease":`...), a.OwnerLease, 10)
	b = strconv.AppendInt(append(b, `,"attempt":`...), int64(a.Attempt), 10)
	b = append(append(b, `,"event":`...), ev...)
	return append(b, '}')
}

func (c claimed) attempt() Attempt {
	return Attempt{DeliveryID: c.id, InvocationID: c.id, TriggerID: c.triggerID, IdempotencyKey: c.idemKey,
		OwnerLease: c.lease, Attempt: c.attempts + 1}
}

// SignedMessage is what the webhook signature covers: the timestamp, a
// dot, and the body.
func SignedMessage(ts string, body []byte) []byte {
	return append([]byte(ts+"."), body...)
}

// send runs one attempt: a POST to the webhook, or message/send to the
// A2A agent; nil on success (a 2xx answer; for A2A, a JSON-RPC result).
func (m *Module) send(ctx context.Context, c claimed) error {
	if c.targetType == TargetA2A {
		return m.sendA2A(ctx, c)
	}
	body := c.body
	if body == nil {
		ev, err := m.eventBody(ctx, c.eventID)
		if err != nil {
			return err
		}
		body = appendPayload(make([]byte, 0, len(ev)+320), c.attempt(), ev)
	}
	status, _, err := m.post(ctx, c, c.target, body, 64<<10)
	if err != nil {
		return err
	}
	if status/100 != 2 {
		return fmt.Errorf("webhook answered %d", status)
	}
	return nil
}

// maxBodies is how many event bodies eventBody keeps.
const maxBodies = 4096

// eventBody returns the stored JSON of event id. An event matched by
// several triggers is read from the log once: bodies never change, and
// the last ones read are kept (up to maxBodies; beyond, the cache starts
// over).
func (m *Module) eventBody(ctx context.Context, id string) ([]byte, error) {
	m.bodyMu.Lock()
	b, ok := m.bodies[id]
	m.bodyMu.Unlock()
	if ok {
		return b, nil
	}
	st, err := m.core.Log().Get(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("read event: %w", err)
	}
	if _, _, withheld := eventlog.WithheldOf(st.Body); withheld {
		return nil, fmt.Errorf("event %s is withheld by the relay's operator (SPEC §21.8)", id)
	}
	m.keepBody(id, st.Body)
	return st.Body, nil
}

// keepBody caches the stored JSON of event id for eventBody.
func (m *Module) keepBody(id string, body []byte) {
	m.bodyMu.Lock()
	if m.bodies == nil || len(m.bodies) >= maxBodies {
		m.bodies = map[string][]byte{}
	}
	m.bodies[id] = body
	m.bodyMu.Unlock()
}

// post sends body to url with the delivery's headers, signed by the relay
// key, and returns the status and up to limit bytes of the answer.
func (m *Module) post(ctx context.Context, c claimed, url string, body []byte, limit int64) (int, []byte, error) {
	ts := strconv.FormatInt(m.core.Config().Now().Unix(), 10)
	sig := ed25519.Sign(m.key, SignedMessage(ts, body))
	rctx, cancel := context.WithTimeout(ctx, m.attemptTimeout(c.manifest(m)))
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(HeaderIdempotencyKey, c.idemKey)
	req.Header.Set(HeaderTimestamp, ts)
	req.Header.Set(HeaderSignature, hex.EncodeToString(sig))
	req.Header.Set(HeaderRelay, protocol.AgentIDOf(m.key))
	req.Header.Set(HeaderDelivery, c.id)
	if c.token != "" {
		req.Header.Set(HeaderA2AToken, c.token)
	}
	resp, err := m.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	ans, err := io.ReadAll(io.LimitReader(resp.Body, limit))
	// The rest is drained so the connection can be reused.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return 0, nil, fmt.Errorf("read answer: %w", err)
	}
	return resp.StatusCode, ans, nil
}

// newClient returns the webhook client: no redirects, and unless
// allowPrivate, no connection to a loopback, private, link-local or
// unspecified address, nor any other that is not public (netguard.Public:
// CGNAT, NAT64, benchmarking, reserved…; checked on the resolved address at dial time, so
// DNS cannot rebind around it). It keeps up to workers idle connections
// per host.
func newClient(allowPrivate bool, workers int) *http.Client {
	d := &net.Dialer{Timeout: 10 * time.Second}
	if !allowPrivate {
		d.Control = netguard.Control("webhook")
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DialContext = d.DialContext
	tr.Proxy = nil
	// Many triggers often share one receiver: keep a connection per
	// worker alive (the default keeps 2 per host, so the others paid a
	// new TCP connection, and a TIME_WAIT, per delivery).
	tr.MaxIdleConnsPerHost = workers
	return &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// clipErr renders an attempt's error for last_error, at most 512 bytes.
func clipErr(err error) string {
	s := err.Error()
	if len(s) > 512 {
		s = s[:512]
	}
	return s
}
