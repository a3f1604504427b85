package discovery

import (
	"bytes"
	"cmp"
	"crypto/rand"
	"database/sql"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/url"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	_ "modernc.org/sqlite" // the "sqlite" driver
)

// The store holds the fold's indexes that grow with the number of events
// (SPEC §2.2): the co-presence contexts and the citation edges, in an
// embedded SQLite file beside the saved state. Every write goes into one
// open transaction, which CaptureSnapshot commits with a fresh random
// token that the saved state names; a restart adopts the file only when
// its committed token is the snapshot's (a kill -9 rolls the open
// transaction back to the last save's), and otherwise empties it and the
// relay folds the log into the fold again.
const (
	// storeFormat names the file's tables; a file of another format is
	// never adopted.
	storeFormat = "discovery.store/2"
	// StoreCacheBytes is the store's page cache (SQLite's, outside the Go
	// heap).
	StoreCacheBytes = 24 << 20
	// storeMapBytes is the most of the file read through a memory map.
	storeMapBytes = 1 << 30
	// defaultMaxPendingWrites bounds the open transaction: past that many row
	// changes it is committed, which bounds the journal the transaction
	// spills to. The commit keeps the last save's token: every row
	// change since that save is in the undo journal (undoSchema), which
	// a restart from that save plays backwards first.
	defaultMaxPendingWrites = 16384
	// defaultMaxUndoRows bounds the undo journal: past it the store is
	// committed marked unsaved (its token cleared, the journal dropped),
	// so a crash before the next save rebuilds the fold.
	defaultMaxUndoRows = 4 << 20
	// BulkBufferBytes bounds the additions waiting for a flush while the
	// store is filled from empty (bulk mode, below): a flush of that
	// many rows in key order touches each leaf page about once.
	BulkBufferBytes = 64 << 20
	// BulkCacheBytes is the page cache in bulk mode.
	BulkCacheBytes = 128 << 20
)

// The bounds in force (tests lower them).
var maxPendingWrites, maxUndoRows = defaultMaxPendingWrites, defaultMaxUndoRows

// undoSchema is the undo journal: while the file's committed token names
// a save, every row change records how to take it back, so a restart
// from that save returns the file to it (rollBack) even after commits
// made since. The triggers are TEMP (this connection's only, dropped
// with it): on only while there is a save to return to.
var undoSchema = []string{
	`CREATE TABLE IF NOT EXISTS undo (n INTEGER PRIMARY KEY, op INTEGER NOT NULL, a, b, c, d, e, f)`,
}

// The undo journal's operations: what takes a row change back.
const (
	undoCtxDel   = 1 // a ctx row was inserted: delete it
	undoCtxSetN  = 2 // a ctx row's n changed: set it back
	undoCtxIns   = 3 // a ctx row was deleted: insert it
	undoCiteDel  = 4
	undoCiteIns  = 5
	undoPostDel  = 6
	undoPostIns  = 7
	undoAgentDel = 8
)

var undoTriggers = []string{
	`CREATE TEMP TRIGGER IF NOT EXISTS undo_ctx_i AFTER INSERT ON main.ctx BEGIN
		INSERT INTO undo (op, a, b, c, d) VALUES (1, NEW.typ, NEW.ref, NEW.at, NEW.agent); END`,
	`CREATE TEMP TRIGGER IF NOT EXISTS undo_ctx_u AFTER UPDATE ON main.ctx BEGIN
		INSERT INTO undo (op, a, b, c, d, e) VALUES (2, OLD.typ, OLD.ref, OLD.at, OLD.agent, OLD.n); END`,
	`CREATE TEMP TRIGGER IF NOT EXISTS undo_ctx_d AFTER DELETE ON main.ctx BEGIN
		INSERT INTO undo (op, a, b, c, d, e) VALUES (3, OLD.typ, OLD.ref, OLD.at, OLD.agent, OLD.n); END`,
	`CREATE TEMP TRIGGER IF NOT EXISTS undo_cite_i AFTER INSERT ON main.cite BEGIN
		INSERT INTO undo (op, a, b) VALUES (4, NEW.citing, NEW.target); END`,
	`CREATE TEMP TRIGGER IF NOT EXISTS undo_cite_d AFTER DELETE ON main.cite BEGIN
		INSERT INTO undo (op, a, b, c, d, e, f) VALUES (5, OLD.citing, OLD.target, OLD.agent, OLD.kind, OLD.at, OLD.rels); END`,
	`CREATE TEMP TRIGGER IF NOT EXISTS undo_posts_i AFTER INSERT ON main.posts BEGIN
		INSERT INTO undo (op, a, b, c) VALUES (6, NEW.agent, NEW.at, NEW.id); END`,
	`CREATE TEMP TRIGGER IF NOT EXISTS undo_posts_d AFTER DELETE ON main.posts BEGIN
		INSERT INTO undo (op, a, b, c, d) VALUES (7, OLD.agent, OLD.at, OLD.id, OLD.rec); END`,
	`CREATE TEMP TRIGGER IF NOT EXISTS undo_agents_i AFTER INSERT ON main.agents BEGIN
		INSERT INTO undo (op, a) VALUES (8, NEW.n); END`,
}

