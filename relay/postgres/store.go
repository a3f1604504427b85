// Package postgres is the relay's event log on PostgreSQL (15 or newer)
// through github.com/jackc/pgx/v5, for an operator whose relay outgrows
// one machine: several relay processes may share one database.
//
// # Order and durability
//
// Every writing transaction first takes one transaction-scoped advisory
// lock (logLock), then numbers its new events from the log's highest seq.
// Writers in every process therefore commit one after another and seqs are
// dense and commit-ordered: any snapshot of the log holds exactly the seqs
// 1..n for some n, so a reader that has seen up to n misses nothing by
// reading seq > n next. An append is answered after its transaction has
// committed (synchronous_commit as the server sets it, on by default) and
// the commit hook has received it.
//
// # Several processes
//
// The hook receives every committed event once, in seq order, whichever
// process appended it: before delivering its own events a process
// delivers the ones other processes committed before them (read back from
// the log), and a listener (LISTEN anp2_log, with a poll every second as a
// fallback) delivers the others' commits while this process is idle. So
// every process folds the same events in the same order and serves the
// same derived state at the same seq.
package postgres

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/eventlog"
	"github.com/anp2net/relay/relay/eventlog/groupcommit"
)

// The log's data types are the eventlog package's (see eventlog.Log).
type (
	Committed = eventlog.Committed
	Result    = eventlog.Result
	Record    = eventlog.Record
	Filter    = eventlog.Filter
	Stored    = eventlog.Stored
	Stats     = eventlog.Stats
)

var _ eventlog.Log = (*Store)(nil)

// ErrClosed is returned by Append after Close.
var ErrClosed = errors.New("store closed")

// logLock is the advisory lock every writing transaction holds: it makes
// the writers of all processes commit one at a time, in seq order.
const logLock = 0x616e7032_6c6f6721 // "anp2log!"

// channel is the LISTEN/NOTIFY channel a commit notifies.
const channel = "anp2_log"

// copyThreshold is the number of rows from which a table's rows go in by
// COPY rather than one multi-row INSERT pipelined with the others.
const copyThreshold = 64

// Store is the PostgreSQL event log. Appends go through one writer
// goroutine per process that groups whatever is queued into a single
// transaction (group commit); reads use the connection pool.
type Store struct {
	pool   *pgxpool.Pool
	queue  chan *groupcommit.Request
	hook   atomic.Pointer[func([]Committed)]
	closed chan struct{}
	stop   context.CancelFunc
	ctx    context.Context
	wg     sync.WaitGroup
	once   sync.Once
	log    *slog.Logger

	maxBatch, bulkBatch int
	bulk                atomic.Int64
	a2aWrites           atomic.Int64 // PutA2ATask calls, to prune now and then

	// deliverMu serialises deliveries to the hook; delivered is the
	// highest seq delivered (or, before a hook is set, the point from
	// which deliveries start: see SetHook).
	deliverMu sync.Mutex
	delivered int64
}

// Open connects to the database at url (a postgres:// or postgresql://
// URL, or a libpq key=value string), brings its schema to the newest
// version and starts the writer and the listener. hook, when non-nil,
// receives every committed event (see the package doc).
func Open(ctx context.Context, url string, hook func([]Committed)) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("postgres url: %w", err)
	}
	// The writer and the listener hold one connection each; the rest
	// serve reads. pool_max_conns in url overrides.
	if !strings.Contains(url, "pool_max_conns") {
		cfg.MaxConns = max(cfg.MaxConns, 16)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect: %w", err)
	}
	_, err = migrate(ctx, conn.Conn())
	conn.Release()
	if err != nil {
		pool.Close()
		return nil, err
	}
	runCtx, cancel := context.WithCancel(context.Background())
	s := &Store{pool: pool, queue: make(chan *groupcommit.Request, 16384), closed: make(chan struct{}),
		stop: cancel, ctx: runCtx, maxBatch: 512, bulkBatch: 8192, log: slog.Default()}
	if err := pool.QueryRow(ctx, `SELECT COALESCE(MAX(seq), 0) FROM events`).Scan(&s.delivered); err != nil {
		pool.Close()
		cancel()
		return nil, fmt.Errorf("log end: %w", err)
	}
	s.SetHook(hook)
	s.wg.Add(2)
	go s.writer()
	go s.listen()
	return s, nil
}

// SetHook installs hook. Events committed before it is set are not
// delivered to it, save those after the end of the latest Export run
// while no hook was set: a relay rebuilds its state by an export and then
// sets its hook, and the events other processes commit in between reach
// the hook.
func (s *Store) SetHook(hook func([]Committed)) {
	if hook == nil {
		s.hook.Store(nil)
		return
	}
	s.hook.Store(&hook)
	select {
	case <-s.closed:
	default:
		go s.catchUp() // what others committed since
	}
}

