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
	"sort"
	"strconv"
	"strings"

	"github.com/anp2net/relay/relay/eventlog"

	"github.com/anp2net/relay/protocol"
)

// ErrNotFound is returned when no stored event has the requested id.
var ErrNotFound = eventlog.ErrNotFound

// query is a Filter with what the store adds to it: idSeqs are the seqs
// the id index gives for IDs, and with byAuthors authorSeqs are those the
// author index gives for Authors: the candidates, of which authorMore
// tells that more remain (see resolve).
type query struct {
	Filter
	idSeqs     []int64
	byAuthors  bool
	authorSeqs []int64
	authorMore bool
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
			seqs[i] = e.seq
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
			return cmp.Or(cmp.Compare(entries[b].at, entries[a].at), strings.Compare(ids[b], ids[a]))
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
	q, args := buildQuery(f, s.bulkOn.Load(), true)
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
	rows, err := s.read.QueryContext(ctx, "SELECT seq, body FROM events WHERE seq IN ("+placeholders(len(miss))+")", miss...)
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
	q, args := buildQuery(f, s.bulkOn.Load(), false)
	rows, err := s.read.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("query: %w", err)
	}
	defer rows.Close()
	var out [][]byte
	for rows.Next() {
		var b []byte
		if err := rows.Scan(&b); err != nil {
			return nil, fmt.Errorf("scan: %w", err)
		}
		out = append(out, b)
	}
	return out, rows.Err()
}