// undoSQL takes one journal entry back, by operation.
var undoSQL = map[int64]string{
	undoCtxDel:   `DELETE FROM ctx WHERE typ = ?1 AND ref = ?2 AND at = ?3 AND agent = ?4`,
	undoCtxSetN:  `UPDATE ctx SET n = ?5 WHERE typ = ?1 AND ref = ?2 AND at = ?3 AND agent = ?4`,
	undoCtxIns:   `INSERT INTO ctx (typ, ref, at, agent, n) VALUES (?1, ?2, ?3, ?4, ?5)`,
	undoCiteDel:  `DELETE FROM cite WHERE citing = ?1 AND target = ?2`,
	undoCiteIns:  `INSERT INTO cite (citing, target, agent, kind, at, rels) VALUES (?1, ?2, ?3, ?4, ?5, ?6)`,
	undoPostDel:  `DELETE FROM posts WHERE agent = ?1 AND at = ?2 AND id = ?3`,
	undoPostIns:  `INSERT INTO posts (agent, at, id, rec) VALUES (?1, ?2, ?3, ?4)`,
	undoAgentDel: `DELETE FROM agents WHERE n = ?1`,
}

// Context types as the store keys them.
const (
	typThread = 1
	typTopic  = 2
	typCite   = 3
)

// The secondary indexes, which bulk mode builds only when a query or the
// end of bulk mode needs them (ensureIndexes): one sort of the rows
// rather than an insert per row.
const (
	idxCtxAgent   = `CREATE INDEX IF NOT EXISTS ctx_agent ON ctx (agent, typ, at, ref)`
	idxCiteTarget = `CREATE INDEX IF NOT EXISTS cite_target ON cite (target)`
)

var storeSchema = []string{
	`CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v TEXT NOT NULL) WITHOUT ROWID`,
	`CREATE TABLE IF NOT EXISTS agents (n INTEGER PRIMARY KEY, id TEXT NOT NULL)`,
	// ctx is the multiset of (context, time, agent): n counts the events.
	`CREATE TABLE IF NOT EXISTS ctx (typ INTEGER NOT NULL, ref BLOB NOT NULL, at INTEGER NOT NULL, agent INTEGER NOT NULL,
		n INTEGER NOT NULL, PRIMARY KEY (typ, ref, at, agent)) WITHOUT ROWID`,
	idxCtxAgent,
	`CREATE TABLE IF NOT EXISTS cite (citing BLOB NOT NULL, target BLOB NOT NULL, agent INTEGER NOT NULL, kind INTEGER NOT NULL,
		at INTEGER NOT NULL, rels TEXT NOT NULL, PRIMARY KEY (citing, target)) WITHOUT ROWID`,
	idxCiteTarget,
	// posts holds each agent's post records older than its newest
	// ProfilePosts (the neighbour window, in memory): rec is the topics
	// and features (postRecBytes).
	`CREATE TABLE IF NOT EXISTS posts (agent INTEGER NOT NULL, at INTEGER NOT NULL, id BLOB NOT NULL, rec BLOB NOT NULL,
		PRIMARY KEY (agent, at, id)) WITHOUT ROWID`,
	undoSchema[0],
}

// The statements of the open transaction, by index in stmtSQL.
const (
	sCtxAdd = iota
	sCtxDec
	sCtxDel
	sCiteAdd
	sCiteDel
	sAgentAdd
	sShared
	sSharedTopic
	sPostPut
	sPostDel
	sPostNewest
	sCitedBy
	sCites
	sReach
	nStmts
)

