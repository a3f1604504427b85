package delivery

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"sync"
	"time"

	_ "modernc.org/sqlite" // the relay's SQLite driver
)

// Statuses of a delivery (seed 000 §5.1).
const (
	StatusPending    = "pending"
	StatusDispatched = "dispatched"
	StatusLocked     = "locked"
	StatusDelivered  = "delivered"
	StatusEscalated  = "escalated"
	StatusFailed     = "failed"
	// StatusAwaitingApproval: a high-risk invocation waits for its
	// owner's approval (seed 002 §5, SPEC §16).
	StatusAwaitingApproval = "awaiting_approval"
)

// Statuses lists every status, in state-machine order.
var Statuses = []string{StatusAwaitingApproval, StatusPending, StatusDispatched, StatusLocked, StatusDelivered, StatusEscalated, StatusFailed}

const schema = `
CREATE TABLE IF NOT EXISTS triggers(
  id TEXT PRIMARY KEY, owner TEXT NOT NULL, spec TEXT NOT NULL,
  from_seq INTEGER NOT NULL, created_at INTEGER NOT NULL,
  paused_at INTEGER NOT NULL DEFAULT 0, paused_reason TEXT NOT NULL DEFAULT '');
CREATE INDEX IF NOT EXISTS triggers_owner ON triggers(owner);
CREATE TABLE IF NOT EXISTS deliveries(
  id TEXT PRIMARY KEY, idem_key TEXT NOT NULL UNIQUE,
  trigger_id TEXT NOT NULL, owner TEXT NOT NULL, event_id TEXT NOT NULL, seq INTEGER NOT NULL,
  target TEXT NOT NULL, throttle_key TEXT NOT NULL, depth INTEGER NOT NULL,
  status TEXT NOT NULL, owner_lease INTEGER NOT NULL, attempts INTEGER NOT NULL,
  next_at INTEGER NOT NULL, deadline INTEGER NOT NULL, last_error TEXT NOT NULL,
  created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL,
  body BLOB, token TEXT NOT NULL DEFAULT '', target_type TEXT NOT NULL DEFAULT 'webhook');
CREATE TABLE IF NOT EXISTS push_configs(
  task_id TEXT NOT NULL, id TEXT NOT NULL, url TEXT NOT NULL, token TEXT NOT NULL,
  created_at INTEGER NOT NULL, PRIMARY KEY (task_id, id));
CREATE INDEX IF NOT EXISTS deliveries_due ON deliveries(status, next_at);
CREATE INDEX IF NOT EXISTS deliveries_waiting ON deliveries(owner, next_at) WHERE status IN ('pending', 'escalated');
CREATE INDEX IF NOT EXISTS deliveries_owner ON deliveries(owner, created_at);
DROP INDEX IF EXISTS deliveries_throttle;
CREATE TABLE IF NOT EXISTS manifests(
  owner TEXT NOT NULL, id TEXT NOT NULL, doc TEXT NOT NULL, created_at INTEGER NOT NULL,
  PRIMARY KEY (owner, id));
CREATE TABLE IF NOT EXISTS audit(
  n INTEGER PRIMARY KEY AUTOINCREMENT, owner TEXT NOT NULL, at INTEGER NOT NULL, action TEXT NOT NULL,
  delivery_id TEXT NOT NULL, trigger_id TEXT NOT NULL, event_id TEXT NOT NULL, agent TEXT NOT NULL,
  risk TEXT NOT NULL, detail TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS audit_owner ON audit(owner, n);
CREATE INDEX IF NOT EXISTS deliveries_throttled ON deliveries(trigger_id, throttle_key, created_at) WHERE throttle_key <> '';
CREATE TABLE IF NOT EXISTS cursor(k INTEGER PRIMARY KEY CHECK (k = 1), seq INTEGER NOT NULL);
`

