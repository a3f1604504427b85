package sqlite

import (
	"context"
	"database/sql"
	"fmt"
)

// ExportStored is Export with every stored field (raw bytes, their type,
// the receipt time), for copying a log into another backend.
func (s *Store) ExportStored(ctx context.Context, after int64, start func(through int64) error, fn func(st *Stored) error) error {
	var through int64
	if err := s.read.QueryRowContext(ctx, `SELECT COALESCE(MAX(seq), 0) FROM events`).Scan(&through); err != nil {
		return fmt.Errorf("export bound: %w", err)
	}
	if err := start(through); err != nil {
		return err
	}
	const page = 5000
	for after < through {
		rows, err := s.read.QueryContext(ctx, `SELECT seq, body, raw, raw_type, received_at FROM events WHERE seq > ? AND seq <= ? ORDER BY seq LIMIT ?`, after, through, page)
		if err != nil {
			return fmt.Errorf("export: %w", err)
		}
		n := 0
		for rows.Next() {
			st := &Stored{}
			var rawType sql.NullString
			if err := rows.Scan(&st.Seq, &st.Body, &st.Raw, &rawType, &st.ReceivedAt); err != nil {
				rows.Close()
				return err
			}
			st.RawType = rawType.String
			if err := fn(st); err != nil {
				rows.Close()
				return err
			}
			after, n = st.Seq, n+1
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