var stmtSQL = [nStmts]string{
	sCtxAdd:   `INSERT INTO ctx (typ, ref, at, agent, n) VALUES (?, ?, ?, ?, ?) ON CONFLICT DO UPDATE SET n = n + excluded.n`,
	sCtxDec:   `UPDATE ctx SET n = n - 1 WHERE typ = ? AND ref = ? AND at = ? AND agent = ?`,
	sCtxDel:   `DELETE FROM ctx WHERE typ = ? AND ref = ? AND at = ? AND agent = ? AND n <= 0`,
	sCiteAdd:  `INSERT OR IGNORE INTO cite (citing, target, agent, kind, at, rels) VALUES (?, ?, ?, ?, ?, ?)`,
	sCiteDel:  `DELETE FROM cite WHERE citing = ?`,
	sAgentAdd: `INSERT INTO agents (n, id) VALUES (?, ?)`,
	// The other agents of each context of type ?2 agent ?1 was in within
	// [?3, ?4], also within [?3, ?4] (an agent may come once per time it
	// has there).
	sShared: `WITH mine AS (SELECT DISTINCT ref FROM ctx WHERE agent = ?1 AND typ = ?2 AND at BETWEEN ?3 AND ?4)
		SELECT mine.ref, o.agent FROM mine JOIN ctx o ON o.typ = ?2 AND o.ref = mine.ref AND o.at BETWEEN ?3 AND ?4
		WHERE o.agent != ?1`,
	// The same for topics, whose other posts must be within ?5 seconds of
	// one of the agent's (once per pair of times).
	sSharedTopic: `SELECT m.ref, o.agent FROM ctx m JOIN ctx o ON o.typ = m.typ AND o.ref = m.ref
		AND o.at BETWEEN max(?3, m.at - ?5) AND min(?4, m.at + ?5)
		WHERE m.agent = ?1 AND m.typ = ?2 AND m.at BETWEEN ?3 AND ?4 AND o.agent != ?1`,
	sPostPut:    `INSERT OR IGNORE INTO posts (agent, at, id, rec) VALUES (?, ?, ?, ?)`,
	sPostDel:    `DELETE FROM posts WHERE agent = ? AND at = ? AND id = ?`,
	sPostNewest: `SELECT at, id, rec FROM posts WHERE agent = ? ORDER BY at DESC, id DESC LIMIT 1`,
	sCitedBy:    `SELECT citing, agent, kind, at, rels FROM cite WHERE target = ?`,
	sCites:      `SELECT target, agent, kind, at, rels FROM cite WHERE citing = ? ORDER BY target`,
	sReach:      `SELECT count(DISTINCT agent) FROM cite WHERE target = ? AND agent != ?`,
}

// store is the fold's SQLite file. Its methods are called with the fold's
// lock held (writes: the write lock); mu serialises the statements, which
// readers under the read lock share.
type store struct {
	path string // "" in memory
	temp bool   // a file of this process's only, removed at close

	mu    sync.Mutex
	db    *sql.DB
	tx    *sql.Tx
	stmts [nStmts]*sql.Stmt
	// pending counts the row changes of the open transaction; undoRows
	// the entries of the undo journal (an estimate: row changes since
	// the save), journaling whether its triggers are on.
	pending    int
	undoRows   int
	journaling bool
	// committed is the token of the file's last commit ("" unsaved);
	// unchecked reports a file opened with content that no Restore has
	// accepted yet: it reads as empty, and the first write empties it.
	committed string
	unchecked bool
	// agents interns the agents of the rows: id → n and n → id.
	agentN map[string]int64
	names  []string
	// ctxAdds and citeAdds are the additions not yet written (flush),
	// written in key order in batches: readers flush them first, and a
	// removal flushes them before it runs.
	ctxAdds  map[ctxKey]int64
	citeAdds []citeRow
	postAdds []postRow
	// bufBytes estimates the bytes of the buffered additions.
	bufBytes int
	// bulk reports a store being filled from empty (a file created or
	// emptied, with no token yet): no rollback journal, no fsync, no
	// bound on the open transaction, BulkBufferBytes of buffer and
	// BulkCacheBytes of cache. A file store leaves it at its first save
	// (leaveBulk); a temporary one never does.
	bulk bool
	// unindexed reports a bulk store whose secondary indexes are not
	// built yet (ensureIndexes).
	unindexed bool
	// failed is the first error of a write or read: the next capture
	// saves no token, so the next start rebuilds the store.
	failed atomic.Pointer[error]
}

// ctxKey is a ctx row's key.
type ctxKey struct {
	typ   int
	ref   string
	at    int64
	agent int64
}

// citeRow is a cite row.
type citeRow struct {
	citing, target  string // bytes
	agent, kind, at int64
	rels            string
}

// postRow is a posts row.
type postRow struct {
	agent, at int64
	id, rec   []byte
}

// maxBuffered is how many additions wait for a flush at most, out of
// bulk mode.
const maxBuffered = 4096

// Estimated heap bytes of one buffered addition besides its strings and
// slices' bytes (struct, map or slice slot, headers).
const (
	ctxAddBytes  = 96
	citeAddBytes = 112
	postAddBytes = 96
)

