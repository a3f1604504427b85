// Package sqlite is the relay's event log on SQLite (modernc.org/sqlite, no
// cgo) in WAL mode with synchronous=FULL: an append is answered only after
// its transaction is durable.
package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anp2net/relay/relay/eventlog"
	"github.com/anp2net/relay/relay/eventlog/groupcommit"
	"github.com/anp2net/relay/relay/eventlog/sqlq"

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
	queue  chan *groupcommit.Request
	hook   atomic.Pointer[func([]Committed)]
	closed chan struct{}
	wg     sync.WaitGroup
	once   sync.Once

	maxBatch, bulkBatch int
	// bulk counts the BeginBulk calls not yet ended; only the writer
	// goroutine touches it. bulkOn tells readers that tag rows may be in
	// tags_pending (set before the first such row, cleared after they
	// are merged).
	bulk   int
	bulkOn atomic.Bool
	// ids maps every stored id to its seq (see idIndex); only the writer
	// adds to it.
	ids *idIndex
	// authors lists each author's events (see authorIndex); only the
	// writer adds to it.
	authors *authorIndex
	// The index file (see indexfile.go): indexLoad is how Open filled
	// the indexes; savedSeq the position of the file on disk (-1: none
	// known); sinceSave counts the events committed since the last save
	// (writer only); saveMin is indexSaveMin (tests lower it); saving is
	// set while a save runs, and saveWG waits for it.
	indexLoad IndexLoad
	// items is the items file (see items.go); the writer appends to it.
	items     *itemsFile
	savedSeq  atomic.Int64
	sinceSave int64
	saveMin   atomic.Int64
	saving    atomic.Bool
	saveWG    sync.WaitGroup
	// relaxed is the writer connection's synchronous setting: NORMAL
	// while it commits only LoadBatch appends, FULL otherwise.
	relaxed bool
	// nextSeq is the seq the next stored event gets; unsure: a
	// transaction failed since, and the next reads the log past nextSeq
	// first (see catchUp). Writer only.
	nextSeq int64
	unsure  bool
	// finished carries each committed batch from the writer to the
	// goroutine that runs the hook and answers the appends, so the writer
	// starts the next transaction meanwhile.
	finished chan finishJob
	// cache holds bodies read by Query (see there).
	cache *bodyCache
	// lock is the writer lock on the log (see lockLog); full tracks a
	// disk-full episode (finisher only).
	lock *logLock
	full fullEpisode
	// expected counts the appends announced by Expect and not yet
	// queued: publishes being read and checked. last is the size of the
	// writer's previous transaction (writer only).
	expected atomic.Int64
	last     int
	// ckpt is the checkpointer's connection; sinceCkpt counts the events
	// committed since its last checkpoint (writer only); kick wakes it.
	// ckptEvery and walLimit are ckptEvents and walLimit (tests lower them).
	ckpt      *sql.DB
	sinceCkpt int
	kick      chan struct{}
	ckptEvery atomic.Int64
	walLimit  atomic.Int64
	// resetDue: the checkpointer has copied nearly every WAL frame and
	// the writer should copy the rest (see finishDrain). logFile is the
	// log file the writer fsyncs after doing so; logErr, once set, fails
	// every later transaction (that fsync failed); sizeLimit is the
	// writer's journal_size_limit. All but resetDue are writer only.
	// frameSize is the size of a WAL frame (a page and its header).
	resetDue  atomic.Bool
	resetKick chan struct{}
	logFile   *os.File
	logErr    error
	sizeLimit int64
	frameSize int64
	// Statements prepared once: the writer's on its single connection,
	// the readers' lazily per pooled connection by database/sql.
	insRevoke, selID             *sql.Stmt
	lookupSeq, authorSeq, getSeq *sql.Stmt
	// The writer's inserts of many rows a statement (see inserter).
	insEvents, insTags, insPending *inserter
}

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

// finishJob is a transaction's outcome on its way to its appends.
type finishJob struct {
	reqs      []*groupcommit.Request
	results   []Result
	committed []Committed
	err       error
	// barrier, when set, is closed by the finisher in place of a batch
	// (awaitHook).
	barrier chan struct{}
}

// bodyCacheBytes bounds the body cache: about 200,000 typical events.
const bodyCacheBytes = 96 << 20

// ErrClosed is returned by Append after Close.
var ErrClosed = errors.New("store closed")

// Open opens (creating if needed) the log at path. hook, when non-nil, is
// called after each commit with the newly stored events, in commit order,
// before any of their Appends return; it runs on a goroutine of its own,
// beside the writer's next transaction. Open takes the log's writer lock
// (see LockPath) until Close: it returns a *LockedError (ErrLocked) when
// another process holds it, and an error matching ErrCorrupt when SQLite
// finds the file damaged.
func Open(path string, hook func([]Committed)) (*Store, error) {
	return OpenWithRepair(path, hook, nil)
}

// OpenWithRepair is Open that first tells repair (when set) about any slow
// work it must do before the log can serve: migrating old tag tables, or
// rebuilding the indexes and merging the tag rows of a bulk load that a
// crash cut short (seconds per million events).
func OpenWithRepair(path string, hook func([]Committed), repair func(string)) (*Store, error) {
	lock, err := lockLog(path)
	if err != nil {
		return nil, err
	}
	s, err := openLocked(path, hook, repair)
	if err != nil {
		lock.Close()
		return nil, corrupt(err)
	}
	s.lock = lock
	return s, nil
}