// store is the durable queue: one SQLite file, one writer connection.
// WAL with synchronous NORMAL: a committed transaction survives a killed
// process; a power loss may roll back the last ones, which the queue
// tolerates (the cursor rolls back with the deliveries it queued, so the
// matcher queues them again from the fsynced log, and a rolled-back
// outcome only means one more attempt, which at-least-once allows).
type store struct {
	db *sql.DB
	// ck is checkpointer's connection; ckDone closes when it has left.
	ck     *sql.DB
	ckDone chan struct{}
	// ops feeds the group-commit writer (cas); quit and done stop it.
	ops        chan *casOp
	quit, done chan struct{}
	// stmts are the hot queries, prepared once (prepare); read-only after.
	stmts map[string]*sql.Stmt
	// closeOnce makes close idempotent: Run closes the queue when it
	// ends, Module.Close when Run never ran.
	closeOnce sync.Once
	closeErr  error
}

func openStore(path string) (*store, error) {
	q := url.Values{}
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(NORMAL)")
	q.Add("_pragma", "busy_timeout(10000)")
	// No checkpoint in a commit: it would hold the one writer connection
	// through its fsync (a latency spike for every transition waiting);
	// checkpointer runs them on a connection of its own.
	q.Add("_pragma", "wal_autocheckpoint(0)")
	// 32 MiB of page cache (the default 2 MiB is smaller than the
	// idempotency-key index of a busy day's queue, whose inserts land on
	// random pages: each miss was a read from the file).
	q.Add("_pragma", "cache_size(-32768)")
	q.Set("_txlock", "immediate")
	db, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("open delivery store: %w", err)
	}
	db.SetMaxOpenConns(1)
	ckq := url.Values{}
	ckq.Add("_pragma", "busy_timeout(10000)")
	ck, err := sql.Open("sqlite", "file:"+path+"?"+ckq.Encode())
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("open delivery store: %w", err)
	}
	ck.SetMaxOpenConns(1)
	fail := func(what string, err error) (*store, error) {
		db.Close()
		ck.Close()
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if _, err := db.Exec(schema); err != nil {
		return fail("delivery schema", err)
	}
	if err := migrate(db); err != nil {
		return fail("delivery schema", err)
	}
	s := &store{db: db, ck: ck, ops: make(chan *casOp, maxGroup), quit: make(chan struct{}), done: make(chan struct{}),
		ckDone: make(chan struct{})}
	if err := s.prepare(); err != nil {
		return fail("delivery store", err)
	}
	go s.writer()
	go s.checkpointer()
	return s, nil
}

// checkpointInterval is how often checkpointer copies the WAL into the
// database file.
const checkpointInterval = 250 * time.Millisecond

// checkpointer runs a PASSIVE checkpoint (it never waits for, nor
// blocks, the writer) every checkpointInterval on its own connection
// until close, in place of SQLite's automatic one in the committing
// transaction. The WAL starts over at the first commit after a
// checkpoint that copied it all.
func (s *store) checkpointer() {
	defer close(s.ckDone)
	t := time.NewTicker(checkpointInterval)
	defer t.Stop()
	for {
		select {
		case <-s.quit:
			return
		case <-t.C:
			_, _ = s.ck.Exec(`PRAGMA wal_checkpoint(PASSIVE)`)
		}
	}
}

// migrate adds the columns a queue made by an older relay lacks:
// target_type (every older delivery is a webhook's), and a trigger's
// pause (none was paused).
func migrate(db *sql.DB) error {
	for _, c := range []struct{ table, col, def string }{
		{"deliveries", "target_type", `TEXT NOT NULL DEFAULT 'webhook'`},
		{"triggers", "paused_at", `INTEGER NOT NULL DEFAULT 0`},
		{"triggers", "paused_reason", `TEXT NOT NULL DEFAULT ''`},
		{"deliveries", "dedup_key", `TEXT NOT NULL DEFAULT ''`},
		{"deliveries", "agent", `TEXT NOT NULL DEFAULT ''`},
		{"deliveries", "risk", `TEXT NOT NULL DEFAULT ''`},
	} {
		var n int
		if err := db.QueryRow(`SELECT count(*) FROM pragma_table_info('`+c.table+`') WHERE name = ?`, c.col).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			if _, err := db.Exec(`ALTER TABLE ` + c.table + ` ADD COLUMN ` + c.col + ` ` + c.def); err != nil {
				return err
			}
		}
	}
	// The indexes on added columns come after them.
	_, err := db.Exec(`CREATE INDEX IF NOT EXISTS deliveries_dedup ON deliveries(trigger_id, dedup_key) WHERE dedup_key <> '';
		CREATE INDEX IF NOT EXISTS deliveries_approval ON deliveries(deadline) WHERE status = 'awaiting_approval';
		CREATE INDEX IF NOT EXISTS deliveries_agent ON deliveries(owner, agent, created_at) WHERE agent <> ''`)
	return err
}