// full reports whether the buffered additions are to be written.
func (s *store) full() bool {
	if s.bulk {
		return s.bufBytes >= BulkBufferBytes
	}
	return s.buffered() >= maxBuffered
}

// addCtx buffers one (context, time, agent) more. Callers hold the fold's
// write lock.
func (s *store) addCtx(k ctxKey) {
	if s.ctxAdds == nil {
		s.ctxAdds = map[ctxKey]int64{}
	}
	if s.ctxAdds[k]++; s.ctxAdds[k] == 1 {
		s.bufBytes += ctxAddBytes + len(k.ref)
	}
	if s.full() {
		s.flush()
	}
}

// buffered is the number of additions waiting.
func (s *store) buffered() int { return len(s.ctxAdds) + len(s.citeAdds) + len(s.postAdds) }

// addCite buffers one citation edge. Callers hold the fold's write lock.
func (s *store) addCite(r citeRow) {
	s.citeAdds = append(s.citeAdds, r)
	s.bufBytes += citeAddBytes + len(r.citing) + len(r.target) + len(r.rels)
	if s.full() {
		s.flush()
	}
}

// flush writes the buffered additions, in key order. Callers hold the
// fold's write lock, or its read lock and mu (no writer runs then).
func (s *store) flush() {
	if s.buffered() == 0 {
		return
	}
	keys := make([]ctxKey, 0, len(s.ctxAdds))
	for k := range s.ctxAdds {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b ctxKey) int {
		return cmp.Or(cmp.Compare(a.typ, b.typ), cmp.Compare(a.ref, b.ref), cmp.Compare(a.at, b.at), cmp.Compare(a.agent, b.agent))
	})
	for _, k := range keys {
		_, err := s.stmts[sCtxAdd].Exec(k.typ, []byte(k.ref), k.at, k.agent, s.ctxAdds[k])
		s.fail(err)
	}
	slices.SortStableFunc(s.citeAdds, func(a, b citeRow) int { return cmp.Compare(a.citing, b.citing) })
	for _, r := range s.citeAdds {
		_, err := s.stmts[sCiteAdd].Exec([]byte(r.citing), []byte(r.target), r.agent, r.kind, r.at, r.rels)
		s.fail(err)
	}
	slices.SortFunc(s.postAdds, func(a, b postRow) int {
		return cmp.Or(cmp.Compare(a.agent, b.agent), cmp.Compare(a.at, b.at), bytes.Compare(a.id, b.id))
	})
	for _, r := range s.postAdds {
		_, err := s.stmts[sPostPut].Exec(r.agent, r.at, r.id, r.rec)
		s.fail(err)
	}
	n := len(keys) + len(s.citeAdds) + len(s.postAdds)
	clear(s.ctxAdds)
	s.citeAdds, s.postAdds = s.citeAdds[:0], s.postAdds[:0]
	if s.bulk {
		// Give the buffer's memory back rather than keep its peak.
		s.ctxAdds, s.citeAdds, s.postAdds = nil, nil, nil
	}
	s.bufBytes = 0
	s.wrote(n)
}

// putPost writes p, a post record of agent that left its window (or
// never entered it). Callers hold the fold's write lock.
func (s *store) putPost(agent string, p *postRec) {
	rec := appendTexts(nil, p.topics)
	rec = binary.AppendUvarint(rec, uint64(len(p.feats)))
	for _, ft := range p.feats {
		rec = binary.AppendUvarint(rec, uint64(ft.dim))
		rec = binary.AppendUvarint(rec, uint64(ft.w))
	}
	s.postAdds = append(s.postAdds, postRow{s.agent(agent), p.at, idBlob(p.id), rec})
	s.bufBytes += postAddBytes + 32 + len(rec)
	if s.full() {
		s.flush()
	}
}

// delPost deletes agent's post record (at, id), if stored. Callers hold
// the fold's write lock.
func (s *store) delPost(agent string, at int64, id string) {
	if n := s.agentOf(agent); n >= 0 {
		s.flush()
		_, err := s.stmts[sPostDel].Exec(n, at, idBlob(id))
		s.fail(err)
		s.wrote(1)
	}
}

