package sqlite

import (
	"context"
	"database/sql"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
)

// Row is one event row as the log holds it.
type Row struct {
	Seq        int64
	Body       []byte // the event's compact JSON
	Raw        []byte // the received encoding, nil when it equals Body
	RawType    string
	ReceivedAt int64
}

// LostRange is a run of seqs that could not be read.
type LostRange struct {
	From, To int64
	Err      string // SQLite's error for the first of them
}

// SalvageReport says what Salvage read and what it could not.
type SalvageReport struct {
	Rows    int         // rows read
	Through int64       // the highest seq the log is known to have held
	Lost    []LostRange // seqs that could not be read, in order
	// LostIDs are the ids (hex) of unreadable rows that an index still
	// names, by seq: a peer can give those events back.
	LostIDs map[int64]string
	// Integrity is PRAGMA integrity_check's findings (at most 20), empty
	// when it found nothing wrong or could not run.
	Integrity []string
}

// LostRows is how many seqs the report lists as lost.
func (r SalvageReport) LostRows() int64 {
	var n int64
	for _, l := range r.Lost {
		n += l.To - l.From + 1
	}
	return n
}

// salvageChunk is how many seqs Salvage asks for at once; a chunk that
// fails is halved until the rows that fail are alone.
const salvageChunk = 1024

