// Package sqlite is the relay's event log on SQLite (modernc.org/sqlite, no
// cgo) in WAL mode with synchronous=FULL: an append is answered only after
// its transaction is durable.
package sqlite

import (
	"context"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"sync"
	"sync/atomic"

	"github.com/anp2net/relay/protocol"
	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// Store is the SQLite event log. Appends go through one writer goroutine that
// groups whatever is queued into a single transaction (group commit); reads
// use a separate connection pool.
type Store struct {
	path   string
	read   *sql.DB
	write  *sql.DB
	queue  chan *appendReq
	hook   atomic.Pointer[func([]Committed)]
	closed chan struct{}
	wg     sync.WaitGroup
	once   sync.Once

	maxBatch int
	// Statements prepared once: the writer's on its single connection,
	// the readers' lazily per pooled connection by database/sql.
	insEvent, insTag, insRevoke, selSeq *sql.Stmt
	lookup, author                      *sql.Stmt
}

// Committed is an event that has just been made durable.
type Committed struct {
	Seq   int64
	Event *protocol.Event
}

// Result is the outcome of one Append.
type Result struct {
	Seq       int64
	Duplicate bool
}

// Record is one event to append, with the bytes it arrived as.
type Record struct {
	Event *protocol.Event
	// Body is the event's compact JSON (protocol.AppendJSON); the writer
	// encodes it when nil, but callers that already have it save the
	// single writer that work.
	Body []byte
	// Raw is the received encoding; nil when it equals Body.
	Raw     []byte
	RawType string // "json" or "cbor"
	// ReceivedAt is the relay clock at receipt (unix seconds).
	ReceivedAt int64
}

type appendReq struct {
	rec  Record
	done chan appendRes
}

type appendRes struct {
	res Result
	err error
}

// ErrClosed is returned by Append after Close.
var ErrClosed = errors.New("store closed")

// Open opens (creating if needed) the log at path. hook, when non-nil, is
// called by the writer after each commit with the newly stored events, in
// commit order, before any of their Appends return.
func Open(path string, hook func([]Committed)) (*Store, error) {
	w, err := sql.Open("sqlite", dsn(path, false))
	if err != nil {
		return nil, fmt.Errorf("open writer: %w", err)
	}
	w.SetMaxOpenConns(1)
	if _, err := w.Exec(schema); err != nil {
		w.Close()
		return nil, fmt.Errorf("create schema: %w", err)
	}
	r, err := sql.Open("sqlite", dsn(path, true))
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("open readers: %w", err)
	}
	r.SetMaxOpenConns(8)
	r.SetMaxIdleConns(8)
	s := &Store{path: path, read: r, write: w, queue: make(chan *appendReq, 4096), closed: make(chan struct{}), maxBatch: 512}
	if err := s.prepare(); err != nil {
		r.Close()
		w.Close()
		return nil, err
	}
	s.SetHook(hook)
	s.wg.Add(1)
	go s.writer()
	return s, nil
}

func (s *Store) prepare() error {
	for _, p := range []struct {
		db  *sql.DB
		dst **sql.Stmt
		q   string
	}{
		{s.write, &s.insEvent, `INSERT INTO events(id, agent_id, created_at, kind, body, raw, raw_type, received_at)
			VALUES(?,?,?,?,?,?,?,?) ON CONFLICT(id) DO NOTHING`},
		{s.write, &s.insTag, `INSERT OR IGNORE INTO tags(name, value, created_at, id) VALUES(?,?,?,?)`},
		{s.write, &s.insRevoke, `INSERT OR IGNORE INTO revokes(target, author, revoke_id, created_at) VALUES(?,?,?,?)`},
		{s.write, &s.selSeq, `SELECT seq FROM events WHERE id = ?`},
		{s.read, &s.lookup, `SELECT substr(body, -130, 128) FROM events WHERE id = ?`},
		{s.read, &s.author, `SELECT agent_id FROM events WHERE id = ?`},
	} {
		st, err := p.db.Prepare(p.q)
		if err != nil {
			return fmt.Errorf("prepare: %w", err)
		}
		*p.dst = st
	}
	return nil
}

func dsn(path string, readOnly bool) string {
	q := url.Values{}
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(FULL)")
	q.Add("_pragma", "busy_timeout(10000)")
	// The writer keeps the hot interior pages of every index cached: at a
	// million events the indexes outgrow a small cache and each insert
	// (random ids) would miss.
	if readOnly {
		q.Add("_pragma", "cache_size(-65536)")
	} else {
		q.Add("_pragma", "cache_size(-524288)")
	}
	q.Add("_pragma", "temp_store(MEMORY)")
	q.Add("_pragma", "mmap_size(268435456)")
	q.Add("_pragma", "wal_autocheckpoint(8192)")
	if readOnly {
		q.Add("_pragma", "query_only(1)")
	}
	q.Set("_txlock", "immediate")
	return "file:" + path + "?" + q.Encode()
}

// SetHook replaces the commit hook (nil removes it). Commits after SetHook
// returns call the new hook; a commit in flight may still call the old one.
func (s *Store) SetHook(hook func([]Committed)) {
	if hook == nil {
		s.hook.Store(nil)
		return
	}
	s.hook.Store(&hook)
}