// popPost takes agent's newest stored post record out of the store (nil
// when it has none). Callers hold the fold's write lock.
func (s *store) popPost(agent string, strs interner) *postRec {
	n := s.agentOf(agent)
	if n < 0 {
		return nil
	}
	s.flush()
	var at int64
	var id, rec []byte
	switch err := s.stmts[sPostNewest].QueryRow(n).Scan(&at, &id, &rec); {
	case errors.Is(err, sql.ErrNoRows):
		return nil
	case err != nil:
		s.fail(err)
		return nil
	}
	r := &savedReader{b: rec, intern: map[string]string(strs)}
	p := &postRec{at: at, id: hex.EncodeToString(id), topics: r.texts(), feats: make([]feature, r.count())}
	for i := range p.feats {
		p.feats[i] = feature{uint32(r.uvarint()), float32(r.uvarint())}
	}
	if r.err != nil || len(r.b) != 0 {
		s.fail(fmt.Errorf("discovery store: damaged post record %s", p.id))
		return nil
	}
	p.pre = idPrefix(p.id)
	_, err := s.stmts[sPostDel].Exec(n, at, id)
	s.fail(err)
	s.wrote(1)
	return p
}

// memSeq numbers in-memory stores (each its own database).
var memSeq atomic.Int64

// openStore opens the store at path ("" in memory; temp: removed at
// close) and begins its write transaction.
func openStore(path string, temp bool) (*store, error) {
	s := &store{path: path, temp: temp}
	if err := s.open(); err != nil {
		if path == "" {
			return nil, err
		}
		// A file that does not open as a store of this format is
		// replaced: it is derived state, and the log rebuilds it.
		slog.Warn("discovery store unusable: starting it anew", "path", path, "err", err)
		if s.db != nil {
			s.db.Close()
		}
		removeStoreFiles(path)
		if err := s.open(); err != nil {
			return nil, err
		}
	}
	return s, nil
}

func (s *store) dsn() string {
	q := url.Values{}
	if s.temp {
		// Nothing to protect in a file of this process's only: a crash
		// leaves it to the sweep (tempstore), never to a reader.
		q.Add("_pragma", "journal_mode(OFF)")
		q.Add("_pragma", "synchronous(OFF)")
		q.Add("_pragma", fmt.Sprintf("mmap_size(%d)", storeMapBytes))
	} else if s.path != "" {
		q.Add("_pragma", "journal_mode(WAL)")
		// Durability comes from the token, not from fsync: a commit that
		// a power loss takes back leaves a token no snapshot names.
		q.Add("_pragma", "synchronous(NORMAL)")
		// Pages are read through a memory map of the file (the kernel's
		// page cache, reclaimable) rather than copied in with a pread
		// each past the page cache.
		q.Add("_pragma", fmt.Sprintf("mmap_size(%d)", storeMapBytes))
	}
	q.Add("_pragma", fmt.Sprintf("cache_size(%d)", -StoreCacheBytes/1024))
	q.Add("_pragma", "temp_store(MEMORY)")
	if s.path == "" {
		return fmt.Sprintf("file:anp2-discovery-%d?mode=memory&", memSeq.Add(1)) + q.Encode()
	}
	return "file:" + s.path + "?" + q.Encode()
}

// open opens the file, creates its tables, reads its token and agents and
// begins the write transaction.
func (s *store) open() error {
	db, err := sql.Open("sqlite", s.dsn())
	if err != nil {
		return err
	}
	// One connection: the transaction's, which every read shares so that
	// it sees the writes not yet committed.
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(0)
	s.db = db
	for _, q := range storeSchema {
		if _, err := db.Exec(q); err != nil {
			return fmt.Errorf("discovery store: %w", err)
		}
	}
	meta := map[string]string{}
	rows, err := db.Query(`SELECT k, v FROM meta`)
	if err != nil {
		return fmt.Errorf("discovery store: %w", err)
	}
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			rows.Close()
			return fmt.Errorf("discovery store: %w", err)
		}
		meta[k] = v
	}
	if err := rows.Close(); err != nil {
		return fmt.Errorf("discovery store: %w", err)
	}
	var any int
	if err := db.QueryRow(`SELECT count(*) FROM (SELECT 1 FROM agents LIMIT 1)`).Scan(&any); err != nil {
		return fmt.Errorf("discovery store: %w", err)
	}
	if f := meta["format"]; f != "" && f != storeFormat {
		return fmt.Errorf("discovery store: format %q, want %q", f, storeFormat)
	}
	s.committed, s.unchecked = meta["token"], any > 0 || meta["token"] != ""
	s.agentN, s.names = map[string]int64{}, nil
	s.journaling, s.undoRows = false, 0 // a new connection: no TEMP trigger
	s.failed.Store(nil)
	if s.path != "" && !s.unchecked {
		if err := s.enterBulk(); err != nil {
			return err
		}
	}
	return s.begin()
}

// begin opens the write transaction and prepares its statements.
func (s *store) begin() error {
	tx, err := s.db.Begin()
	if err != nil {
		return fmt.Errorf("discovery store: begin: %w", err)
	}
	s.tx, s.pending = tx, 0
	for i, q := range stmtSQL {
		if q == "" {
			return fmt.Errorf("discovery store: statement %d has no SQL", i)
		}
		if s.stmts[i], err = tx.Prepare(q); err != nil {
			return fmt.Errorf("discovery store: prepare: %w", err)
		}
	}
	return nil
}

