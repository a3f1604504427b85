package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/anp2net/relay/relay/eventlog"
	"github.com/anp2net/relay/relay/eventlog/sqlq"

	"github.com/anp2net/relay/protocol"
)

// ErrNotFound is returned when no stored event has the requested id.
var ErrNotFound = eventlog.ErrNotFound

// query is a Filter with what the store adds to it (see resolve): the
// seqs the id index gives for IDs, or those the author index gives for
// Authors (the candidates), of which authorMore tells that more remain.
type query struct {
	sqlq.Query
	authorMore bool
}

// dialect is SQLite's SQL for the shared statements (see sqlq.Dialect);
// bulkDialect reads tag rows from tags_pending too, while a bulk load
// may have put some there.
var (
	dialect     = sqlq.Dialect{Tags: "tags", TagKey: "seq", Join: "CROSS JOIN", BySeq: " NOT INDEXED"}
	bulkDialect = sqlq.Dialect{Tags: "(SELECT * FROM tags UNION ALL SELECT * FROM tags_pending)", TagKey: "seq", Join: "CROSS JOIN", BySeq: " NOT INDEXED"}
)

// dialect returns the dialect of a statement that starts now.
func (s *Store) dialect() *sqlq.Dialect {
	if s.bulkOn.Load() {
		return &bulkDialect
	}
	return &dialect
}

// reader runs the shared statements on the read pool.
type reader struct{ db *sql.DB }

func (r reader) Query(ctx context.Context, q string, args ...any) (sqlq.Rows, error) {
	rows, err := r.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	return rows, nil
}

// Lookup reports whether id is stored and, if so, its signature, so the
// relay can answer a duplicate without verifying it again.
func (s *Store) Lookup(ctx context.Context, id string) (sig string, found bool, err error) {
	idb, ok := decodeID(id)
	if !ok {
		return "", false, nil
	}
	err = s.readByID(ctx, idb, s.lookupSeq, &sig)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("lookup: %w", err)
	}
	return sig, true, nil
}

// Get returns the stored event id, or ErrNotFound.
func (s *Store) Get(ctx context.Context, id string) (*Stored, error) {
	idb, ok := decodeID(id)
	if !ok {
		return nil, ErrNotFound
	}
	st := &Stored{}
	var rawType sql.NullString
	err := s.readByID(ctx, idb, s.getSeq, &st.Seq, &st.Body, &st.Raw, &rawType, &st.ReceivedAt)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("get event: %w", err)
	}
	st.RawType = rawType.String
	if st.Raw == nil {
		st.Raw, st.RawType = st.Body, "json"
	}
	return st, nil
}

// GetEvent returns the decoded stored event id, or ErrNotFound.
func (s *Store) GetEvent(ctx context.Context, id string) (*protocol.Event, error) {
	st, err := s.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	return protocol.DecodeJSON(st.Body)
}

// Author returns the agent_id of stored event id, or ErrNotFound.
func (s *Store) Author(ctx context.Context, id string) (string, error) {
	idb, ok := decodeID(id)
	if !ok {
		return "", ErrNotFound
	}
	var agent []byte
	err := s.readByID(ctx, idb, s.authorSeq, &agent)
	if errors.Is(err, sql.ErrNoRows) {
		return "", ErrNotFound
	}
	if err != nil {
		return "", fmt.Errorf("author: %w", err)
	}
	return hex.EncodeToString(agent), nil
}

// Query returns the bodies of matching events, newest first by (created_at, id).
//
// When the caller knows revocations (f.Revoked, or f.IncludeRevoked) and
// asks for the log as it is (no AsOf), the query runs in two steps: the
// (seq, id) of the page from index entries alone, then the bodies, from the
// body cache where it holds them. A commit makes SQLite drop every
// reader's page cache, so under steady publishing each query otherwise
// starts cold and reads a page per event; stored bodies never change, so
// the cache needs no invalidation.
func (s *Store) Query(ctx context.Context, filter Filter) ([][]byte, error) {
	filter = filter.FoldTags()
	limit := filter.Limit
	if limit <= 0 {
		limit = 100
	}
	if filter.AsOf != nil || !filter.IncludeRevoked && filter.Revoked == nil {
		// When the author index gives the candidates, the statement may
		// drop some of them (revoked, or not the latest as of AsOf): then
		// ask again with twice as many.
		for want := limit; ; want *= 2 {
			f, none := s.resolve(filter, want)
			if none {
				return nil, nil
			}
			out, err := s.queryBodies(ctx, f)
			if err != nil || len(out) >= limit || !f.authorMore {
				return out, err
			}
		}
	}
	if authorDriven(filter) {
		if out, ok, err := s.authorPage(ctx, filter, limit); ok || err != nil {
			return out, err
		}
	}
	// A few extra rows absorb revoked events; when they do not, ask again
	// for twice as many.
	for want := limit + 8; ; want *= 2 {
		f, none := s.resolve(filter, want)
		if none {
			return nil, nil
		}
		f.Limit = want
		seqs, ids, err := s.queryRefs(ctx, f)
		if err != nil {
			return nil, err
		}
		keep := seqs[:0]
		for i, seq := range seqs {
			if filter.IncludeRevoked || !filter.Revoked(ids[i]) {
				keep = append(keep, seq)
			}
		}
		if len(keep) >= limit || len(seqs) < want && !f.authorMore {
			return s.bodies(ctx, keep[:min(len(keep), limit)])
		}
	}
}

