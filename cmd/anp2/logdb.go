package main

import (
	"context"
	"strings"

	"github.com/anp2net/relay/relay"
	"github.com/anp2net/relay/relay/eventlog"
	"github.com/anp2net/relay/relay/postgres"
	"github.com/anp2net/relay/relay/sqlite"
)

// isPostgres reports whether a --db value names a PostgreSQL database
// (postgres:// or postgresql:// URL) rather than a SQLite file.
func isPostgres(db string) bool {
	return strings.HasPrefix(db, "postgres://") || strings.HasPrefix(db, "postgresql://")
}

// sqlitePath returns the file a SQLite --db value names: a path, or a
// sqlite: URL (sqlite:PATH or sqlite://PATH).
func sqlitePath(db string) string {
	if p, ok := strings.CutPrefix(db, "sqlite://"); ok {
		return p
	}
	if p, ok := strings.CutPrefix(db, "sqlite:"); ok {
		return p
	}
	return db
}

// openLog opens the event log a --db value names: PostgreSQL for a
// postgres:// URL, else the SQLite file (repair, when set, hears of slow
// work before it serves).
func openLog(ctx context.Context, db string, repair func(string)) (eventlog.Log, error) {
	if isPostgres(db) {
		return postgres.Open(ctx, db, nil)
	}
	return sqlite.OpenWithRepair(sqlitePath(db), nil, repair)
}

// dbLabel is a --db value fit for a log line: a URL's password hidden.
func dbLabel(db string) string {
	if !isPostgres(db) {
		return db
	}
	scheme, rest, _ := strings.Cut(db, "://")
	at := strings.LastIndex(rest, "@")
	if at < 0 {
		return db
	}
	user, _, hasPass := strings.Cut(rest[:at], ":")
	if !hasPass {
		return db
	}
	return scheme + "://" + user + ":xxxxx" + rest[at:]
}

// relayKeyDefault is where the relay keeps its own key when --relay-key is
// not set: beside a SQLite file, in the working directory for PostgreSQL.
func relayKeyDefault(db string) string {
	if isPostgres(db) {
		return "anp2.relay-key"
	}
	return sqlitePath(db) + ".relay-key"
}

// agentRates is where the per-agent rate limit keeps its state: in the
// database when several relay processes may share it (PostgreSQL), so the
// limit is global; nil (each process's memory) for SQLite.
func agentRates(st eventlog.Log) relay.SharedRates {
	if pg, ok := st.(*postgres.Store); ok {
		return pg.Rates("agent")
	}
	return nil
}

// readStored calls fn with every event of the log db names, in seq order,
// with every stored field: a SQLite file is read without its writer lock
// (the log of a running relay can be read), a PostgreSQL log through a
// connection of its own.
func readStored(ctx context.Context, db string, fn func(st *eventlog.Stored) error) error {
	if !isPostgres(db) {
		return sqlite.ReadLog(ctx, sqlitePath(db), func(r sqlite.Row) error {
			return fn(&eventlog.Stored{Seq: r.Seq, Body: r.Body, Raw: r.Raw, RawType: r.RawType, ReceivedAt: r.ReceivedAt})
		})
	}
	st, err := postgres.Open(ctx, db, nil)
	if err != nil {
		return err
	}
	defer st.Close()
	return st.ExportStored(ctx, 0, func(int64) error { return nil }, fn)
}

// deliveryQueue is the delivery queue's file for a relay on db with relay
// key file key: "" (beside a SQLite log, <db>.delivery) or, for a
// PostgreSQL log, which has no file, <relay key file>.delivery.
func deliveryQueue(db, key string) string {
	if !isPostgres(db) {
		return ""
	}
	if key == "" {
		key = relayKeyDefault(db)
	}
	return key + ".delivery"
}