// enterBulk puts an empty file store in bulk mode (see store.bulk):
// until its first save commits a token, a crash leaves a file whose token
// no snapshot names, which the next start empties whatever its pages
// hold (or replaces, when it does not open), so the rollback journal and
// the fsyncs protect nothing the log does not rebuild.
func (s *store) enterBulk() error {
	for _, q := range []string{`PRAGMA journal_mode=OFF`, `PRAGMA synchronous=OFF`,
		fmt.Sprintf(`PRAGMA cache_size=%d`, -BulkCacheBytes/1024),
		`DROP INDEX IF EXISTS ctx_agent`, `DROP INDEX IF EXISTS cite_target`} {
		if _, err := s.db.Exec(q); err != nil {
			return fmt.Errorf("discovery store: bulk: %w", err)
		}
	}
	s.bulk, s.unindexed = true, true
	return nil
}

// ensureIndexes builds the secondary indexes a bulk fill left out, after
// writing the buffer. Callers hold mu or the fold's write lock.
func (s *store) ensureIndexes() {
	if !s.unindexed {
		return
	}
	s.flush()
	for _, q := range []string{idxCtxAgent, idxCiteTarget} {
		_, err := s.tx.Exec(q)
		s.fail(err)
	}
	s.unindexed = false
}

// leaveBulk ends a file store's bulk mode before its first token is
// committed: it commits what the fill wrote, fsyncs the file (those pages
// went there with no journal and no fsync; the token must not reach the
// disk before them), and returns the file to its write-ahead log,
// synchronous=NORMAL and StoreCacheBytes of cache, then begins the next
// transaction. A temporary store stays in bulk mode.
func (s *store) leaveBulk() error {
	if !s.bulk || s.temp {
		return nil
	}
	t0 := time.Now()
	defer func() {
		slog.Info("discovery store: bulk fill ended", "path", s.path, "seconds", time.Since(t0).Seconds())
	}()
	s.ensureIndexes()
	if err := s.tx.Commit(); err != nil {
		return fmt.Errorf("discovery store: commit: %w", err)
	}
	s.tx = nil
	for i, st := range s.stmts {
		if st != nil {
			st.Close()
			s.stmts[i] = nil
		}
	}
	// The transaction begins again whatever fails: the failure is
	// recorded (no token is saved after it) and the fold goes on.
	err := s.toWAL()
	return errors.Join(err, s.begin())
}

// toWAL fsyncs the file and returns it to its write-ahead log,
// synchronous=NORMAL and StoreCacheBytes of cache (leaveBulk).
func (s *store) toWAL() error {
	if err := syncFile(s.path); err != nil {
		return fmt.Errorf("discovery store: %w", err)
	}
	var mode string
	if err := s.db.QueryRow(`PRAGMA journal_mode=WAL`).Scan(&mode); err != nil || mode != "wal" {
		return fmt.Errorf("discovery store: journal mode %q: %w", mode, err)
	}
	for _, q := range []string{`PRAGMA synchronous=NORMAL`, fmt.Sprintf(`PRAGMA cache_size=%d`, -StoreCacheBytes/1024)} {
		if _, err := s.db.Exec(q); err != nil {
			return fmt.Errorf("discovery store: %w", err)
		}
	}
	s.bulk = false
	return nil
}

// syncFile fsyncs the file at path.
func syncFile(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	err = f.Sync()
	return errors.Join(err, f.Close())
}

// commit commits the open transaction with token (a new save's, or ""
// while no save names the file) and begins the next. A token ends bulk
// mode first (leaveBulk). A save's commit empties the undo journal: the
// file is now at that save.
func (s *store) commit(token string) error {
	if token != "" {
		if err := s.leaveBulk(); err != nil {
			return err
		}
	}
	s.flush()
	if _, err := s.tx.Exec(`DELETE FROM undo`); err != nil {
		return fmt.Errorf("discovery store: %w", err)
	}
	s.undoRows = 0
	return s.commitAs(token)
}

// commitAs commits the open transaction with token as the file's, the
// undo journal left as it is, and begins the next transaction, with the
// journal on while the token names a save.
func (s *store) commitAs(token string) error {
	if _, err := s.tx.Exec(`INSERT INTO meta (k, v) VALUES ('token', ?), ('format', ?)
		ON CONFLICT DO UPDATE SET v = excluded.v`, token, storeFormat); err != nil {
		return fmt.Errorf("discovery store: %w", err)
	}
	if err := s.tx.Commit(); err != nil {
		return fmt.Errorf("discovery store: commit: %w", err)
	}
	s.committed = token
	if err := s.begin(); err != nil {
		return err
	}
	return s.journal(token != "")
}