// Close stops the writer (after the queued appends) and the listener and
// closes the pool.
func (s *Store) Close() error {
	s.once.Do(func() {
		close(s.closed)
		s.wg.Wait()
		s.stop()
		s.pool.Close()
	})
	return nil
}

// Append stores rec durably.
func (s *Store) Append(ctx context.Context, rec Record) (Result, error) {
	res, err := s.appendAll(ctx, []Record{rec}, false)
	if err != nil {
		return Result{}, err
	}
	return res[0], nil
}

// AppendBatch stores recs durably, each judged alone.
func (s *Store) AppendBatch(ctx context.Context, recs []Record) ([]Result, error) {
	return s.appendAll(ctx, recs, false)
}

// LoadBatch stores recs for a bulk load: their transactions commit with
// synchronous_commit off, so a server crash may lose the latest of them
// (never corrupt the log); the next durable commit, and EndBulk, make
// every earlier one durable.
func (s *Store) LoadBatch(ctx context.Context, recs []Record) ([]Result, error) {
	return s.appendAll(ctx, recs, true)
}

func (s *Store) appendAll(ctx context.Context, recs []Record, relaxed bool) ([]Result, error) {
	return groupcommit.AppendAll(s.queue, s.closed, ErrClosed, recs, relaxed)
}

// writer is the process's single writer (see groupcommit.Writer).
func (s *Store) writer() {
	defer s.wg.Done()
	w := groupcommit.Writer{
		Queue:  s.queue,
		Closed: s.closed,
		Limit: func() int {
			if s.bulk.Load() > 0 {
				return s.bulkBatch
			}
			return s.maxBatch
		},
		Commit: s.commit,
	}
	w.Run()
}

// commit writes batch in one transaction (see groupcommit.Commit),
// delivers its events and answers its appends.
func (s *Store) commit(batch []*groupcommit.Request) {
	insert := func(batch []*groupcommit.Request) ([]Result, []Committed, error) {
		return s.insertBatch(context.Background(), batch)
	}
	groupcommit.Commit(batch, insert, func(batch []*groupcommit.Request, results []Result, committed []Committed, err error) {
		if err == nil && len(committed) > 0 {
			s.deliver(committed)
		}
		groupcommit.AnswerAll(batch, results, err)
	})
}

// rows are a transaction's new rows, per table.
type rows struct{ events, tags, revokes [][]any }

var (
	eventCols  = []string{"seq", "id", "agent_id", "created_at", "kind", "body", "raw", "raw_type", "received_at"}
	tagCols    = []string{"name", "value", "created_at", "id", "kind", "seq"}
	revokeCols = []string{"target", "author", "revoke_id", "created_at"}
)

func (s *Store) insertBatch(ctx context.Context, batch []*groupcommit.Request) ([]Result, []Committed, error) {
	relaxed := true
	ids := make([][]byte, len(batch))
	for i, r := range batch {
		relaxed = relaxed && r.Relaxed
		id, err := hex.DecodeString(r.Rec.Event.ID)
		if err != nil || len(id) != 32 {
			return nil, nil, fmt.Errorf("insert event: id %q is not 32 bytes of hex", r.Rec.Event.ID)
		}
		ids[i] = id
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback(ctx)
	// One round trip: the lock first, so the statements after it see
	// every earlier writer's commit (each statement takes its own
	// snapshot under READ COMMITTED).
	b := &pgx.Batch{}
	if relaxed {
		b.Queue(`SET LOCAL synchronous_commit = off`)
	}
	b.Queue(`SELECT pg_advisory_xact_lock($1)`, int64(logLock))
	b.Queue(`SELECT COALESCE(MAX(seq), 0) FROM events`)
	b.Queue(`SELECT id, seq FROM events WHERE id = ANY($1)`, ids)
	br := tx.SendBatch(ctx, b)
	var last int64
	stored := map[string]int64{}
	err = func() error {
		if relaxed {
			if _, err := br.Exec(); err != nil {
				return err
			}
		}
		if _, err := br.Exec(); err != nil {
			return err
		}
		if err := br.QueryRow().Scan(&last); err != nil {
			return err
		}
		rs, err := br.Query()
		if err != nil {
			return err
		}
		for rs.Next() {
			var id []byte
			var seq int64
			if err := rs.Scan(&id, &seq); err != nil {
				return err
			}
			stored[string(id)] = seq
		}
		return rs.Err()
	}()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, nil, fmt.Errorf("lock and read log end: %w", err)
	}
	results := make([]Result, len(batch))
	var committed []Committed
	var rw rows
	for i, r := range batch {
		if seq, ok := stored[string(ids[i])]; ok {
			results[i] = Result{Seq: seq, Duplicate: true}
			continue
		}
		last++
		stored[string(ids[i])] = last
		results[i] = Result{Seq: last}
		committed = append(committed, Committed{Seq: last, Event: r.Rec.Event})
		rw.add(last, ids[i], r.Rec)
	}
	if len(committed) == 0 {
		return results, nil, nil // nothing to write: the rollback ends it
	}
	if err := s.write(ctx, tx, rw, last); err != nil {
		return nil, nil, err
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, nil, fmt.Errorf("commit: %w", err)
	}
	return results, committed, nil
}