// buildQuery turns f into SQL. With a tag filter the first tag name (in
// sorted order) drives the scan through the tags primary key; other tag
// names become EXISTS probes on the same key. With pending set (a bulk
// load is under way) tag rows are read from tags and tags_pending both.
//
// With refs set the query selects (seq, id) instead of the body and leaves
// revocation to the caller, so it reads index entries only: a tag query
// whose other conditions are all on the tag row does not touch events, and
// every other shape is covered by an events index.
func buildQuery(f query, pending, refs bool) (string, []any) {
	tags := "tags"
	if pending {
		tags = "(SELECT * FROM tags UNION ALL SELECT * FROM tags_pending)"
	}
	var where []string
	var args []any
	from := "events e"
	if len(f.idSeqs) > 0 || f.byAuthors {
		// Read the events by seq: the planner would otherwise take an
		// index that gives the order (kinds, time) and filter its rows by
		// seq, a scan of every event of that kind.
		from = "events e NOT INDEXED"
	}
	names := make([]string, 0, len(f.Tags))
	for n := range f.Tags {
		names = append(names, n)
	}
	sort.Strings(names)
	// x is the row that carries created_at and id: the tag row when tags
	// drive (equal to the event's), else the event.
	x := "e"
	if len(names) > 0 {
		x = "t"
		first := names[0]
		vals := f.Tags[first]
		from = tags + " t"
		if !refs || len(f.IDs) > 0 || len(f.Authors) > 0 || f.AsOf != nil {
			from += " CROSS JOIN events e ON e.seq = t.seq" // CROSS JOIN fixes the order: tags drive
		}
		where = append(where, "t.name = ?")
		args = append(args, first)
		if len(vals) == 1 {
			where = append(where, "t.value = ?")
			args = append(args, vals[0])
		} else {
			// An event carrying several of the values has a tag row for
			// each: only the one with the least value stands for it.
			where = append(where, "t.value IN ("+placeholders(len(vals))+")",
				"NOT EXISTS (SELECT 1 FROM "+tags+" t3 WHERE t3.name = t.name AND t3.value IN ("+placeholders(len(vals))+
					") AND t3.value < t.value AND t3.created_at = t.created_at AND t3.seq = t.seq)")
			args = append(args, anySlice(vals)...)
			args = append(args, anySlice(vals)...)
		}
		for _, n := range names[1:] {
			vals := f.Tags[n]
			where = append(where, "EXISTS (SELECT 1 FROM "+tags+" t2 WHERE t2.name = ? AND t2.value IN ("+
				placeholders(len(vals))+") AND t2.created_at = t.created_at AND t2.seq = t.seq)")
			args = append(args, n)
			args = append(args, anySlice(vals)...)
		}
		for _, c := range f.MoreTags {
			where = append(where, "EXISTS (SELECT 1 FROM "+tags+" t2 WHERE t2.name = ? AND t2.value IN ("+
				placeholders(len(c.Values))+") AND t2.created_at = t.created_at AND t2.seq = t.seq)")
			args = append(args, c.Name)
			args = append(args, anySlice(c.Values)...)
		}
	}
	if len(f.idSeqs) > 0 {
		// The log has no index on id: read the rows by seq (the id
		// condition below still holds them to the ids asked for).
		where = append(where, "e.seq IN ("+placeholders(len(f.idSeqs))+")")
		for _, seq := range f.idSeqs {
			args = append(args, seq)
		}
	}
	if f.byAuthors {
		// The author index's candidates (the author condition below
		// still holds them to the authors asked for).
		clause, list := seqList(f.authorSeqs)
		where = append(where, "e.seq IN "+clause)
		args = append(args, list...)
	}
	if len(f.IDs) > 0 {
		where = append(where, "e.id IN ("+placeholders(len(f.IDs))+")")
		for _, id := range f.IDs {
			b, _ := hex.DecodeString(id)
			args = append(args, b)
		}
	}
	if len(f.Authors) > 0 {
		where = append(where, "e.agent_id IN ("+placeholders(len(f.Authors))+")")
		for _, a := range f.Authors {
			b, _ := hex.DecodeString(a)
			args = append(args, b)
		}
	}
	if len(f.Kinds) > 0 {
		// With tags driving, checked on the tag row before any event is read.
		where = append(where, x+".kind IN ("+placeholders(len(f.Kinds))+")")
		for _, k := range f.Kinds {
			args = append(args, k)
		}
	}
	for _, bound := range []struct {
		op string
		v  *int64
	}{{">=", f.Since}, {"<=", f.Until}, {"<=", f.AsOf}} {
		if bound.v != nil {
			where = append(where, x+".created_at "+bound.op+" ?")
			args = append(args, *bound.v)
		}
	}
	if f.AsOf != nil {
		where = append(where, overwriteLatestClause())
		args = append(args, *f.AsOf)
	}
	if !f.IncludeRevoked && !refs {
		clause := "NOT EXISTS (SELECT 1 FROM revokes r WHERE r.target = e.id AND r.author = e.agent_id"
		if f.AsOf != nil {
			clause += " AND r.created_at <= ?"
			args = append(args, *f.AsOf)
		}
		where = append(where, clause+")")
	}
	q := "SELECT e.body FROM " + from
	if refs {
		q = "SELECT " + x + ".seq, " + x + ".id FROM " + from
	}
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	limit := f.Limit
	if limit <= 0 {
		limit = 100
	}
	q += " ORDER BY " + x + ".created_at DESC, " + x + ".id DESC LIMIT ?"
	args = append(args, limit)
	return q, args
}

// overwriteLatestClause keeps, for overwrite kinds, only the author's latest
// event of that kind created at or before as_of. The probe repeats the
// kinds so SQLite reads events_latest, which holds only those kinds.
func overwriteLatestClause() string {
	kinds := overwriteKinds()
	return "(e.kind NOT IN (" + kinds + ") OR NOT EXISTS (SELECT 1 FROM events n " +
		"WHERE n.agent_id = e.agent_id AND n.kind = e.kind AND n.kind IN (" + kinds + ") AND n.created_at <= ? " +
		"AND (n.created_at > e.created_at OR (n.created_at = e.created_at AND n.id > e.id))))"
}

// seqList is an SQL list of seqs for IN and its arguments: placeholders
// for a short list, else one JSON array (SQLite takes at most 32,766
// arguments to a statement).
func seqList(seqs []int64) (string, []any) {
	if len(seqs) <= 256 {
		args := make([]any, len(seqs))
		for i, seq := range seqs {
			args[i] = seq
		}
		return "(" + placeholders(len(seqs)) + ")", args
	}
	b := make([]byte, 0, 8*len(seqs))
	b = append(b, '[')
	for i, seq := range seqs {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, seq, 10)
	}
	return "(SELECT value FROM json_each(?))", []any{string(append(b, ']'))}
}

// decodeID returns the 32 bytes of a hex event id, or false.
func decodeID(h string) ([]byte, bool) {
	b, err := hex.DecodeString(h)
	return b, err == nil && len(b) == 32
}