// authorPage answers an author filter whose revocations the caller
// knows, without ids or tags, from the author index and the bodies alone:
// the candidates' bodies (from the body cache where it holds them), their
// ids read from the bodies' start, sorted by (created_at, id) and the
// revoked dropped; when too few remain and more candidates do, it asks
// for twice as many. Reading the candidates' rows by seq to learn their
// ids cost twice as much. ok is false, and the statement answers
// instead, if a body does not begin with its id as this relay writes
// bodies.
func (s *Store) authorPage(ctx context.Context, filter Filter, limit int) (out [][]byte, ok bool, err error) {
	authors := decodeAuthors(filter.Authors)
	sc := scopeOf(filter)
	for want := limit + 8; ; want *= 2 {
		entries, more := s.authors.candidateEntries(authors, sc, want)
		seqs := make([]int64, len(entries))
		for i, e := range entries {
			seqs[i] = int64(e.seq)
		}
		bodies, err := s.bodies(ctx, seqs)
		if err != nil {
			return nil, true, err
		}
		ids := make([]string, len(bodies))
		for i, b := range bodies {
			if ids[i], ok = bodyID(b); !ok {
				return nil, false, nil
			}
		}
		order := make([]int, len(entries))
		for i := range order {
			order[i] = i
		}
		slices.SortFunc(order, func(a, b int) int {
			return cmp.Or(cmp.Compare(entries[b].at(), entries[a].at()), strings.Compare(ids[b], ids[a]))
		})
		out = out[:0]
		for _, i := range order {
			if len(out) < limit && (filter.IncludeRevoked || !filter.Revoked(ids[i])) {
				out = append(out, bodies[i])
			}
		}
		if len(out) >= limit || !more {
			return out, true, nil
		}
	}
}

// bodyID returns the id a stored body begins with: {"id":"<64 hex>", as
// protocol.AppendJSON writes it.
func bodyID(b []byte) (string, bool) {
	const head = `{"id":"`
	if len(b) < len(head)+65 || string(b[:len(head)]) != head || b[len(head)+64] != '"' {
		return "", false
	}
	id := b[len(head) : len(head)+64]
	for _, c := range id {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return "", false
		}
	}
	return string(id), true
}

// queryRefs returns the (seq, id) of the events f selects, in order.
func (s *Store) queryRefs(ctx context.Context, f query) ([]int64, []string, error) {
	q, args := sqlq.Select(s.dialect(), f.Query, true)
	rows, err := s.read.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, nil, fmt.Errorf("query: %w", err)
	}
	defer rows.Close()
	var seqs []int64
	var ids []string
	for rows.Next() {
		var seq int64
		var id sql.RawBytes
		if err := rows.Scan(&seq, &id); err != nil {
			return nil, nil, fmt.Errorf("scan: %w", err)
		}
		seqs, ids = append(seqs, seq), append(ids, hex.EncodeToString(id))
	}
	return seqs, ids, rows.Err()
}