// add gathers the rows of rec stored at seq.
func (rw *rows) add(seq int64, id []byte, rec Record) {
	e := rec.Event
	agent, _ := hex.DecodeString(e.AgentID)
	body := rec.Body
	if body == nil {
		body = protocol.AppendJSON(nil, e)
	}
	var raw []byte
	var rawType *string
	if rec.Raw != nil {
		raw, rawType = rec.Raw, &rec.RawType
	}
	rw.events = append(rw.events, []any{seq, id, agent, e.CreatedAt, e.Kind, body, raw, rawType, rec.ReceivedAt})
	seen := map[[2]string]bool{}
	for _, t := range e.Tags {
		if len(t) < 2 || seen[[2]string{t[0], t[1]}] {
			continue
		}
		seen[[2]string{t[0], t[1]}] = true
		rw.tags = append(rw.tags, []any{t[0], t[1], e.CreatedAt, id, e.Kind, seq})
	}
	if e.Kind != protocol.KindRevoke {
		return
	}
	targets := map[string]bool{}
	for _, target := range e.TagValues("e") {
		tid, err := hex.DecodeString(target)
		if err != nil || len(tid) != 32 || targets[string(tid)] {
			continue
		}
		targets[string(tid)] = true
		rw.revokes = append(rw.revokes, []any{tid, agent, id, e.CreatedAt})
	}
}

// write inserts rw and notifies the listeners: large tables by COPY, the
// rest as multi-row INSERTs pipelined in one round trip.
func (s *Store) write(ctx context.Context, tx pgx.Tx, rw rows, last int64) error {
	b := &pgx.Batch{}
	for _, t := range []struct {
		name string
		cols []string
		rows [][]any
	}{{"events", eventCols, rw.events}, {"tags", tagCols, rw.tags}, {"revokes", revokeCols, rw.revokes}} {
		if len(t.rows) == 0 {
			continue
		}
		if len(t.rows) >= copyThreshold {
			if _, err := tx.CopyFrom(ctx, pgx.Identifier{t.name}, t.cols, pgx.CopyFromRows(t.rows)); err != nil {
				return fmt.Errorf("copy %s: %w", t.name, err)
			}
			continue
		}
		q, args := insertValues(t.name, t.cols, t.rows)
		b.Queue(q, args...)
	}
	b.Queue(`SELECT pg_notify($1, $2)`, channel, strconv.FormatInt(last, 10))
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("insert: %w", err)
	}
	return nil
}

// insertValues returns one INSERT of rows into table.
func insertValues(table string, cols []string, rows [][]any) (string, []any) {
	q := make([]byte, 0, 64+len(rows)*len(cols)*5)
	q = fmt.Appendf(q, "INSERT INTO %s(", table)
	for i, c := range cols {
		if i > 0 {
			q = append(q, ',')
		}
		q = append(q, c...)
	}
	q = append(q, ") VALUES "...)
	args := make([]any, 0, len(rows)*len(cols))
	for i, r := range rows {
		if i > 0 {
			q = append(q, ',')
		}
		q = append(q, '(')
		for j := range r {
			if j > 0 {
				q = append(q, ',')
			}
			args = append(args, r[j])
			q = append(q, '$')
			q = strconv.AppendInt(q, int64(len(args)), 10)
		}
		q = append(q, ')')
	}
	return string(q), args
}

// deliver gives the hook what other processes committed before own, then
// own, in seq order.
func (s *Store) deliver(own []Committed) {
	s.deliverMu.Lock()
	defer s.deliverMu.Unlock()
	h := s.hook.Load()
	if h == nil {
		s.delivered = max(s.delivered, own[len(own)-1].Seq)
		return
	}
	if first := own[0].Seq; s.delivered < first-1 {
		// Committed before own, so readable now; retried because own is
		// durable and must not reach the hook before them.
		for delay := 50 * time.Millisecond; ; delay = min(2*delay, 2*time.Second) {
			err := s.deliverRange(*h, first-1)
			if err == nil {
				break
			}
			s.log.Error("postgres log: reading other processes' commits", "err", err)
			select {
			case <-s.closed:
				return
			case <-time.After(delay):
			}
		}
	}
	var fresh []Committed
	for _, c := range own {
		if c.Seq > s.delivered {
			fresh = append(fresh, c)
		}
	}
	if len(fresh) > 0 {
		(*h)(fresh)
		s.delivered = fresh[len(fresh)-1].Seq
	}
}

