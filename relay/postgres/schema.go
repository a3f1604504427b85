package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// migrations are the schema's versions, applied in order, each once, in a
// transaction of its own that records it in schema_migrations. A new
// version is appended here; an applied one is never edited.
//
// events is append-only; seq is the log order, dense from 1, given by the
// writer that holds the log's advisory lock (see Store). tags holds one
// row per distinct tag with at least two elements and serves every tag
// filter from its primary key; it carries the event's kind and seq so a
// kinds filter is applied before the event is read. revokes records kind-9
// claims; a revoke takes effect only over events of its own author,
// whichever arrives first. Bodies and raw bytes are bytea: kept exactly.
var migrations = []string{
	1: `
CREATE TABLE events (
	seq         bigint PRIMARY KEY,
	id          bytea  NOT NULL,
	agent_id    bytea  NOT NULL,
	created_at  bigint NOT NULL,
	kind        bigint NOT NULL,
	body        bytea  NOT NULL,
	raw         bytea,
	raw_type    text,
	received_at bigint NOT NULL
);
CREATE UNIQUE INDEX events_id ON events(id);
CREATE INDEX events_order ON events(created_at, id);
CREATE INDEX events_author ON events(agent_id, created_at, id);
CREATE INDEX events_kind ON events(kind, created_at, id);
CREATE INDEX events_author_kind ON events(agent_id, kind, created_at, id);
CREATE TABLE tags (
	name       text   NOT NULL,
	value      text   NOT NULL,
	created_at bigint NOT NULL,
	id         bytea  NOT NULL,
	kind       bigint NOT NULL,
	seq        bigint NOT NULL,
	PRIMARY KEY (name, value, created_at, id)
);
CREATE TABLE revokes (
	target     bytea  NOT NULL,
	author     bytea  NOT NULL,
	revoke_id  bytea  NOT NULL,
	created_at bigint NOT NULL,
	PRIMARY KEY (target, author, revoke_id)
);
CREATE TABLE meta (
	key   text PRIMARY KEY,
	value text NOT NULL
);`,
	// 2: the rate limits every process shares (see Rates): one GCRA
	// theoretical arrival time per key, in unix nanoseconds.
	2: `
CREATE TABLE rate_tat (
	key text   PRIMARY KEY,
	tat bigint NOT NULL
);`,
	// 3: the A2A-originated tasks every process serves (see A2ATasks):
	// the task's JSON by its id, the newest a2aTaskRows kept.
	3: `
CREATE TABLE a2a_tasks (
	id         text   PRIMARY KEY,
	body       bytea  NOT NULL,
	created_at bigint NOT NULL
);
CREATE INDEX a2a_tasks_created ON a2a_tasks(created_at);`,
}

// migrateLock is the advisory lock key under which a starting process
// migrates, so two relays starting together apply each version once.
const migrateLock = 0x616e7032_6d696772 // "anp2migr"

// migrate brings the database's schema to the newest version and returns
// the version it found.
func migrate(ctx context.Context, conn *pgx.Conn) (int, error) {
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, int64(migrateLock)); err != nil {
		return 0, fmt.Errorf("migration lock: %w", err)
	}
	defer conn.Exec(context.Background(), `SELECT pg_advisory_unlock($1)`, int64(migrateLock))
	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    integer PRIMARY KEY,
		applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		return 0, fmt.Errorf("create schema_migrations: %w", err)
	}
	var have int
	if err := conn.QueryRow(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&have); err != nil {
		return 0, fmt.Errorf("schema version: %w", err)
	}
	if have > len(migrations)-1 {
		return have, fmt.Errorf("the database's schema is version %d, newer than this relay's %d: upgrade the relay", have, len(migrations)-1)
	}
	for v := have + 1; v < len(migrations); v++ {
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, migrations[v]); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `INSERT INTO schema_migrations(version) VALUES($1)`, v)
			return err
		})
		if err != nil {
			return have, fmt.Errorf("migrate to schema version %d: %w", v, err)
		}
	}
	return have, nil
}