// openLocked is OpenWithRepair once the writer lock is held. An error
// from a damaged file matches ErrCorrupt.
func openLocked(path string, hook func([]Committed), repair func(string)) (*Store, error) {
	w, err := sql.Open("sqlite", dsn(path, false))
	if err != nil {
		return nil, fmt.Errorf("open writer: %w", err)
	}
	w.SetMaxOpenConns(1)
	shape, err := inspect(w)
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("inspect log: %w", err)
	}
	if msg := shape.repairs(); repair != nil && msg != "" {
		repair(msg)
	}
	if err := sorting(w, func() error { return prepareLog(w, shape) }); err != nil {
		w.Close()
		return nil, err
	}
	r, err := sql.Open("sqlite", dsn(path, true))
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("open readers: %w", err)
	}
	r.SetMaxOpenConns(8)
	r.SetMaxIdleConns(8)
	c, err := sql.Open("sqlite", dsnBusy(path, false, ckptBusyMS))
	if err != nil {
		r.Close()
		w.Close()
		return nil, fmt.Errorf("open checkpointer: %w", err)
	}
	c.SetMaxOpenConns(1)
	s := &Store{path: path, read: r, write: w, ckpt: c, queue: make(chan *groupcommit.Request, 16384), closed: make(chan struct{}),
		maxBatch: 512, bulkBatch: 8192, cache: newBodyCache(bodyCacheBytes), finished: make(chan finishJob, 2),
		kick: make(chan struct{}, 1), resetKick: make(chan struct{}, 1)}
	s.ckptEvery.Store(ckptEvents)
	s.walLimit.Store(walLimit)
	s.sizeLimit = walLimit
	if err := w.QueryRow("PRAGMA page_size").Scan(&s.frameSize); err != nil {
		r.Close()
		w.Close()
		c.Close()
		return nil, fmt.Errorf("page size: %w", err)
	}
	s.frameSize += 24
	s.saveMin.Store(indexSaveMin)
	if err = s.openIndexes(w); err == nil {
		s.openItems(w)
		err = w.QueryRow(`SELECT COALESCE(MAX(seq), 0) + 1 FROM events`).Scan(&s.nextSeq)
	}
	if err == nil {
		err = s.prepare()
	}
	if err != nil {
		r.Close()
		w.Close()
		c.Close()
		return nil, err
	}
	s.SetHook(hook)
	s.wg.Add(3)
	go s.writer()
	go s.finisher()
	s.wakeCheckpointer() // whatever opening the log wrote (a migration, a merge)
	go s.checkpointer()
	return s, nil
}

// prepareLog migrates an earlier log, drops the indexes on ids and authors
// that earlier binaries kept (and create again when they open the log),
// creates what the schema lacks (every index, after a migration or a bulk
// load cut short) and merges tag rows a bulk load left pending.
func prepareLog(w *sql.DB, shape logShape) error {
	if err := migrate(w, shape); err != nil {
		return err
	}
	for _, name := range shape.dropped {
		if _, err := w.Exec(`DROP INDEX IF EXISTS ` + name); err != nil {
			return fmt.Errorf("drop %s: %w", name, err)
		}
	}
	if _, err := w.Exec(schema); err != nil {
		return fmt.Errorf("create schema: %w", err)
	}
	if _, err := w.Exec(`BEGIN IMMEDIATE;` + mergePending + `COMMIT;`); err != nil {
		w.Exec(`ROLLBACK`)
		return fmt.Errorf("merge pending tags: %w", err)
	}
	return nil
}

func (s *Store) prepare() error {
	// The id index keeps ids unique and the writer numbers the events
	// itself, so it inserts them many to a statement.
	var err error
	if s.insEvents, err = newInserter(s.write, `INSERT INTO events(seq, id, agent_id, created_at, kind, body, raw, raw_type, received_at) VALUES`,
		eventsPerInsert, 9); err != nil {
		return err
	}
	if s.insTags, err = newInserter(s.write, `INSERT OR IGNORE INTO tags(name, value, created_at, id, kind, seq) VALUES`,
		tagsPerInsert, 6); err != nil {
		return err
	}
	if s.insPending, err = newInserter(s.write, `INSERT INTO tags_pending(name, value, created_at, id, kind, seq) VALUES`,
		pendingPerInsert, 6); err != nil {
		return err
	}
	for _, p := range []struct {
		db  *sql.DB
		dst **sql.Stmt
		q   string
	}{
		{s.write, &s.insRevoke, `INSERT OR IGNORE INTO revokes(target, author, revoke_id, created_at) VALUES(?,?,?,?)`},
		{s.write, &s.selID, `SELECT id FROM events WHERE seq = ?`},
		{s.read, &s.lookupSeq, `SELECT substr(body, -130, 128) FROM events WHERE seq = ? AND id = ?`},
		{s.read, &s.authorSeq, `SELECT agent_id FROM events WHERE seq = ? AND id = ?`},
		{s.read, &s.getSeq, `SELECT seq, body, raw, raw_type, received_at FROM events WHERE seq = ? AND id = ?`},
	} {
		st, err := p.db.Prepare(p.q)
		if err != nil {
			return fmt.Errorf("prepare: %w", err)
		}
		*p.dst = st
	}
	return nil
}

// logShape is what Open finds in an existing log before it creates
// what is missing.
type logShape struct {
	events, tags, tagsHaveSeq, pending bool
	// inlineID: ids are unique by a constraint of the events table (logs
	// written before events_id), which would be written on every append.
	inlineID bool
	indexes  int      // secondary indexes present
	dropped  []string // indexes Open drops (see droppedIndexes)
	// tagKeyByID, timeByID: the tag key, events_order or events_kind
	// order ties of created_at by id (logs written before they were by
	// seq; see secondaryIndexes).
	tagKeyByID, timeByID bool
}