func (s *store) close() error {
	s.closeOnce.Do(func() {
		close(s.quit)
		<-s.done
		<-s.ckDone
		s.ck.Close()
		s.closeErr = s.db.Close()
	})
	return s.closeErr
}

// cursor returns the last log sequence matched against the triggers, and
// whether one was ever recorded.
func (s *store) cursor(ctx context.Context) (int64, bool, error) {
	var seq int64
	err := s.db.QueryRowContext(ctx, `SELECT seq FROM cursor WHERE k = 1`).Scan(&seq)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	return seq, err == nil, err
}

// storedTrigger is a row of triggers.
type storedTrigger struct {
	ID        string `json:"id"`
	Owner     string `json:"owner"`
	FromSeq   int64  `json:"from_seq"`
	CreatedAt int64  `json:"created_at"`
	// PausedAt is when the trigger was paused (unix seconds), 0 while
	// active; PausedReason says why (SPEC §20.2).
	PausedAt     int64  `json:"paused_at,omitempty"`
	PausedReason string `json:"paused_reason,omitempty"`
	Spec         *Spec  `json:"-"`
	raw          string
}

func (s *store) triggers(ctx context.Context, allowHTTP bool) ([]*storedTrigger, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id, owner, spec, from_seq, created_at, paused_at, paused_reason FROM triggers`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*storedTrigger
	for rows.Next() {
		t := &storedTrigger{}
		if err := rows.Scan(&t.ID, &t.Owner, &t.raw, &t.FromSeq, &t.CreatedAt, &t.PausedAt, &t.PausedReason); err != nil {
			return nil, err
		}
		if t.Spec, err = ParseSpec([]byte(t.raw), true); err != nil {
			return nil, fmt.Errorf("stored trigger %s: %w", t.ID, err)
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// Delivery is one row of the queue, as GET /deliveries shows it.
type Delivery struct {
	ID             string `json:"id"`
	IdempotencyKey string `json:"idempotency_key"`
	TriggerID      string `json:"trigger_id"`
	EventID        string `json:"event_id"`
	Seq            int64  `json:"seq"`
	Target         string `json:"target"`
	TargetType     string `json:"target_type"`
	Depth          int    `json:"depth"`
	Status         string `json:"status"`
	OwnerLease     int64  `json:"owner_lease"`
	Attempts       int    `json:"attempts"`
	NextAttemptAt  int64  `json:"next_attempt_at_ms"`
	Deadline       int64  `json:"deadline_ms"`
	LastError      string `json:"last_error"`
	CreatedAt      int64  `json:"created_at_ms"`
	UpdatedAt      int64  `json:"updated_at_ms"`
	// DeduplicationKey is the trigger's deduplication_key value for the
	// event ("" without one); Agent the manifest it invokes and Risk its
	// effective risk level ("" for a trigger with a direct target).
	DeduplicationKey string `json:"deduplication_key,omitempty"`
	Agent            string `json:"agent,omitempty"`
	Risk             string `json:"risk_level,omitempty"`
}

const deliveryCols = `id, idem_key, trigger_id, event_id, seq, target, depth, status, owner_lease, attempts, next_at, deadline, last_error, created_at, updated_at`

// viewCols are the columns scanDelivery reads.
const viewCols = deliveryCols + `, target_type, dedup_key, agent, risk`

func scanDelivery(sc interface{ Scan(...any) error }) (*Delivery, error) {
	d := &Delivery{}
	err := sc.Scan(&d.ID, &d.IdempotencyKey, &d.TriggerID, &d.EventID, &d.Seq, &d.Target, &d.Depth, &d.Status,
		&d.OwnerLease, &d.Attempts, &d.NextAttemptAt, &d.Deadline, &d.LastError, &d.CreatedAt, &d.UpdatedAt, &d.TargetType, &d.DeduplicationKey, &d.Agent, &d.Risk)
	return d, err
}

// list returns owner's deliveries, newest first, optionally of one status.
func (s *store) list(ctx context.Context, owner, status string, limit int) ([]*Delivery, error) {
	q := `SELECT ` + viewCols + ` FROM deliveries WHERE owner = ?`
	args := []any{owner}
	if status != "" {
		q += ` AND status = ?`
		args = append(args, status)
	}
	q += ` ORDER BY created_at DESC, seq DESC, id LIMIT ?`
	rows, err := s.db.QueryContext(ctx, q, append(args, limit)...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []*Delivery{}
	for rows.Next() {
		d, err := scanDelivery(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, rows.Err()
}

// get returns one delivery, or nil.
func (s *store) get(ctx context.Context, id string) (*Delivery, error) {
	d, err := scanDelivery(s.db.QueryRowContext(ctx, `SELECT `+viewCols+` FROM deliveries WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	return d, err
}

