package sqlq

import (
	"context"
	"fmt"
)

// Rows is a statement's result set, as database/sql's *sql.Rows gives it
// (pgx's Rows through a small adapter).
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
	Close() error
}

// DB runs a read statement.
type DB interface {
	Query(ctx context.Context, q string, args ...any) (Rows, error)
}

// Column returns the single bytes column q selects, in order.
func Column(ctx context.Context, db DB, q string, args ...any) ([][]byte, error) {
	rows, err := db.Query(ctx, q, args...)
	if err != nil {
		return nil, err
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

// ScanItems runs Items' statement and calls fn for each row.
func ScanItems(ctx context.Context, db DB, q string, args []any, fn func(createdAt int64, id []byte)) error {
	rows, err := db.Query(ctx, q, args...)
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

// LogEnd returns the log's highest seq (0 when it is empty).
func LogEnd(ctx context.Context, db DB) (int64, error) {
	rows, err := db.Query(ctx, `SELECT COALESCE(MAX(seq), 0) FROM events`)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	var end int64
	if rows.Next() {
		if err := rows.Scan(&end); err != nil {
			return 0, err
		}
	}
	return end, rows.Err()
}

// Export walks the log as eventlog.Log's Export does: it reads the log's
// end (through) and gives it to start, then calls row for every event with
// after < seq ≤ through, in seq order, with the event's columns cols (seq
// first) read into its scan; row returns the event's seq, or an error that
// stops the walk. The walk reads page events a statement, so no read
// stays open for the whole export (which in SQLite would pin the WAL).
func Export(ctx context.Context, d *Dialect, db DB, after int64, page int, start func(through int64) error,
	cols string, row func(scan func(dest ...any) error) (int64, error)) error {
	through, err := LogEnd(ctx, db)
	if err != nil {
		return fmt.Errorf("export bound: %w", err)
	}
	if err := start(through); err != nil {
		return err
	}
	for after < through {
		a := NewArgs(d)
		q := "SELECT " + cols + " FROM events WHERE seq > " + a.Param(after) + " AND seq <= " + a.Param(through) +
			" ORDER BY seq LIMIT " + a.Param(page)
		n, last, err := exportPage(ctx, db, q, a.List(), row)
		if err != nil {
			return err
		}
		if n == 0 {
			break
		}
		after = last
	}
	return nil
}

// exportPage runs one page of Export, returning how many events it gave
// and the last one's seq.
func exportPage(ctx context.Context, db DB, q string, args []any, row func(scan func(dest ...any) error) (int64, error)) (n int, last int64, err error) {
	rows, err := db.Query(ctx, q, args...)
	if err != nil {
		return 0, 0, fmt.Errorf("export: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		if last, err = row(rows.Scan); err != nil {
			return 0, 0, err
		}
		n++
	}
	return n, last, rows.Err()
}

// ExportBodies is Export of each event's seq and body to fn.
func ExportBodies(ctx context.Context, d *Dialect, db DB, after int64, page int, start func(through int64) error,
	fn func(seq int64, body []byte) error) error {
	return Export(ctx, d, db, after, page, start, "seq, body", func(scan func(dest ...any) error) (int64, error) {
		var seq int64
		var body []byte
		if err := scan(&seq, &body); err != nil {
			return 0, err
		}
		return seq, fn(seq, body)
	})
}