// Salvage reads every readable event row of the (possibly damaged) log at
// path in seq order and passes them to fn a chunk at a time. A damaged
// page loses only the rows on it: a range that fails to read is split in
// two until single rows remain, and those are reported lost. It neither
// takes the writer lock nor writes to the log (take Lock first if no one
// else may write meanwhile). progress, when set, is told the seq reached.
// It returns an error only when the log cannot be opened at all or fn
// fails.
func Salvage(ctx context.Context, path string, fn func([]Row) error, progress func(seq, through int64)) (SalvageReport, error) {
	rep := SalvageReport{LostIDs: map[int64]string{}}
	db, err := sql.Open("sqlite", dsn(path, true))
	if err != nil {
		return rep, fmt.Errorf("open %s: %w", path, err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	rep.Integrity = integrity(ctx, db)
	known := indexedSeqs(ctx, db)
	through, bounded := int64(0), false
	if err := db.QueryRowContext(ctx, `SELECT COALESCE(MAX(seq), 0) FROM events`).Scan(&through); err == nil {
		bounded = true
	}
	for seq := range known {
		through = max(through, seq)
	}
	// Without a readable MAX(seq) (the table's rightmost pages are
	// damaged), reads past the end fail like lost rows: go no further
	// than the highest seq an index names, or, with no index either, than
	// the file could hold (dense seqs, at least 16 bytes a row).
	ceiling := through
	if !bounded && through == 0 {
		var pages, size int64
		db.QueryRowContext(ctx, `SELECT page_count, page_size FROM pragma_page_count, pragma_page_size`).Scan(&pages, &size)
		ceiling = pages * size / 16
	}
	s := &salvager{db: db, fn: fn, rep: &rep, next: 1}
	for a := int64(1); ; a += salvageChunk {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		if a > ceiling {
			break
		}
		n, err := s.read(ctx, a, a+salvageChunk-1)
		if err != nil {
			return rep, err
		}
		if progress != nil {
			progress(a+salvageChunk-1, through)
		}
		// Without a readable MAX(seq), stop at the first clean empty
		// chunk past every seq an index named.
		if !bounded && n == 0 && a > through && !s.failed {
			break
		}
		s.failed = false
	}
	through = max(through, s.rep.Through)
	if !bounded {
		// Seqs past the last one known were never there.
		for len(rep.Lost) > 0 && rep.Lost[len(rep.Lost)-1].From > through {
			rep.Lost = rep.Lost[:len(rep.Lost)-1]
		}
		if n := len(rep.Lost); n > 0 && rep.Lost[n-1].To > through {
			rep.Lost[n-1].To = through
		}
		s.next = min(s.next, through+1)
	}
	rep.Through = max(rep.Through, through)
	if s.next <= rep.Through {
		s.lose(s.next, rep.Through, errAbsent)
	}
	for _, l := range rep.Lost {
		for seq := l.From; seq <= l.To; seq++ {
			if id, ok := known[seq]; ok {
				rep.LostIDs[seq] = id
			}
		}
	}
	return rep, nil
}

type salvager struct {
	db     *sql.DB
	fn     func([]Row) error
	rep    *SalvageReport
	failed bool  // a read in the current chunk failed
	next   int64 // the seq after the last one read or lost
}

// errAbsent is the reason given for seqs that read without an error but
// are not there: seqs are dense (a rowid is never skipped), so a gap is
// rows a damaged page no longer shows.
const errAbsent = "missing: not on any readable page"

// read reads seqs a..b, splitting the range on error. It returns the rows
// read; its error is fn's.
func (s *salvager) read(ctx context.Context, a, b int64) (int, error) {
	rows, err := s.rows(ctx, a, b)
	if err != nil {
		s.failed = true
		if a == b {
			s.lose(a, a, err.Error())
			return 0, nil
		}
		mid := a + (b-a)/2
		n1, err := s.read(ctx, a, mid)
		if err != nil {
			return n1, err
		}
		n2, err := s.read(ctx, mid+1, b)
		return n1 + n2, err
	}
	if len(rows) == 0 {
		return 0, nil
	}
	for _, r := range rows {
		if r.Seq > s.next {
			s.lose(s.next, r.Seq-1, errAbsent)
		}
		s.next = r.Seq + 1
	}
	s.rep.Rows += len(rows)
	s.rep.Through = max(s.rep.Through, rows[len(rows)-1].Seq)
	if s.fn == nil {
		return len(rows), nil
	}
	return len(rows), s.fn(rows)
}

// rows reads seqs a..b whole, or fails.
func (s *salvager) rows(ctx context.Context, a, b int64) ([]Row, error) {
	q, err := s.db.QueryContext(ctx, `SELECT seq, body, raw, raw_type, received_at FROM events WHERE seq BETWEEN ? AND ? ORDER BY seq`, a, b)
	if err != nil {
		return nil, err
	}
	defer q.Close()
	var out []Row
	for q.Next() {
		var r Row
		var rawType sql.NullString
		var body []byte
		if err := q.Scan(&r.Seq, &body, &r.Raw, &rawType, &r.ReceivedAt); err != nil {
			return nil, err
		}
		// A damaged page can yield rows out of range or out of order.
		if r.Seq < a || r.Seq > b || len(out) > 0 && r.Seq <= out[len(out)-1].Seq {
			return nil, fmt.Errorf("seq %d out of place in %d..%d: %w", r.Seq, a, b, ErrCorrupt)
		}
		r.Body, r.RawType = slices.Clone(body), rawType.String
		r.Raw = slices.Clone(r.Raw)
		out = append(out, r)
	}
	return out, q.Err()
}

// lose records seqs from..to as unreadable, after any gap since the
// last seq read or lost.
func (s *salvager) lose(from, to int64, why string) {
	if from > s.next {
		s.lose(s.next, from-1, errAbsent)
	}
	s.next = to + 1
	if n := len(s.rep.Lost); n > 0 && s.rep.Lost[n-1].To == from-1 {
		s.rep.Lost[n-1].To = to
		return
	}
	s.rep.Lost = append(s.rep.Lost, LostRange{From: from, To: to, Err: why})
}

// integrity runs PRAGMA integrity_check and returns what it found.
func integrity(ctx context.Context, db *sql.DB) []string {
	rows, err := db.QueryContext(ctx, `PRAGMA integrity_check(20)`)
	if err != nil {
		return []string{err.Error()}
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var text string
		if rows.Scan(&text) == nil && text != "ok" {
			for _, line := range strings.Split(text, "\n") {
				if !strings.HasPrefix(line, "***") && len(out) < 20 {
					out = append(out, line)
				}
			}
		}
	}
	if err := rows.Err(); err != nil {
		out = append(out, err.Error())
	}
	return out
}

// indexedSeqs reads the seq and id of every event from the indexes that
// carry ids (each holds the rowid), as far as each can be read: they name
// events whose table rows are lost.
func indexedSeqs(ctx context.Context, db *sql.DB) map[int64]string {
	known := map[int64]string{}
	for _, idx := range []string{"events_id", "events_order", "events_kind", "events_author"} {
		rows, err := db.QueryContext(ctx, `SELECT seq, id FROM events INDEXED BY `+idx)
		if err != nil {
			continue // dropped by a bulk load, or unreadable
		}
		for rows.Next() {
			var seq int64
			var id []byte
			if rows.Scan(&seq, &id) == nil && len(id) == 32 {
				known[seq] = hex.EncodeToString(id)
			}
		}
		rows.Close()
	}
	return known
}

// ReadLog passes every event row of the log at path to fn in seq order,
// without the writer lock and without writing (an auditor may read the
// log of a relay that is running). It stops at the first error, which
// matches ErrCorrupt when the file is damaged (Salvage reads around that).
func ReadLog(ctx context.Context, path string, fn func(Row) error) error {
	db, err := sql.Open("sqlite", dsn(path, true))
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	s := &salvager{db: db}
	for after := int64(0); ; after += salvageChunk {
		rows, err := s.rows(ctx, after+1, after+salvageChunk)
		if err != nil {
			return fmt.Errorf("read %s: %w", path, corrupt(err))
		}
		if len(rows) == 0 {
			var more bool
			if err := db.QueryRowContext(ctx, `SELECT EXISTS(SELECT 1 FROM events WHERE seq > ?)`, after).Scan(&more); err != nil || !more {
				return corrupt(err)
			}
		}
		for _, r := range rows {
			if err := fn(r); err != nil {
				return err
			}
		}
	}
}