// journal turns the undo journal's triggers on or off.
func (s *store) journal(on bool) error {
	if on == s.journaling {
		return nil
	}
	for i, q := range undoTriggers {
		if !on {
			q = "DROP TRIGGER IF EXISTS temp." + strings.Fields(q)[6]
		}
		if _, err := s.tx.Exec(q); err != nil {
			return fmt.Errorf("discovery store: undo journal (%d): %w", i, err)
		}
	}
	s.journaling = on
	return nil
}

// rollBack plays the undo journal backwards, newest entry first, and
// empties it: the file returns to the save its token names. The
// triggers are off meanwhile (they are on only after it).
func (s *store) rollBack() (int, error) {
	stmts := map[int64]*sql.Stmt{}
	defer func() {
		for _, st := range stmts {
			st.Close()
		}
	}()
	n, last := 0, int64(math.MaxInt64)
	for {
		rows, err := s.tx.Query(`SELECT n, op, a, b, c, d, e, f FROM undo WHERE n < ? ORDER BY n DESC LIMIT 8192`, last)
		if err != nil {
			return n, err
		}
		type entry struct {
			op   int64
			args [6]any
		}
		var batch []entry
		for rows.Next() {
			var e entry
			if err := rows.Scan(&last, &e.op, &e.args[0], &e.args[1], &e.args[2], &e.args[3], &e.args[4], &e.args[5]); err != nil {
				rows.Close()
				return n, err
			}
			batch = append(batch, e)
		}
		if err := rows.Close(); err != nil {
			return n, err
		}
		if len(batch) == 0 {
			break
		}
		for _, e := range batch {
			st := stmts[e.op]
			if st == nil {
				q, ok := undoSQL[e.op]
				if !ok {
					return n, fmt.Errorf("undo journal: unknown operation %d", e.op)
				}
				if st, err = s.tx.Prepare(q); err != nil {
					return n, err
				}
				stmts[e.op] = st
			}
			if _, err := st.Exec(e.args[:]...); err != nil {
				return n, fmt.Errorf("undo journal: operation %d: %w", e.op, err)
			}
			n++
		}
	}
	_, err := s.tx.Exec(`DELETE FROM undo`)
	return n, err
}

// fail records err (the first one) and logs it.
func (s *store) fail(err error) {
	if err == nil {
		return
	}
	if s.failed.CompareAndSwap(nil, &err) {
		slog.Error("discovery store failed: the fold is rebuilt from the log at the next start", "path", s.path, "err", err)
	}
}

// wrote counts n row changes; past maxPendingWrites the transaction is
// committed, keeping the token of the last save (whose undo journal
// holds these changes), or unsaved once the journal passes maxUndoRows.
func (s *store) wrote(n int) {
	if s.journaling {
		s.undoRows += n
	}
	if s.pending += n; s.pending < maxPendingWrites || s.bulk {
		return // bulk mode: no bound (see store.bulk)
	}
	if s.undoRows < maxUndoRows {
		s.fail(s.commitAs(s.committed))
		return
	}
	s.fail(s.commit(""))
}

// closed reports whether the store was closed (its fold must not be used
// any more: it then reads as empty and folds nothing).
func (s *store) closed() bool { return s.tx == nil }

// empty reports whether the store reads as empty: unchecked or closed.
func (s *store) empty() bool { return s.unchecked || s.closed() }

// check empties a file no Restore has accepted before its first write.
func (s *store) check() {
	if s.unchecked {
		s.fail(s.wipe())
	}
}

// adopt accepts the file when its committed token is token and its
// format the current one, loading its agents; otherwise it empties it.
func (s *store) adopt(token string) error {
	if token == "" || token != s.committed {
		err := fmt.Errorf("discovery store: token %q, the saved state names %q", s.committed, token)
		s.fail(s.wipe())
		return err
	}
	if err := s.sizeOK(); err != nil {
		s.fail(s.wipe())
		return err
	}
	if n, err := s.rollBack(); err != nil {
		s.fail(s.wipe())
		return fmt.Errorf("discovery store: undo journal: %w", err)
	} else if n > 0 {
		slog.Info("discovery store: row changes since the save taken back", "path", s.path, "changes", n)
	}
	rows, err := s.tx.Query(`SELECT n, id FROM agents ORDER BY n`)
	if err != nil {
		s.fail(s.wipe())
		return fmt.Errorf("discovery store: %w", err)
	}
	names := []string{}
	for rows.Next() {
		var n int64
		var id string
		if err = rows.Scan(&n, &id); err != nil || n != int64(len(names)) {
			err = errors.Join(err, fmt.Errorf("discovery store: agents out of sequence"))
			break
		}
		names = append(names, id)
	}
	err = errors.Join(err, rows.Close())
	if err != nil {
		s.fail(s.wipe())
		return err
	}
	s.names, s.agentN, s.unchecked = names, make(map[string]int64, len(names)), false
	for i, id := range names {
		s.agentN[id] = int64(i)
	}
	if err := s.journal(true); err != nil {
		s.fail(err)
	}
	return nil
}