// deliverRange delivers every event with delivered < seq ≤ through (all
// of the log's end when through < 0), a page at a time. deliverMu is held.
func (s *Store) deliverRange(h func([]Committed), through int64) error {
	const page = 1000
	for through < 0 || s.delivered < through {
		upper := through
		if upper < 0 {
			upper = 1<<63 - 1
		}
		rs, err := s.pool.Query(s.ctx, `SELECT seq, body FROM events WHERE seq > $1 AND seq <= $2 ORDER BY seq LIMIT $3`, s.delivered, upper, page)
		if err != nil {
			return err
		}
		var batch []Committed
		var first, last int64
		rows := 0
		for rs.Next() {
			var seq int64
			var body []byte
			if err := rs.Scan(&seq, &body); err != nil {
				rs.Close()
				return err
			}
			if rows++; first == 0 {
				first = seq
			}
			last = seq
			if _, _, ok := eventlog.WithheldOf(body); ok {
				continue // a withheld event's tombstone: no event to fold (SPEC §21.8)
			}
			e, err := protocol.DecodeJSON(body)
			if err != nil {
				rs.Close()
				return fmt.Errorf("decode event at seq %d: %w", seq, err)
			}
			batch = append(batch, Committed{Seq: seq, Event: e})
		}
		rs.Close()
		if err := rs.Err(); err != nil {
			return err
		}
		if rows == 0 {
			return nil
		}
		if first != s.delivered+1 {
			return fmt.Errorf("log gap: expected seq %d, read %d", s.delivered+1, first)
		}
		if len(batch) > 0 {
			h(batch)
		}
		s.delivered = last
		if rows < page {
			return nil
		}
	}
	return nil
}

// catchUp delivers what other processes committed.
func (s *Store) catchUp() {
	s.deliverMu.Lock()
	defer s.deliverMu.Unlock()
	h := s.hook.Load()
	if h == nil {
		return
	}
	if err := s.deliverRange(*h, -1); err != nil && s.ctx.Err() == nil {
		s.log.Error("postgres log: reading other processes' commits", "err", err)
	}
}

// listen catches up whenever another process notifies a commit, and once
// a second in any case (a notification lost with a connection).
func (s *Store) listen() {
	defer s.wg.Done()
	for {
		select {
		case <-s.closed:
			return
		default:
		}
		err := s.listenOnce()
		if err != nil && !errors.Is(err, context.Canceled) {
			s.log.Warn("postgres log: listener", "err", err)
		}
		select {
		case <-s.closed:
			return
		case <-time.After(time.Second):
		}
	}
}

func (s *Store) listenOnce() error {
	ctx, cancel := context.WithCancel(s.ctx)
	defer cancel()
	go func() {
		select {
		case <-s.closed:
			cancel()
		case <-ctx.Done():
		}
	}()
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "LISTEN "+channel); err != nil {
		return err
	}
	for {
		s.catchUp()
		wait, done := context.WithTimeout(ctx, time.Second)
		_, err := conn.Conn().WaitForNotification(wait)
		done()
		if ctx.Err() != nil {
			conn.Conn().Close(context.Background()) // mid-wait: not reusable
			return ctx.Err()
		}
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			conn.Conn().Close(context.Background())
			return err
		}
	}
}

// BeginBulk starts a bulk load (calls nest): transactions grow to
// bulkBatch appends and, with LoadBatch, commit without waiting for the
// WAL flush. The indexes stay: other processes may be serving from the
// same database.
func (s *Store) BeginBulk(ctx context.Context) error {
	s.bulk.Add(1)
	return nil
}

// EndBulk ends one BeginBulk; the last one makes the load durable (a
// synchronous commit flushes the WAL written before it) and refreshes the
// planner's statistics, telling step about each.
func (s *Store) EndBulk(step func(string)) error {
	if s.bulk.Add(-1) > 0 {
		return nil
	}
	if s.bulk.Load() < 0 {
		s.bulk.Store(0)
	}
	ctx := context.Background()
	if step != nil {
		step("flushing the write-ahead log")
	}
	if _, err := s.pool.Exec(ctx, `INSERT INTO meta(key, value) VALUES('bulk_loaded_at', now()::text)
		ON CONFLICT (key) DO UPDATE SET value = excluded.value`); err != nil {
		return fmt.Errorf("end bulk: %w", err)
	}
	if step != nil {
		step("analyzing the tables")
	}
	if _, err := s.pool.Exec(ctx, `ANALYZE events, tags, revokes`); err != nil {
		return fmt.Errorf("end bulk: %w", err)
	}
	return nil
}

// Bulk reports whether a bulk load is under way.
func (s *Store) Bulk() bool { return s.bulk.Load() > 0 }