func inspect(w *sql.DB) (logShape, error) {
	var l logShape
	err := w.QueryRow(`SELECT
		EXISTS(SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'events'),
		EXISTS(SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'tags'),
		EXISTS(SELECT 1 FROM pragma_table_info('tags') WHERE name = 'seq'),
		EXISTS(SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'tags_pending'),
		EXISTS(SELECT 1 FROM sqlite_master WHERE type = 'index' AND name = 'sqlite_autoindex_events_1'),
		EXISTS(SELECT 1 FROM pragma_table_info('tags') WHERE name = 'id' AND pk > 0),
		EXISTS(SELECT 1 FROM sqlite_master WHERE type = 'index' AND name IN ('events_order', 'events_kind')
			AND sql NOT LIKE '%seq%')`).
		Scan(&l.events, &l.tags, &l.tagsHaveSeq, &l.pending, &l.inlineID, &l.tagKeyByID, &l.timeByID)
	if err != nil {
		return l, err
	}
	rows, err := w.Query(`SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = 'events' AND sql IS NOT NULL`)
	if err != nil {
		return l, err
	}
	defer rows.Close()
	for rows.Next() {
		var name, ddl string
		if err := rows.Scan(&name, &ddl); err != nil {
			return l, err
		}
		switch {
		case slices.Contains(droppedIndexes, name):
			l.dropped = append(l.dropped, name)
		case name == indexName(latestIndex) && ddl != strings.Replace(latestIndex, " IF NOT EXISTS", "", 1):
			l.dropped = append(l.dropped, name) // made for other overwrite kinds
		case slices.ContainsFunc(secondaryIndexes, func(ddl string) bool { return indexName(ddl) == name }):
			l.indexes++
		}
	}
	return l, rows.Err()
}

// oldTags reports tag tables written before they carried kind and seq.
func (l logShape) oldTags() bool { return l.tags && !l.tagsHaveSeq }

// repairs describes the slow work Open has ahead on an existing log, or
// returns "".
func (l logShape) repairs() string {
	if !l.events {
		return ""
	}
	var todo []string
	if l.oldTags() {
		todo = append(todo, "migrating the tag tables")
	}
	if l.tagKeyByID && !l.oldTags() || l.timeByID {
		todo = append(todo, "ordering the tag key and the time indexes by arrival within a second (once)")
	}
	switch {
	case l.inlineID:
		todo = append(todo, "dropping the table's unique constraint on event ids (once; the events table is copied and every index rebuilt)")
	case l.indexes < len(secondaryIndexes):
		todo = append(todo, fmt.Sprintf("rebuilding %d indexes left out by an unfinished bulk load", len(secondaryIndexes)-l.indexes))
	}
	if len(l.dropped) > 0 {
		todo = append(todo, "dropping the indexes "+strings.Join(l.dropped, ", ")+" (ids and authors are indexed in memory now)")
	}
	return strings.Join(todo, "; ")
}

// migrate brings a log written by an earlier version up to schema: tag
// tables without kind and seq are rebuilt from the events (pending rows of
// a cut-short bulk load included), a tag key and time indexes that order
// ties by id are rebuilt to order them by seq, and an events table whose
// ids are unique by a table constraint is copied into one without it (ids
// are unique by the writer's id index).
func migrate(w *sql.DB, l logShape) error {
	if err := migrateTagTables(w, l); err != nil {
		return err
	}
	var rekey string
	if l.tagKeyByID && !l.oldTags() {
		rekey = migrateTagKey
	}
	if l.timeByID {
		rekey += dropTimeIndexes
	}
	if rekey != "" {
		if _, err := w.Exec("BEGIN IMMEDIATE;" + rekey + "COMMIT;"); err != nil {
			w.Exec("ROLLBACK")
			return fmt.Errorf("rekey tags and time indexes: %w", err)
		}
	}
	if !l.inlineID {
		return nil
	}
	if _, err := w.Exec("BEGIN IMMEDIATE;" + migrateEvents + "COMMIT;"); err != nil {
		w.Exec("ROLLBACK")
		return fmt.Errorf("migrate events: %w", err)
	}
	return nil
}

func migrateTagTables(w *sql.DB, l logShape) error {
	if !l.oldTags() {
		return nil
	}
	from := "tags"
	if l.pending {
		from = "(SELECT name, value, created_at, id FROM tags UNION ALL SELECT name, value, created_at, id FROM tags_pending)"
	}
	if _, err := w.Exec("BEGIN IMMEDIATE;" + fmt.Sprintf(migrateTags, from) + "COMMIT;"); err != nil {
		w.Exec("ROLLBACK")
		return fmt.Errorf("migrate tags: %w", err)
	}
	return nil
}

// writerCache is the writer's page cache (cache_size: negative KiB).
const writerCache = "-524288"

// bulkCache is the writer's page cache during a bulk load: appends touch
// only the tails of the tables, so a cache that holds one transaction's
// pages lets SQLite reuse them rather than allocate fresh ones.
const bulkCache = "-16384"

func dsn(path string, readOnly bool) string { return dsnBusy(path, readOnly, 10000) }

// ckptBusyMS is the checkpointer's busy timeout: its checkpoints are
// passive and wait for nobody, but one may find the writer's own (see
// finishDrain) under way, and then gives up soon and tries again at the
// next wake-up.
const ckptBusyMS = 50

// dsnBusy is dsn with a busy timeout of busyMS milliseconds.
func dsnBusy(path string, readOnly bool, busyMS int) string {
	q := url.Values{}
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(FULL)")
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busyMS))
	// The writer keeps the hot interior pages of every index cached: at a
	// million events the indexes outgrow a small cache and each insert
	// (random ids) would miss.
	if readOnly {
		q.Add("_pragma", "cache_size(-16384)")
	} else {
		q.Add("_pragma", "cache_size("+writerCache+")")
	}
	q.Add("_pragma", "temp_store(MEMORY)")
	// Readers read pages straight from the map (SQLite's largest, 2 GiB
	// less 64 KiB) instead of copying them into a per-connection cache
	// with a pread each: at 1M events with no publishing this halves the
	// median of a 100-event query. After a commit each reader drops its
	// cache and the map on its next read either way, which is why Query
	// keeps bodies in a cache of its own; under 200 publishes/s mapping
	// and not mapping measured alike. Reader caches stay small.
	q.Add("_pragma", "mmap_size(2147418112)")
	// No connection checkpoints on commit: the checkpointer does, on a
	// connection of its own, beside the writer (see checkpointer).
	q.Add("_pragma", "wal_autocheckpoint(0)")
	// When the WAL starts over (see drainWAL) its file is cut back to
	// walLimit, so a long reader that let it grow does not hold the disk.
	q.Add("_pragma", fmt.Sprintf("journal_size_limit(%d)", walLimit))
	if readOnly {
		q.Add("_pragma", "query_only(1)")
	}
	q.Set("_txlock", "immediate")
	return "file:" + path + "?" + q.Encode()
}