// sizeOK refuses a file shorter than its pages (truncated): a quick check
// that reads no page. Pages still in the write-ahead log are not in the
// file yet, so the check is skipped while one holds frames.
func (s *store) sizeOK() error {
	if s.path == "" {
		return nil
	}
	if fi, err := os.Stat(s.path + "-wal"); err == nil && fi.Size() > 0 {
		return nil
	}
	var pages, size int64
	if err := s.tx.QueryRow(`PRAGMA page_count`).Scan(&pages); err != nil {
		return fmt.Errorf("discovery store: %w", err)
	}
	if err := s.tx.QueryRow(`PRAGMA page_size`).Scan(&size); err != nil {
		return fmt.Errorf("discovery store: %w", err)
	}
	fi, err := os.Stat(s.path)
	if err != nil {
		return fmt.Errorf("discovery store: %w", err)
	}
	if fi.Size() < pages*size {
		return fmt.Errorf("discovery store: file of %d bytes holds %d pages of %d bytes (truncated)", fi.Size(), pages, size)
	}
	return nil
}

// wipe empties the store: the file is closed, removed and created anew.
func (s *store) wipe() error {
	s.closeDB()
	if s.path != "" {
		removeStoreFiles(s.path)
	}
	if err := s.open(); err != nil {
		return err
	}
	s.unchecked = false
	return nil
}

// closeDB rolls the open transaction back and closes the database.
func (s *store) closeDB() {
	clear(s.ctxAdds)
	s.citeAdds, s.postAdds = nil, nil
	for i, st := range s.stmts {
		if st != nil {
			st.Close()
			s.stmts[i] = nil
		}
	}
	if s.tx != nil {
		// Without a journal (bulk mode) the pages spilled to the file
		// stay there: the file then holds no token, and is emptied
		// before it is read again.
		s.tx.Rollback()
		s.tx = nil
	}
	s.bufBytes, s.bulk, s.unindexed = 0, false, false
	if s.db != nil {
		s.db.Close()
		s.db = nil
	}
}

// close rolls back what no save committed and closes the file (removing
// a temporary one).
func (s *store) close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.db == nil {
		return nil
	}
	s.closeDB()
	if s.temp {
		removeStoreFiles(s.path)
	}
	return nil
}

func removeStoreFiles(path string) {
	for _, p := range []string{path, path + "-wal", path + "-shm", path + "-journal"} {
		os.Remove(p)
	}
}

// newToken is a fresh random token.
func newToken() string {
	b := make([]byte, 16)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// agent returns id's number, interning it (a row of agents) when new.
// Callers hold the fold's write lock.
func (s *store) agent(id string) int64 {
	if n, ok := s.agentN[id]; ok {
		return n
	}
	n := int64(len(s.names))
	id = cloneString(id)
	if _, err := s.stmts[sAgentAdd].Exec(n, id); err != nil {
		s.fail(err)
	}
	s.wrote(1)
	s.agentN[id] = n
	s.names = append(s.names, id)
	return n
}

// agentOf returns id's number, or -1 when it has none.
func (s *store) agentOf(id string) int64 {
	if n, ok := s.agentN[id]; ok {
		return n
	}
	return -1
}

// name is agent n's id.
func (s *store) name(n int64) string {
	if n < 0 || n >= int64(len(s.names)) {
		return ""
	}
	return s.names[n]
}

// idBlob is a 64-hex id as its 32 bytes (other text as it is).
func idBlob(id string) []byte {
	b, err := hex.DecodeString(id)
	if err != nil || len(b) != 32 {
		return []byte(id)
	}
	return b
}

// cloneString copies s, so that it does not keep the parsed event whose
// body it was cut from alive.
func cloneString(s string) string {
	if s == "" {
		return ""
	}
	return string(append([]byte(nil), s...))
}

// storeCloser closes a fold's store once the fold is unreachable (a fold
// nobody closed: tests, replays, branch folds).
func storeCloser(s *store) {
	runtime.SetFinalizer(s, func(s *store) { s.close() })
}