// Close stops the writer after draining queued appends and closes the
// database.
func (s *Store) Close() error {
	s.once.Do(func() { close(s.closed) })
	s.wg.Wait()
	return errors.Join(s.read.Close(), s.write.Close())
}

// Append stores rec and returns once it is committed (or found to be a
// duplicate of a stored event). It never reports success for an event that
// is not durable.
func (s *Store) Append(ctx context.Context, rec Record) (Result, error) {
	req := &appendReq{rec: rec, done: make(chan appendRes, 1)}
	select {
	case s.queue <- req:
	case <-s.closed:
		return Result{}, ErrClosed
	case <-ctx.Done():
		return Result{}, ctx.Err()
	}
	r := <-req.done
	return r.res, r.err
}

// AppendBatch stores recs and returns once all are committed, letting the
// writer group them into few transactions (imports, mirrors).
func (s *Store) AppendBatch(ctx context.Context, recs []Record) ([]Result, error) {
	reqs := make([]*appendReq, len(recs))
	for i, rec := range recs {
		reqs[i] = &appendReq{rec: rec, done: make(chan appendRes, 1)}
		select {
		case s.queue <- reqs[i]:
		case <-s.closed:
			return nil, ErrClosed
		}
	}
	out := make([]Result, len(recs))
	var firstErr error
	for i, r := range reqs {
		res := <-r.done
		out[i] = res.res
		if res.err != nil && firstErr == nil {
			firstErr = res.err
		}
	}
	return out, firstErr
}

func (s *Store) writer() {
	defer s.wg.Done()
	batch := make([]*appendReq, 0, s.maxBatch)
	for {
		var first *appendReq
		select {
		case first = <-s.queue:
		case <-s.closed:
			// Drain what was queued before Close.
			for {
				select {
				case first = <-s.queue:
					s.commit(append(batch[:0], first))
				default:
					return
				}
			}
		}
		batch = append(batch[:0], first)
	fill:
		for len(batch) < s.maxBatch {
			select {
			case r := <-s.queue:
				batch = append(batch, r)
			default:
				break fill
			}
		}
		s.commit(batch)
	}
}

// commit writes a batch in one transaction; if the transaction fails it
// retries each append alone so one bad record cannot sink the others.
func (s *Store) commit(batch []*appendReq) {
	results, committed, err := s.insertBatch(batch)
	if err != nil && len(batch) > 1 {
		for _, r := range batch {
			s.commit([]*appendReq{r})
		}
		return
	}
	if h := s.hook.Load(); err == nil && len(committed) > 0 && h != nil {
		(*h)(committed)
	}
	for i, r := range batch {
		if err != nil {
			r.done <- appendRes{err: err}
		} else {
			r.done <- appendRes{res: results[i]}
		}
	}
}

func (s *Store) insertBatch(batch []*appendReq) ([]Result, []Committed, error) {
	ctx := context.Background()
	tx, err := s.write.BeginTx(ctx, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback()
	st := txStmts{tx.Stmt(s.insEvent), tx.Stmt(s.insTag), tx.Stmt(s.insRevoke), tx.Stmt(s.selSeq)}
	results := make([]Result, len(batch))
	var committed []Committed
	for i, r := range batch {
		seq, dup, err := st.insertOne(r.rec)
		if err != nil {
			return nil, nil, err
		}
		results[i] = Result{Seq: seq, Duplicate: dup}
		if !dup {
			committed = append(committed, Committed{Seq: seq, Event: r.rec.Event})
		}
	}
	if err := tx.Commit(); err != nil {
		return nil, nil, fmt.Errorf("commit: %w", err)
	}
	return results, committed, nil
}

type txStmts struct{ event, tag, revoke, seq *sql.Stmt }

func (st txStmts) insertOne(rec Record) (seq int64, dup bool, err error) {
	e := rec.Event
	id, _ := hex.DecodeString(e.ID)
	agent, _ := hex.DecodeString(e.AgentID)
	var raw any
	var rawType any
	if rec.Raw != nil {
		raw, rawType = rec.Raw, rec.RawType
	}
	body := rec.Body
	if body == nil {
		body = protocol.AppendJSON(nil, e)
	}
	res, err := st.event.Exec(id, agent, e.CreatedAt, e.Kind, body, raw, rawType, rec.ReceivedAt)
	if err != nil {
		return 0, false, fmt.Errorf("insert event: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		err := st.seq.QueryRow(id).Scan(&seq)
		return seq, true, err
	}
	seq, _ = res.LastInsertId()
	for _, t := range e.Tags {
		if len(t) < 2 {
			continue
		}
		if _, err := st.tag.Exec(t[0], t[1], e.CreatedAt, id); err != nil {
			return 0, false, fmt.Errorf("insert tag: %w", err)
		}
	}
	if e.Kind == protocol.KindRevoke {
		for _, target := range e.TagValues("e") {
			tid, err := hex.DecodeString(target)
			if err != nil || len(tid) != 32 {
				continue
			}
			if _, err := st.revoke.Exec(tid, agent, id, e.CreatedAt); err != nil {
				return 0, false, fmt.Errorf("insert revoke: %w", err)
			}
		}
	}
	return seq, false, nil
}
