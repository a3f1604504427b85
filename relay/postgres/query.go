package postgres

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/eventlog"
	"github.com/anp2net/relay/relay/eventlog/sqlq"
)

// ErrNotFound is returned when no stored event has the requested id.
var ErrNotFound = eventlog.ErrNotFound

// decodeID returns the 32 bytes of a hex event id, or false.
func decodeID(h string) ([]byte, bool) {
	b, err := hex.DecodeString(h)
	return b, err == nil && len(b) == 32
}

// sigOf is the signature's place in a stored body: AppendJSON writes sig
// last, as `"sig":"<128 hex>"}`.
const sigOf = `substring(body FROM length(body) - 129 FOR 128)`

// Lookup reports whether id is stored and, if so, its signature.
func (s *Store) Lookup(ctx context.Context, id string) (string, bool, error) {
	idb, ok := decodeID(id)
	if !ok {
		return "", false, nil
	}
	var sig []byte
	err := s.pool.QueryRow(ctx, `SELECT `+sigOf+` FROM events WHERE id = $1`, idb).Scan(&sig)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("lookup: %w", err)
	}
	return string(sig), true, nil
}

// Get returns the stored event id, or ErrNotFound.
func (s *Store) Get(ctx context.Context, id string) (*Stored, error) {
	idb, ok := decodeID(id)
	if !ok {
		return nil, ErrNotFound
	}
	st := &Stored{}
	var rawType *string
	err := s.pool.QueryRow(ctx, `SELECT seq, body, raw, raw_type, received_at FROM events WHERE id = $1`, idb).
		Scan(&st.Seq, &st.Body, &st.Raw, &rawType, &st.ReceivedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("get event: %w", err)
	}
	if rawType != nil {
		st.RawType = *rawType
	}
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
	err := s.pool.QueryRow(ctx, `SELECT agent_id FROM events WHERE id = $1`, idb).Scan(&agent)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", ErrNotFound
	}
	if err != nil {
		return "", fmt.Errorf("author: %w", err)
	}
	return hex.EncodeToString(agent), nil
}

// Query returns the bodies of matching events, newest first by
// (created_at, id). As in the SQLite log, when the caller knows
// revocations (f.Revoked, or f.IncludeRevoked) and asks for the log as it
// is (no AsOf), the query runs in two steps: the (seq, id) of the page
// from index entries, then the bodies by seq.
func (s *Store) Query(ctx context.Context, f Filter) ([][]byte, error) {
	f = f.FoldTags()
	if f.AsOf != nil || !f.IncludeRevoked && f.Revoked == nil {
		q, args := sqlq.Select(&dialect, sqlq.Query{Filter: f}, false)
		return s.column(ctx, q, args...)
	}
	limit := f.Limit
	if limit <= 0 {
		limit = 100
	}
	for want := limit + 8; ; want *= 2 {
		g := f
		g.Limit = want
		seqs, ids, err := s.queryRefs(ctx, g)
		if err != nil {
			return nil, err
		}
		keep := seqs[:0]
		for i, seq := range seqs {
			if f.IncludeRevoked || !f.Revoked(ids[i]) {
				keep = append(keep, seq)
			}
		}
		if len(keep) >= limit || len(seqs) < want {
			return s.bodies(ctx, keep[:min(len(keep), limit)])
		}
	}
}

// column returns the single bytea column q selects.
func (s *Store) column(ctx context.Context, q string, args ...any) ([][]byte, error) {
	out, err := sqlq.Column(ctx, reader{s.pool}, q, args...)
	if err != nil {
		return nil, fmt.Errorf("query: %w", err)
	}
	return out, nil
}

// dialect is PostgreSQL's SQL for the shared statements (see
// sqlq.Dialect).
var dialect = sqlq.Dialect{Numbered: true, Tags: "tags", TagKey: "id", Join: "JOIN"}

// reader runs the shared statements on the pool.
type reader struct{ pool *pgxpool.Pool }

func (r reader) Query(ctx context.Context, q string, args ...any) (sqlq.Rows, error) {
	rs, err := r.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	return pgRows{rs}, nil
}

// pgRows are pgx's rows as sqlq reads them.
type pgRows struct{ pgx.Rows }

func (r pgRows) Close() error {
	r.Rows.Close()
	return nil
}

func (s *Store) queryRefs(ctx context.Context, f Filter) ([]int64, []string, error) {
	q, args := sqlq.Select(&dialect, sqlq.Query{Filter: f}, true)
	rs, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, nil, fmt.Errorf("query: %w", err)
	}
	defer rs.Close()
	var seqs []int64
	var ids []string
	for rs.Next() {
		var seq int64
		var id []byte
		if err := rs.Scan(&seq, &id); err != nil {
			return nil, nil, fmt.Errorf("scan: %w", err)
		}
		seqs, ids = append(seqs, seq), append(ids, hex.EncodeToString(id))
	}
	return seqs, ids, rs.Err()
}