// Path returns the log's file path (modules keep side files next to it).
func (s *Store) Path() string { return s.path }

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
	s.saveAtClose()
	if s.items != nil {
		s.items.f.Close()
	}
	var logFile error
	if s.logFile != nil {
		logFile = s.logFile.Close()
	}
	return errors.Join(s.ckpt.Close(), s.read.Close(), s.write.Close(), logFile, s.lock.Close())
}

// Append stores rec and returns once it is committed (or found to be a
// duplicate of a stored event). It never reports success for an event that
// is not durable. When the disk is full it returns a *FullError
// (errors.Is(err, ErrFull)).
func (s *Store) Append(ctx context.Context, rec Record) (Result, error) {
	if rec.Admit != nil {
		return s.appendAdmitted(ctx, rec)
	}
	req := groupcommit.NewRequest(rec, false)
	select {
	case s.queue <- req:
	case <-s.closed:
		return Result{}, ErrClosed
	case <-ctx.Done():
		return Result{}, ctx.Err()
	}
	r := <-req.Done
	return r.Res, r.Err
}

// AppendBatch stores recs and returns once all are committed, letting the
// writer group them into few transactions (imports, mirrors).
func (s *Store) AppendBatch(ctx context.Context, recs []Record) ([]Result, error) {
	if admits(recs) {
		return s.appendEach(ctx, recs)
	}
	return s.appendAll(recs, false)
}

// LoadBatch is AppendBatch for a bulk load whose source can give the
// events again (an import file, a peer): while the writer's transactions
// hold only such appends they commit without an fsync (SQLite's WAL with
// synchronous=NORMAL). A process crash loses none of them and nothing can
// corrupt the log, but an operating-system crash or power loss may roll
// back the latest ones. The next durable commit (any Append or
// AppendBatch, or the end of EndBulk) makes every earlier one durable.
func (s *Store) LoadBatch(ctx context.Context, recs []Record) ([]Result, error) {
	return s.appendAll(recs, true)
}

func (s *Store) appendAll(recs []Record, relaxed bool) ([]Result, error) {
	return groupcommit.AppendAll(s.queue, s.closed, ErrClosed, recs, relaxed)
}

// writer is the log's single writer (see groupcommit.Writer). Between
// transactions, when nothing is queued or announced, it finishes a WAL
// reset the checkpointer asked for; while other publishes are under way
// it gathers them into the transaction (see gather); every ckptEvery
// committed events it wakes the checkpointer.
func (s *Store) writer() {
	defer s.wg.Done()
	defer close(s.finished)
	w := groupcommit.Writer{
		Queue:  s.queue,
		Closed: s.closed,
		Limit: func() int {
			if s.bulk > 0 {
				// Nobody waits on a bulk load's answers the way a
				// publisher does, and a bigger transaction writes each
				// touched page once.
				return s.bulkBatch
			}
			return s.maxBatch
		},
		Commit: s.commit,
		Idle: func() {
			if s.resetDue.Load() && len(s.queue) == 0 && s.expected.Load() <= 0 {
				// Nothing to append: the moment to start the WAL over.
				s.finishDrain()
			}
		},
		Wake: s.resetKick,
		Gather: func(batch []*groupcommit.Request, limit int) ([]*groupcommit.Request, *groupcommit.Request) {
			if s.bulk == 0 && len(batch) < limit && (s.expected.Load() > 0 || len(batch) > 1 || s.last > 1) {
				return s.gather(batch, limit)
			}
			return batch, nil
		},
		Committed: func(n int) {
			s.last = n
			if s.sinceCkpt += n; int64(s.sinceCkpt) >= s.ckptEvery.Load() {
				s.wakeCheckpointer()
			}
			s.committed(n)
		},
	}
	w.Run()
}

// groupWindow is how long the writer keeps a transaction open for more
// appends while other publishes are under way.
const groupWindow = time.Millisecond

// gather adds to batch the appends queued within groupWindow, until the
// batch is full or a control request comes. The writer gathers only
// while other publishes are under way (announced by Expect, or the
// current or previous transaction holds several appends): a transaction
// then takes the publishes of several rounds of concurrent clients
// instead of the few queued when it began, and they share its commit (the
// WAL frames of the pages it touched and the fsync), which costs nearly as
// much for one event as for thirty. A lone publisher is not delayed, and
// the window ends as soon as no announced publish remains in flight
// (checked every gatherPoll): waiting longer would only delay the
// transaction's publishers (it doubled the median latency at half rate).
func (s *Store) gather(batch []*groupcommit.Request, limit int) ([]*groupcommit.Request, *groupcommit.Request) {
	t := time.NewTimer(groupWindow)
	defer t.Stop()
	var poll *time.Ticker
	defer func() {
		if poll != nil {
			poll.Stop()
		}
	}()
	for len(batch) < limit {
		if s.expected.Load() <= 0 {
			// Nothing announced is on its way: take what is queued and go.
			select {
			case r := <-s.queue:
				if r.Ctl != nil {
					return batch, r
				}
				batch = append(batch, r)
				continue
			default:
				return batch, nil
			}
		}
		if poll == nil {
			poll = time.NewTicker(gatherPoll)
		}
		select {
		case r := <-s.queue:
			if r.Ctl != nil {
				return batch, r
			}
			batch = append(batch, r)
		case <-poll.C:
		case <-t.C:
			return batch, nil
		case <-s.closed:
			return batch, nil
		}
	}
	return batch, nil
}