// counts returns the number of deliveries per status.
func (s *store) counts(ctx context.Context) (map[string]int64, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT status, count(*) FROM deliveries GROUP BY status`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var st string
		var n int64
		if err := rows.Scan(&st, &n); err != nil {
			return nil, err
		}
		out[st] = n
	}
	return out, rows.Err()
}

// casOp is one transition waiting for the group-commit writer.
type casOp struct {
	id    string
	lease int64
	from  []string
	set   string
	args  []any
	ok    bool
	err   error
	// extra runs in the transition's transaction when it applied.
	extra func(context.Context, execer) error
	// after is told the outcome.
	after func(ok bool, err error)
}

// finish reports op's outcome to its caller.
func (op *casOp) finish() { op.after(op.ok, op.err) }

// casAsync applies one state transition if the row still holds lease and
// one of the from statuses, and tells after whether it did (false: a
// stale lease or a state already moved on, seed 000 §6.3). It does not
// wait: the transition joins the writer's next group (one transaction
// for all that wait, each still a compare-and-swap of its own; casAsync
// blocks only while the writer's queue is full), and after is called, on
// the writer's goroutine, once that group has committed or failed.
func (s *store) casAsync(ctx context.Context, after func(bool, error), id string, lease int64, from []string, set string, args ...any) {
	s.casAsyncX(ctx, after, nil, id, lease, from, set, args...)
}

// casAsyncX is casAsync with extra, run in the same transaction when the
// transition applies (an audit record).
func (s *store) casAsyncX(ctx context.Context, after func(bool, error), extra func(context.Context, execer) error, id string, lease int64, from []string, set string, args ...any) {
	op := &casOp{id: id, lease: lease, from: from, set: set, args: args, after: after, extra: extra}
	select {
	case s.ops <- op: // first choice, even once ctx is done (a shutdown)
		return
	default:
	}
	select {
	case s.ops <- op:
	case <-ctx.Done():
		after(false, ctx.Err())
	case <-s.quit:
		after(false, errors.New("delivery store closed"))
	}
}

// maxGroup is the most transitions one writer transaction commits.
const maxGroup = 256

// writer commits waiting transitions in groups until close.
func (s *store) writer() {
	defer close(s.done)
	batch := make([]*casOp, 0, maxGroup)
	for {
		select {
		case op := <-s.ops:
			batch = append(batch[:0], op)
		case <-s.quit:
			// The outcomes already handed over still commit (else their
			// deliveries would be sent again after the restart).
			batch = batch[:0]
			for len(s.ops) > 0 {
				batch = append(batch, <-s.ops)
			}
			err := s.commitGroup(batch)
			for _, op := range batch {
				if err != nil {
					op.ok, op.err = false, err
				}
				op.finish()
			}
			return
		}
	fill:
		for len(batch) < maxGroup {
			select {
			case op := <-s.ops:
				batch = append(batch, op)
			default:
				break fill
			}
		}
		err := s.commitGroup(batch)
		for _, op := range batch {
			if err != nil {
				op.ok, op.err = false, err
			}
			op.finish()
		}
	}
}

// commitGroup runs the batch's transitions in one transaction.
func (s *store) commitGroup(batch []*casOp) error {
	ctx := context.Background() // one caller's end must not undo the others'
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	for _, op := range batch {
		if op.ok, err = s.casOn(ctx, tx, op.id, op.lease, op.from, op.set, op.args...); err != nil {
			return err
		}
		if op.ok && op.extra != nil {
			if err := op.extra(ctx, tx); err != nil {
				return err
			}
		}
	}
	return tx.Commit()
}

// The state transitions: the statuses they start from, and what they
// set.
var (
	fromPending   = []string{StatusPending}
	fromEscalated = []string{StatusEscalated}
	// An attempt's outcome is taken from dispatched (a first attempt),
	// escalated (a retry) or locked (an attempt a relay before this one
	// left in its queue).
	fromAttempt = []string{StatusDispatched, StatusLocked, StatusEscalated}
)

const (
	// setClaim is pending → dispatched: handed to a worker, which sends
	// it to its target at once (SPEC §16).
	setClaim     = `status = 'dispatched', owner_lease = owner_lease + 1, deadline = ?, updated_at = ?`
	setReclaim   = `owner_lease = owner_lease + 1, next_at = ?, deadline = ?, updated_at = ?`
	setDelivered = `status = 'delivered', attempts = attempts + 1, last_error = '', updated_at = ?`
	setFailed    = `status = 'failed', attempts = attempts + 1, last_error = ?, updated_at = ?`
	setEscalate  = `status = 'escalated', owner_lease = owner_lease + 1, attempts = attempts + 1, next_at = ?, last_error = ?, updated_at = ?`
)

// The queries of the hot paths (matching, claiming, transitions).
const (
	qCursor   = `INSERT INTO cursor(k, seq) VALUES (1, ?) ON CONFLICT(k) DO UPDATE SET seq = excluded.seq`
	qThrottle = `SELECT count(*) FROM deliveries WHERE trigger_id = ? AND throttle_key = ? AND throttle_key <> '' AND created_at > ?`
	qInsert   = `INSERT INTO deliveries(` + deliveryCols + `, owner, throttle_key, target_type, dedup_key, agent, risk)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 0, ?, ?, '', ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(idem_key) DO NOTHING`
	// qDedup finds the delivery a re-announcement replaces (seed 000 §7):
	// the trigger's latest with the same deduplication key not yet sent
	// or still being sent (never one awaiting approval: its owner approves
	// the event it was shown).
	qDedup = `SELECT rowid, status FROM deliveries INDEXED BY deliveries_dedup WHERE trigger_id = ? AND dedup_key = ? AND dedup_key <> ''
		AND status IN ('pending', 'dispatched') ORDER BY created_at DESC LIMIT 1`
	qDepth    = `SELECT depth FROM deliveries WHERE id = ?`
	qWatchdog = `UPDATE deliveries SET status = ?, owner_lease = owner_lease + 1, next_at = ?,
		last_error = 'watchdog: no outcome before the deadline', updated_at = ?
		WHERE status IN (?, ?) AND deadline <= ?`
	// The claims (claim): the owners with work (a walk down the partial
	// index of waiting deliveries, which a delivery sent directly by the
	// matcher never enters: one probe per owner), an owner's oldest due
	// rows, and the compare-and-swap that takes one row; qPutOff defers a
	// row whose host's breaker is open. Both reads name the partial index
	// (the planner would rather walk deliveries_due) and repeat its
	// condition word for word, which lets SQLite use it.
	qOwners = `WITH RECURSIVE o(owner) AS (
		SELECT (SELECT min(owner) FROM deliveries INDEXED BY deliveries_waiting WHERE status IN ('pending', 'escalated'))
		UNION ALL SELECT (SELECT min(owner) FROM deliveries INDEXED BY deliveries_waiting WHERE status IN ('pending', 'escalated') AND owner > o.owner)
		FROM o WHERE o.owner IS NOT NULL)
		SELECT owner FROM o WHERE owner IS NOT NULL`
	qDueOf = `SELECT rowid, target, status FROM deliveries INDEXED BY deliveries_waiting WHERE status IN ('pending', 'escalated') AND owner = ? AND next_at <= ?
		ORDER BY next_at LIMIT ?`
	qClaimPending   = `UPDATE deliveries SET ` + setClaim + ` WHERE rowid = ? AND status = 'pending' RETURNING ` + claimCols
	qClaimEscalated = `UPDATE deliveries SET ` + setReclaim + ` WHERE rowid = ? AND status = 'escalated' RETURNING ` + claimCols
	qPutOff         = `UPDATE deliveries SET next_at = ? WHERE rowid = ? AND status IN ('pending', 'escalated')`
	claimCols       = `id, event_id, trigger_id, idem_key, target, target_type, owner_lease, attempts, body, token, agent, risk, depth`
	// qInsertFailed queues a match whose agent manifest is gone as a
	// dead letter.
	qInsertFailed = `INSERT INTO deliveries(` + deliveryCols + `, owner, throttle_key, target_type, dedup_key, agent)
		VALUES (?, ?, ?, ?, ?, ?, ?, 'failed', 1, 0, ?, 0, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(idem_key) DO NOTHING`
	// qAgentCount counts an agent's invocations since a time (its
	// manifest's limits).
	qAgentCount = `SELECT count(*) FROM deliveries INDEXED BY deliveries_agent WHERE owner = ? AND agent = ? AND agent <> '' AND created_at > ?`
)

// casQuery is the compare-and-swap UPDATE of a transition.
func casQuery(from []string, set string) string {
	q := `UPDATE deliveries SET ` + set + ` WHERE id = ? AND owner_lease = ? AND status IN (`
	for i := range from {
		if i > 0 {
			q += ","
		}
		q += "?"
	}
	return q + ")"
}

// prepare prepares the hot queries once: SQLite otherwise compiles each
// statement at every execution, which was a fifth of the delivery
// engine's CPU. It runs before anything else uses the connection.
func (s *store) prepare() error {
	qs := []string{qCursor, qThrottle, qInsert, qInsertFailed, qAgentCount, qDedup, qDepth, qWatchdog, qOwners, qDueOf, qClaimPending, qClaimEscalated, qPutOff,
		casQuery(fromAttempt, setDelivered), casQuery(fromAttempt, setFailed), casQuery(fromAttempt, setEscalate)}
	s.stmts = make(map[string]*sql.Stmt, len(qs))
	for _, q := range qs {
		st, err := s.db.Prepare(q)
		if err != nil {
			return fmt.Errorf("prepare %q: %w", q, err)
		}
		s.stmts[q] = st
	}
	return nil
}

// stmt returns q prepared for ex (the database, or a transaction: the
// statement is then bound to it), or nil when q is not a prepared one.
func (s *store) stmt(ctx context.Context, ex execer, q string) *sql.Stmt {
	st := s.stmts[q]
	if st == nil {
		return nil
	}
	if tx, ok := ex.(*sql.Tx); ok {
		return tx.StmtContext(ctx, st)
	}
	return st
}

// exec runs q on ex, prepared when it is one of the hot queries.
func (s *store) exec(ctx context.Context, ex execer, q string, args ...any) (sql.Result, error) {
	if st := s.stmt(ctx, ex, q); st != nil {
		return st.ExecContext(ctx, args...)
	}
	return ex.ExecContext(ctx, q, args...)
}

// queryRow is exec for a one-row query.
func (s *store) queryRow(ctx context.Context, ex execer, q string, args ...any) *sql.Row {
	if st := s.stmt(ctx, ex, q); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return ex.QueryRowContext(ctx, q, args...)
}

// execer is a *sql.DB or a *sql.Tx.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// casOn is cas on ex (a transaction, to make several in one commit).
func (s *store) casOn(ctx context.Context, ex execer, id string, lease int64, from []string, set string, args ...any) (bool, error) {
	all := append(args, id, lease)
	for _, f := range from {
		all = append(all, f)
	}
	res, err := s.exec(ctx, ex, casQuery(from, set), all...)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}