// bodies returns the bodies of seqs, in that order, from the cache and in
// one read for the rest.
func (s *Store) bodies(ctx context.Context, seqs []int64) ([][]byte, error) {
	out := make([][]byte, len(seqs))
	var miss []any
	at := map[int64]int{}
	for i, seq := range seqs {
		if b, ok := s.cache.get(seq); ok {
			out[i] = b
			continue
		}
		miss = append(miss, seq)
		at[seq] = i
	}
	if len(miss) == 0 {
		return out, nil
	}
	rows, err := s.read.QueryContext(ctx, "SELECT seq, body FROM events WHERE seq IN ("+sqlq.Placeholders(len(miss))+")", miss...)
	if err != nil {
		return nil, fmt.Errorf("bodies: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var seq int64
		var b []byte
		if err := rows.Scan(&seq, &b); err != nil {
			return nil, fmt.Errorf("bodies: %w", err)
		}
		out[at[seq]] = b
		s.cache.put(seq, b)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for _, b := range out {
		if b == nil {
			return nil, fmt.Errorf("bodies: an event left the log while it was read")
		}
	}
	return out, nil
}

// queryBodies answers f in one statement that reads each event's body.
func (s *Store) queryBodies(ctx context.Context, f query) ([][]byte, error) {
	q, args := sqlq.Select(s.dialect(), f.Query, false)
	out, err := sqlq.Column(ctx, reader{s.read}, q, args...)
	if err != nil {
		return nil, fmt.Errorf("query: %w", err)
	}
	return out, nil
}

// decodeID returns the 32 bytes of a hex event id, or false.
func decodeID(h string) ([]byte, bool) {
	b, err := hex.DecodeString(h)
	return b, err == nil && len(b) == 32
}

// History returns every revision of agent's events of kind, oldest first
// (§10.4), revoked ones included: history is an audit view. Events of an
// overwrite kind are read through events_latest, others by the seqs the
// author index gives.
func (s *Store) History(ctx context.Context, agent string, kind int64) ([][]byte, error) {
	a, ok := decodeID(agent)
	if !ok {
		return nil, nil
	}
	var seqs []int64
	bySeq := !protocol.OverwriteKinds[kind]
	if bySeq {
		seqs = s.authors.seqsOf([32]byte(a), authorScope{kinds: []int64{kind}, since: math.MinInt64, until: math.MaxInt64})
		if len(seqs) == 0 {
			return nil, nil
		}
	}
	q, args := sqlq.History(&dialect, a, kind, bySeq, seqs)
	out, err := sqlq.Column(ctx, reader{s.read}, q, args...)
	if err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	return out, nil
}

// Export calls fn for every event with seq > after, in log order, until the
// log's end as of the call (through, which it also returns first via
// start). fn may stop the walk by returning an error.
func (s *Store) Export(ctx context.Context, after int64, start func(through int64) error, fn func(seq int64, body []byte) error) error {
	return sqlq.ExportBodies(ctx, &dialect, reader{s.read}, after, 2000, start, fn)
}

// Stats returns the number of events, the highest seq and the database size.
func (s *Store) Stats(ctx context.Context) (Stats, error) {
	var st Stats
	err := s.read.QueryRowContext(ctx, `SELECT COUNT(*), COALESCE(MAX(seq),0) FROM events`).Scan(&st.Events, &st.MaxSeq)
	if err != nil {
		return st, fmt.Errorf("stats: %w", err)
	}
	var pages, size int64
	_ = s.read.QueryRowContext(ctx, `PRAGMA page_count`).Scan(&pages)
	_ = s.read.QueryRowContext(ctx, `PRAGMA page_size`).Scan(&size)
	st.Bytes = pages * size
	return st, nil
}

// explain returns SQLite's query plan for f (tests assert index use).
func (s *Store) explain(f Filter, refs bool) (string, error) {
	f = f.FoldTags()
	qf, _ := s.resolve(f, max(f.Limit, 100))
	q, args := sqlq.Select(s.dialect(), qf.Query, refs)
	rows, err := s.read.Query("EXPLAIN QUERY PLAN "+q, args...)
	if err != nil {
		return "", err
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, notused int
		var detail string
		if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
			return "", err
		}
		plan = append(plan, detail)
	}
	return strings.Join(plan, "\n"), rows.Err()
}

// Items calls fn with the (created_at, id) of every stored event matching
// kinds, authors (empty: any) and created_at ≥ since, in no particular
// order. Set reconciliation over a filtered set uses it. With authors the
// author index gives the events' seqs.
func (s *Store) Items(ctx context.Context, kinds []int64, authors []string, since int64, fn func(createdAt int64, id []byte)) error {
	if len(kinds) == 0 && len(authors) == 0 && since == math.MinInt64 {
		// Every event: the items file, then the log after what it gave.
		all, last := s.items.each(ItemsPath(s.path), fn)
		if all {
			return nil
		}
		return sqlq.ScanItems(ctx, reader{s.read}, `SELECT created_at, id FROM events WHERE seq > ?`, []any{last}, fn)
	}
	var seqs []int64
	if len(authors) > 0 {
		sc := authorScope{kinds: kinds, since: since, until: math.MaxInt64}
		for _, a := range decodeAuthors(authors) {
			seqs = append(seqs, s.authors.seqsOf(a, sc)...)
		}
		if len(seqs) == 0 {
			return nil
		}
	}
	q, args := sqlq.Items(&dialect, kinds, authors, since, len(authors) > 0, seqs)
	return sqlq.ScanItems(ctx, reader{s.read}, q, args, fn)
}