// gatherPoll is how often gather looks whether announced publishes are
// still in flight (one may be refused and never come).
const gatherPoll = 100 * time.Microsecond

// Expect tells the writer that n more appends are on their way (a
// publish being read and checked), or, with n < 0, that announced ones
// are about to be queued or will not come. It is only a hint (see
// gather).
func (s *Store) Expect(n int) { s.expected.Add(int64(n)) }

// Expected is how many announced appends are on their way (see Expect).
func (s *Store) Expected() int64 { return s.expected.Load() }

// ckptEvents is how many committed events wake the checkpointer (some
// 4–8 WAL frames each); walLimit is the WAL size (of its live frames)
// past which the writer starts the WAL over even while publishes wait,
// and the size SQLite cuts the file back to when it starts over; from
// three quarters of it the writer does so when it is idle (see
// drainWAL).
const (
	ckptEvents = 2048
	walLimit   = 256 << 20
)

// wakeCheckpointer wakes the checkpointer (after ckptEvery events, at
// open, and after each index build and tag merge of a bulk load's end,
// which write a great many pages) without waiting for it. Writer only
// (or Open before the writer starts).
func (s *Store) wakeCheckpointer() {
	s.sinceCkpt = 0
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// checkpointer copies the WAL's pages back into the log on a connection
// of its own, woken by the writer every ckptEvents events, so that no
// commit waits for a checkpoint (an autocheckpoint of 8,000 frames held
// the writer, and every publish queued behind it, for tens of
// milliseconds), and has the writer start the WAL over when it has grown
// (see drainWAL). A reader pinning an old snapshot keeps a passive
// checkpoint from copying the frames after it: the checkpointer then
// tries again every second until the reader ends (the WAL grows
// meanwhile; it is cut back to walLimit when it starts over). The WAL's
// frames are durable before a checkpoint reads them (synchronous=FULL),
// so a crash at any point of one loses nothing: the next open replays the
// WAL.
func (s *Store) checkpointer() {
	defer s.wg.Done()
	var retry <-chan time.Time
	for {
		select {
		case <-s.kick:
		case <-retry:
		case <-s.closed:
			return
		}
		retry = nil
		if !s.drainWAL() {
			retry = time.After(time.Second)
		}
	}
}

// drainWAL copies the WAL's frames into the log and, once the WAL has
// grown past three quarters of walLimit, has the writer start it over. A
// passive checkpoint copies the frames committed before it began, while
// the writer goes on appending; so it runs again, each pass copying what
// came during the one before, until a pass finds at most resetFrames new
// frames (or after drainPasses passes). SQLite starts the WAL over from
// its beginning only when a transaction begins with every frame in the
// log, which under steady publishing never happens by itself: the WAL
// grew to walLimit and a TRUNCATE checkpoint then held the writer, and
// every publish, for 120–300 ms. So the writer copies the few frames the
// passes left itself, between two transactions (see finishDrain). It
// returns false when a reader kept a pass from copying every frame.
func (s *Store) drainWAL() bool {
	prev := 0
	for pass := 0; pass < drainPasses; pass++ {
		frames, done, ok := s.walCheckpoint(s.ckpt, "PASSIVE")
		if !ok || done < frames {
			return false
		}
		if frames == 0 {
			return true // the WAL has already started over
		}
		live := int64(frames) * s.frameSize
		if live < s.walLimit.Load()/4*3 {
			return true
		}
		fresh := frames - prev
		prev = frames
		if fresh <= resetFrames || pass == drainPasses-1 {
			s.resetDue.Store(true)
			select {
			case s.resetKick <- struct{}{}: // an idle writer sees it now
			default:
			}
			if live >= s.walLimit.Load() {
				// Publishing has not let the writer idle since it
				// grew past three quarters.
				s.control(context.Background(), func() error {
					s.finishDrain()
					return nil
				})
			}
			return true
		}
	}
	return true
}

// finishDrain copies the frames the checkpointer's passes left (writer
// only, between transactions; see drainWAL), so that the next
// transaction starts the WAL over. It holds the writer for an fsync of
// the log (0.2–20 ms on the shared test machine), which a publish
// arriving meanwhile waits out, so the writer runs it when no append is
// queued or announced; only once the WAL passes walLimit does it run
// between two busy transactions.
func (s *Store) finishDrain() {
	if !s.resetDue.Swap(false) {
		return
	}
	if lim := s.walLimit.Load(); lim != s.sizeLimit {
		if _, err := s.write.Exec(fmt.Sprintf("PRAGMA journal_size_limit=%d", lim)); err == nil {
			s.sizeLimit = lim
		}
	}
	// The frames it copies were made durable by their own commits, so
	// the WAL needs no fsync first (SQLite would do one); the log file
	// gets its fsync below, before any commit can start the WAL over.
	if _, err := s.write.Exec("PRAGMA synchronous=OFF"); err != nil {
		return
	}
	s.walCheckpoint(s.write, "PASSIVE")
	if err := s.syncLog(); err != nil {
		// The log may lack pages the WAL would no longer hold: no
		// transaction may start it over (the next open replays it).
		s.logErr = fmt.Errorf("fsync of the log after a checkpoint: %w", err)
	}
	if err := s.restoreSync(); err != nil && s.logErr == nil {
		s.logErr = err
	}
}

// syncLog makes the log file's contents durable (writer only).
func (s *Store) syncLog() error {
	if s.logFile == nil {
		f, err := os.OpenFile(s.path, os.O_RDWR, 0)
		if err != nil {
			return err
		}
		s.logFile = f
	}
	return datasync(s.logFile)
}

// restoreSync sets the writer connection's synchronous setting back to
// what s.relaxed says after finishDrain turned it off.
func (s *Store) restoreSync() error {
	mode := "FULL"
	if s.relaxed {
		mode = "NORMAL"
	}
	_, err := s.write.Exec("PRAGMA synchronous=" + mode)
	return err
}

// resetFrames and drainPasses bound drainWAL: the writer copies at most
// about resetFrames frames itself (when publishing outpaces the passes,
// what the last of drainPasses passes left).
const (
	resetFrames = 256
	drainPasses = 4
)

// walCheckpoint runs PRAGMA wal_checkpoint(mode) on db and reads its row
// to the end (a statement left unfinished would keep a read snapshot open
// on that connection, and with it the WAL from ever being emptied). It
// returns the WAL's frames and how many of them are in the log; ok is
// false when the checkpoint could not run to its end.
func (s *Store) walCheckpoint(db *sql.DB, mode string) (frames, done int, ok bool) {
	var busy int
	if err := db.QueryRow("PRAGMA wal_checkpoint("+mode+")").Scan(&busy, &frames, &done); err != nil {
		return 0, 0, false
	}
	return frames, done, busy == 0
}

// control runs fn on the writer goroutine between transactions.
func (s *Store) control(ctx context.Context, fn func() error) error {
	req := groupcommit.NewControl(fn)
	select {
	case s.queue <- req:
	case <-s.closed:
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	return (<-req.Done).Err
}

// BeginBulk puts the log into bulk-load mode until the matching EndBulk
// (calls nest). It drops the secondary indexes and sends new tag rows to
// tags_pending, so an append writes the table's tail only, and
// transactions grow to bulkBatch appends. Every read stays correct
// meanwhile (ids go through the id index as always), but filtered reads
// scan the table. Worth it only when the
// load is at least as large as the log: EndBulk rebuilds the indexes over
// everything.
func (s *Store) BeginBulk(ctx context.Context) error {
	return s.control(ctx, func() error {
		if s.bulk > 0 {
			s.bulk++
			return nil
		}
		s.bulk++
		s.bulkOn.Store(true)
		if _, err := s.write.Exec("PRAGMA cache_size=" + bulkCache); err != nil {
			return fmt.Errorf("begin bulk: %w", err)
		}
		for _, ddl := range secondaryIndexes {
			if _, err := s.write.Exec("DROP INDEX IF EXISTS " + indexName(ddl)); err != nil {
				return fmt.Errorf("begin bulk: %w", err)
			}
		}
		return nil
	})
}

// EndBulk ends one BeginBulk. The last one rebuilds the indexes, one
// statement at a time so appends queued meanwhile commit between them,
// and then merges the pending tag rows; step, when set, is told what runs
// next. It keeps going when ctx ends (an index left out would make every
// later read scan) and stops only if the store closes, in which case the
// next Open finishes the work.
func (s *Store) EndBulk(step func(string)) error {
	ctx := context.Background()
	last := false
	if err := s.control(ctx, func() error {
		s.bulk = max(0, s.bulk-1)
		last = s.bulk == 0
		return nil
	}); err != nil || !last {
		return err
	}
	for _, ddl := range secondaryIndexes {
		if step != nil {
			step("building index " + indexName(ddl))
		}
		if err := s.control(ctx, func() error {
			if s.bulk > 0 {
				return nil // a new bulk load began; it rebuilds at its end
			}
			// An index lost to a power cut is rebuilt by the next Open;
			// the merge below commits durably, with everything before it.
			if err := s.setRelaxed(true); err != nil {
				return err
			}
			if err := sorting(s.write, func() error {
				_, err := s.write.Exec(ddl)
				return err
			}); err != nil {
				return err
			}
			s.wakeCheckpointer() // the index's pages are in the WAL
			return nil
		}); err != nil {
			return fmt.Errorf("end bulk: %w", err)
		}
	}
	if step != nil {
		step("merging tag rows")
	}
	return s.control(ctx, func() error {
		if err := s.setRelaxed(false); err != nil {
			return fmt.Errorf("end bulk: %w", err)
		}
		if err := sorting(s.write, func() error {
			_, err := s.write.Exec(`BEGIN IMMEDIATE;` + mergePending + `COMMIT;`)
			return err
		}); err != nil {
			s.write.Exec(`ROLLBACK`)
			return fmt.Errorf("end bulk: %w", err)
		}
		s.bulkOn.Store(s.bulk > 0)
		s.wakeCheckpointer()
		return nil
	})
}

// Bulk reports whether a bulk load is under way (reads scan meanwhile).
func (s *Store) Bulk() bool { return s.bulkOn.Load() }

// commit writes a batch in one transaction (see groupcommit.Commit) and
// hands the outcome to the finisher.
func (s *Store) commit(batch []*groupcommit.Request) {
	groupcommit.Commit(batch, s.insertBatch, func(batch []*groupcommit.Request, results []Result, committed []Committed, err error) {
		s.finished <- finishJob{reqs: slices.Clone(batch), results: results, committed: committed, err: err}
	})
}

// finisher runs the hook over each committed batch, in commit order, and
// then answers its appends.
func (s *Store) finisher() {
	defer s.wg.Done()
	for j := range s.finished {
		if j.barrier != nil {
			close(j.barrier)
			continue
		}
		j.err = s.full.classify(j.err)
		if h := s.hook.Load(); j.err == nil && len(j.committed) > 0 && h != nil {
			(*h)(j.committed)
		}
		groupcommit.AnswerAll(j.reqs, j.results, j.err)
	}
}

// sorting runs fn, a statement that sorts the whole log (an index build or
// the tag merge), on the writer connection with SQLite's sorter spread
// over every core. The sorter uses worker threads only when it spills
// sorted runs to temporary files and holds a run in at most the page
// cache: with temp_store=MEMORY or the writer's 512 MiB cache it sorts
// everything at once on one thread. With temporary files, a thread per
// core and a 4 MiB cache it sorts runs in parallel, and smaller runs sort
// faster too: an index over 1M events builds in 1.7 s instead of 4.2 s,
// and the tag merge takes 3.4 s instead of 7.4 s. The runs (about the
// size of the index) go to SQLite's temporary directory (SQLITE_TMPDIR,
// else /var/tmp, else /tmp). The writer's settings are restored after.
// fn must be safe to run twice: if it fails this way (no writable
// temporary directory, say), any transaction it left open is rolled back
// and it runs once more with everything sorted in memory on one thread.
func sorting(w *sql.DB, fn func() error) error {
	threads := min(runtime.GOMAXPROCS(0), 8) // SQLite's MAX_WORKER_THREADS
	_, err := w.Exec(fmt.Sprintf("PRAGMA temp_store=FILE; PRAGMA threads=%d; PRAGMA cache_size=-4096", threads))
	if err == nil {
		err = fn()
	}
	failed := err != nil
	if failed {
		w.Exec("ROLLBACK") // an error when none is open
	}
	if _, rerr := w.Exec("PRAGMA temp_store=MEMORY; PRAGMA threads=0; PRAGMA cache_size=" + writerCache); rerr != nil {
		return fmt.Errorf("restore writer settings: %w", rerr)
	}
	if failed {
		return fn()
	}
	return nil
}

// setRelaxed switches the writer connection's synchronous setting.
func (s *Store) setRelaxed(relaxed bool) error {
	if relaxed == s.relaxed {
		return nil
	}
	mode := "FULL"
	if relaxed {
		mode = "NORMAL"
	}
	if _, err := s.write.Exec("PRAGMA synchronous=" + mode); err != nil {
		return fmt.Errorf("synchronous %s: %w", mode, err)
	}
	s.relaxed = relaxed
	return nil
}

func (s *Store) insertBatch(batch []*groupcommit.Request) ([]Result, []Committed, error) {
	if s.logErr != nil {
		return nil, nil, s.logErr
	}
	relaxed := true
	for _, r := range batch {
		relaxed = relaxed && r.Relaxed
	}
	if err := s.setRelaxed(relaxed); err != nil {
		return nil, nil, err
	}
	tx, err := s.write.BeginTx(context.Background(), nil)
	if err != nil {
		return nil, nil, fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback()
	if s.unsure {
		if err := s.catchUp(tx); err != nil {
			return nil, nil, err
		}
	}
	st := &txStmts{revoke: tx.Stmt(s.insRevoke), id: tx.Stmt(s.selID), ids: s.ids,
		first: s.nextSeq, next: s.nextSeq,
		events: &rowBatch{what: "events", tx: tx, ins: s.insEvents},
		tags:   &rowBatch{what: "tags", tx: tx, ins: s.insTags}}
	if s.bulk > 0 {
		st.pending = true
		st.tags.ins = s.insPending
	}
	results, committed, bodies, err := st.insertAll(batch)
	if err == nil {
		if err = tx.Commit(); err != nil {
			err = fmt.Errorf("commit: %w", err)
		}
	}
	if err != nil {
		// Their seqs go to the next events.
		s.ids.forget(st.added, st.first)
		s.unsure = true
		return nil, nil, err
	}
	s.nextSeq = st.next
	s.items.write(st.items)
	s.authors.add(st.entries)
	s.ids.settle(false)
	// Newest-first reads mostly ask for what was just published. A bulk
	// load would only churn the cache.
	if s.bulk == 0 {
		for i, c := range committed {
			s.cache.put(c.Seq, bodies[i])
		}
	}
	return results, committed, nil
}

// catchUp records in the id index any event stored at nextSeq or after,
// and moves nextSeq past them, in tx. After a failed transaction the log
// should hold none (SQLite rolls it back), but a commit that reports an
// error after its frames became durable would leave them stored: their ids
// must then stay unique and their seqs taken.
func (s *Store) catchUp(tx *sql.Tx) error {
	rows, err := tx.Query(`SELECT seq, id, agent_id, created_at, kind FROM events WHERE seq >= ? ORDER BY seq`, s.nextSeq)
	if err != nil {
		return fmt.Errorf("catch up: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var seq, at, kind int64
		var id, agent []byte
		if err := rows.Scan(&seq, &id, &agent, &at, &kind); err != nil {
			return fmt.Errorf("catch up: %w", err)
		}
		if seq > maxSeq {
			return fmt.Errorf("catch up: seq %d: %w", seq, errLogFull)
		}
		if len(id) == 32 {
			s.ids.put(id, seq)
			s.items.write([]newItem{{seq: seq, at: at, id: [32]byte(id)}})
			if len(agent) == 32 {
				s.authors.add([]newEntry{{agent: [32]byte(agent), at: at, kind: kind, seq: seq, id: idPrefix(id)}})
			}
		}
		s.nextSeq = seq + 1
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("catch up: %w", err)
	}
	s.unsure = false
	return nil
}

// insertAll runs insertOne over batch, stopping at the first error.
func (st *txStmts) insertAll(batch []*groupcommit.Request) ([]Result, []Committed, [][]byte, error) {
	results := make([]Result, len(batch))
	var committed []Committed
	var bodies [][]byte
	for i, r := range batch {
		seq, dup, body, err := st.insertOne(r.Rec)
		if err != nil {
			return nil, nil, nil, err
		}
		results[i] = Result{Seq: seq, Duplicate: dup}
		if !dup {
			committed = append(committed, Committed{Seq: seq, Event: r.Rec.Event})
			bodies = append(bodies, body)
		}
	}
	if err := st.events.flush(); err != nil {
		return nil, nil, nil, err
	}
	if err := st.tags.flush(); err != nil {
		return nil, nil, nil, err
	}
	return results, committed, bodies, nil
}

// txStmts is one transaction of the writer.
type txStmts struct {
	revoke, id *sql.Stmt
	// pending: tag rows go to tags_pending, which has no key to drop a
	// repeated tag, so insertOne drops it.
	pending bool
	// ids keeps ids unique; added lists the ids this transaction recorded
	// in it, the first at seq first. next is the seq the next event gets.
	ids         *idIndex
	added       [][32]byte
	first, next int64
	// events gathers the events and tags their tag rows (for
	// tags_pending with pending); both are inserted many rows a statement
	// when the batch ends.
	tags, events *rowBatch
	// seqs is scratch for the id index's answers.
	seqs []int64
	// entries are the author index's entries of the events added, and
	// items their records of the items file, recorded once the
	// transaction commits.
	entries []newEntry
	items   []newItem
}

// rowBatch gathers the rows of one table in a transaction and inserts them
// many a statement when it ends (see inserter).
type rowBatch struct {
	what string
	tx   *sql.Tx
	ins  *inserter
	rows []any
}

// add gathers one row.
func (b *rowBatch) add(row ...any) { b.rows = append(b.rows, row...) }

// flush inserts the gathered rows.
func (b *rowBatch) flush() error {
	rows := b.rows
	b.rows = b.rows[:0]
	for len(rows) > 0 {
		n := min(b.ins.per, len(rows)/b.ins.width)
		if _, err := b.tx.Stmt(b.ins.stmts[n-1]).Exec(rows[:n*b.ins.width]...); err != nil {
			return fmt.Errorf("insert %s: %w", b.what, err)
		}
		rows = rows[n*b.ins.width:]
	}
	return nil
}

// inserter holds a statement inserting n rows of width values for each n
// up to per, prepared at open (the writer's one connection is the
// transaction's meanwhile): a statement each cost about a microsecond a
// row beyond SQLite's own work, and a transaction holds whatever number of
// events its publishers sent.
type inserter struct {
	head       string
	per, width int
	stmts      []*sql.Stmt // [n-1]
}

func newInserter(db *sql.DB, head string, per, width int) (*inserter, error) {
	in := &inserter{head: head, per: per, width: width, stmts: make([]*sql.Stmt, per)}
	row := "(" + sqlq.Placeholders(width) + "),"
	for n := 1; n <= per; n++ {
		st, err := db.Prepare(head + strings.TrimSuffix(strings.Repeat(row, n), ","))
		if err != nil {
			return nil, fmt.Errorf("prepare: %w", err)
		}
		in.stmts[n-1] = st
	}
	return in, nil
}

// eventsPerInsert is how many events one statement inserts.
const eventsPerInsert = 32

// pendingPerInsert is how many tag rows one statement inserts into
// tags_pending during a bulk load (a million events carry about 1.4
// million tag rows); tagsPerInsert is how many it inserts into tags
// otherwise.
const (
	pendingPerInsert = 64
	tagsPerInsert    = 32
)

// insertOne stores rec and returns its seq, whether it was already stored,
// and the body it stored.
func (st *txStmts) insertOne(rec Record) (seq int64, dup bool, body []byte, err error) {
	e := rec.Event
	id, _ := hex.DecodeString(e.ID)
	agent, _ := hex.DecodeString(e.AgentID)
	var raw any
	var rawType any
	if rec.Raw != nil {
		raw, rawType = rec.Raw, rec.RawType
	}
	body = rec.Body
	if body == nil {
		body = protocol.AppendJSON(nil, e)
	}
	if len(id) != 32 {
		return 0, false, nil, fmt.Errorf("insert event: id %q is not 32 bytes of hex", e.ID)
	}
	if seq, found, err := st.stored(id); err != nil || found {
		return seq, found, nil, err
	}
	if st.next > maxSeq {
		return 0, false, nil, errLogFull
	}
	seq, st.next = st.next, st.next+1
	st.events.add(seq, id, agent, e.CreatedAt, e.Kind, body, raw, rawType, rec.ReceivedAt)
	st.ids.put(id, seq)
	st.added = append(st.added, [32]byte(id))
	st.items = append(st.items, newItem{seq: seq, at: e.CreatedAt, id: [32]byte(id)})
	if len(agent) == 32 {
		st.entries = append(st.entries, newEntry{agent: [32]byte(agent), at: e.CreatedAt, kind: e.Kind, seq: seq, id: idPrefix(id)})
	}
	for i, t := range e.Tags {
		if len(t) < 2 || st.pending && repeatedTag(e.Tags[:i], t) {
			continue
		}
		st.tags.add(t[0], t[1], e.CreatedAt, id, e.Kind, seq)
	}
	if e.Kind == protocol.KindRevoke {
		for _, target := range e.TagValues("e") {
			tid, err := hex.DecodeString(target)
			if err != nil || len(tid) != 32 {
				continue
			}
			if _, err := st.revoke.Exec(tid, agent, id, e.CreatedAt); err != nil {
				return 0, false, nil, fmt.Errorf("insert revoke: %w", err)
			}
		}
	}
	return seq, false, body, nil
}

// stored returns the seq of id if it is stored or was added by this
// transaction. The id index gives the seqs of ids that begin as id does;
// each is checked against the id added at that seq, or stored there.
func (st *txStmts) stored(id []byte) (seq int64, found bool, err error) {
	st.seqs = st.ids.candidates(st.seqs[:0], id)
	for _, seq := range st.seqs {
		if seq >= st.first {
			if i := seq - st.first; i < int64(len(st.added)) && st.added[i] == [32]byte(id) {
				return seq, true, nil
			}
			continue
		}
		var have []byte
		switch err := st.id.QueryRow(seq).Scan(&have); {
		case errors.Is(err, sql.ErrNoRows):
		case err != nil:
			return 0, false, fmt.Errorf("read id at seq %d: %w", seq, err)
		case bytes.Equal(have, id):
			return seq, true, nil
		}
	}
	return 0, false, nil
}

// repeatedTag reports whether an earlier tag has t's name and value.
func repeatedTag(earlier [][]string, t []string) bool {
	for _, u := range earlier {
		if len(u) >= 2 && u[0] == t[0] && u[1] == t[1] {
			return true
		}
	}
	return false
}