// bodies returns the bodies of seqs, in that order.
func (s *Store) bodies(ctx context.Context, seqs []int64) ([][]byte, error) {
	if len(seqs) == 0 {
		return nil, nil
	}
	rs, err := s.pool.Query(ctx, `SELECT seq, body FROM events WHERE seq = ANY($1)`, seqs)
	if err != nil {
		return nil, fmt.Errorf("bodies: %w", err)
	}
	defer rs.Close()
	at := make(map[int64]int, len(seqs))
	for i, seq := range seqs {
		at[seq] = i
	}
	out := make([][]byte, len(seqs))
	for rs.Next() {
		var seq int64
		var b []byte
		if err := rs.Scan(&seq, &b); err != nil {
			return nil, fmt.Errorf("bodies: %w", err)
		}
		out[at[seq]] = b
	}
	if err := rs.Err(); err != nil {
		return nil, err
	}
	if slices.ContainsFunc(out, func(b []byte) bool { return b == nil }) {
		return nil, fmt.Errorf("bodies: an event left the log while it was read")
	}
	return out, nil
}

// History returns every revision of agent's events of kind, oldest first,
// revoked ones included.
func (s *Store) History(ctx context.Context, agent string, kind int64) ([][]byte, error) {
	a, _ := hex.DecodeString(agent)
	q, args := sqlq.History(&dialect, a, kind, false, nil)
	out, err := s.column(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	return out, nil
}

// Export calls fn for every event with seq > after, in log order, until
// the log's end as of the call (through, given first to start). fn may
// stop the walk by returning an error. Before a hook is set, an export
// also moves the point the hook's deliveries will start from to through
// (see SetHook).
func (s *Store) Export(ctx context.Context, after int64, start func(through int64) error, fn func(seq int64, body []byte) error) error {
	return sqlq.ExportBodies(ctx, &dialect, reader{s.pool}, after, exportPage, s.exportStart(start), fn)
}

// exportPage is how many events an export reads a statement.
const exportPage = 5000

// exportStart is start preceded by the move of the hook's starting point
// (see Export).
func (s *Store) exportStart(start func(through int64) error) func(through int64) error {
	return func(through int64) error {
		s.deliverMu.Lock()
		if s.hook.Load() == nil {
			s.delivered = max(s.delivered, through)
		}
		s.deliverMu.Unlock()
		return start(through)
	}
}

// Stats returns the number of events, the highest seq and the size of the
// log's tables with their indexes. Seqs are dense from 1 and events are
// never deleted, so the count is the highest seq: read from the primary
// key's end, where COUNT(*) would scan the table (health checks call this).
func (s *Store) Stats(ctx context.Context) (Stats, error) {
	var st Stats
	err := s.pool.QueryRow(ctx, `SELECT COALESCE((SELECT seq FROM events ORDER BY seq DESC LIMIT 1), 0),
		pg_total_relation_size('events') + pg_total_relation_size('tags') + pg_total_relation_size('revokes')`).
		Scan(&st.MaxSeq, &st.Bytes)
	if err != nil {
		return st, fmt.Errorf("stats: %w", err)
	}
	st.Events = st.MaxSeq
	return st, nil
}

// Items calls fn with the (created_at, id) of every stored event matching
// kinds, authors (empty: any) and created_at ≥ since, in no particular
// order.
func (s *Store) Items(ctx context.Context, kinds []int64, authors []string, since int64, fn func(createdAt int64, id []byte)) error {
	q, args := sqlq.Items(&dialect, kinds, authors, since, false, nil)
	return sqlq.ScanItems(ctx, reader{s.pool}, q, args, fn)
}

// ExportStored is Export with every stored field (Raw nil when the event
// arrived as its body), for copying a log into another backend.
func (s *Store) ExportStored(ctx context.Context, after int64, start func(through int64) error, fn func(st *Stored) error) error {
	return sqlq.Export(ctx, &dialect, reader{s.pool}, after, exportPage, start, "seq, body, raw, raw_type, received_at",
		func(scan func(dest ...any) error) (int64, error) {
			st := &Stored{}
			var rawType *string
			if err := scan(&st.Seq, &st.Body, &st.Raw, &rawType, &st.ReceivedAt); err != nil {
				return 0, err
			}
			if rawType != nil {
				st.RawType = *rawType
			}
			return st.Seq, fn(st)
		})
}