func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?,", n), ",")
}

func anySlice(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// latestHistory is History's statement for an overwrite kind (arguments
// agent, kind): the kinds are repeated so that SQLite reads events_latest.
var latestHistory = `SELECT body FROM events WHERE agent_id = ? AND kind = ? AND kind IN (` + overwriteKinds() + `) ORDER BY created_at, id`

// History returns every revision of agent's events of kind, oldest first
// (§10.4), revoked ones included: history is an audit view. Events of an
// overwrite kind are read through events_latest, others by the seqs the
// author index gives.
func (s *Store) History(ctx context.Context, agent string, kind int64) ([][]byte, error) {
	a, ok := decodeID(agent)
	if !ok {
		return nil, nil
	}
	q, args := latestHistory, []any{a, kind}
	if !protocol.OverwriteKinds[kind] {
		seqs := s.authors.seqsOf([32]byte(a), authorScope{kinds: []int64{kind}, since: math.MinInt64, until: math.MaxInt64})
		if len(seqs) == 0 {
			return nil, nil
		}
		clause, list := seqList(seqs)
		q, args = `SELECT body FROM events NOT INDEXED WHERE seq IN `+clause+` AND agent_id = ? AND kind = ? ORDER BY created_at, id`, append(list, a, kind)
	}
	rows, err := s.read.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	defer rows.Close()
	var out [][]byte
	for rows.Next() {
		var b []byte
		if err := rows.Scan(&b); err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, rows.Err()
}

// Export calls fn for every event with seq > after, in log order, until the
// log's end as of the call (through, which it also returns first via
// start). fn may stop the walk by returning an error.
func (s *Store) Export(ctx context.Context, after int64, start func(through int64) error, fn func(seq int64, body []byte) error) error {
	var through int64
	if err := s.read.QueryRowContext(ctx, `SELECT COALESCE(MAX(seq), 0) FROM events`).Scan(&through); err != nil {
		return fmt.Errorf("export bound: %w", err)
	}
	if err := start(through); err != nil {
		return err
	}
	// Page through the log so no read transaction stays open for the whole
	// export (which would pin the WAL).
	const page = 2000
	for after < through {
		rows, err := s.read.QueryContext(ctx, `SELECT seq, body FROM events WHERE seq > ? AND seq <= ? ORDER BY seq LIMIT ?`, after, through, page)
		if err != nil {
			return fmt.Errorf("export: %w", err)
		}
		n := 0
		for rows.Next() {
			var seq int64
			var body []byte
			if err := rows.Scan(&seq, &body); err != nil {
				rows.Close()
				return err
			}
			if err := fn(seq, body); err != nil {
				rows.Close()
				return err
			}
			after, n = seq, n+1
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		if n == 0 {
			break
		}
	}
	return nil
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
	q, args := buildQuery(qf, s.bulkOn.Load(), refs)
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
	where := []string{"created_at >= ?"}
	args := []any{since}
	if len(kinds) > 0 {
		where = append(where, "kind IN ("+placeholders(len(kinds))+")")
		for _, k := range kinds {
			args = append(args, k)
		}
	}
	from := "events"
	if len(authors) > 0 {
		var seqs []int64
		sc := authorScope{kinds: kinds, since: since, until: math.MaxInt64}
		for _, a := range decodeAuthors(authors) {
			seqs = append(seqs, s.authors.seqsOf(a, sc)...)
		}
		if len(seqs) == 0 {
			return nil
		}
		clause, list := seqList(seqs)
		from = "events NOT INDEXED"
		where = append(where, "seq IN "+clause, "agent_id IN ("+placeholders(len(authors))+")")
		args = append(args, list...)
		for _, a := range authors {
			b, _ := hex.DecodeString(a)
			args = append(args, b)
		}
	}
	rows, err := s.read.QueryContext(ctx, "SELECT created_at, id FROM "+from+" WHERE "+strings.Join(where, " AND "), args...)
	if err != nil {
		return fmt.Errorf("items: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var at int64
		var id []byte
		if err := rows.Scan(&at, &id); err != nil {
			return err
		}
		fn(at, id)
	}
	return rows.Err()
}
