package sqlite

import "strings"

// schema is the log's layout. events is append-only; seq is the local
// arrival order (the rowid). tags holds one row per tag with at least two
// elements and serves every tag filter from its primary key; it carries the
// event's kind, so a kinds filter is applied before the event is read, and
// its seq, so the event is read by rowid. revokes records
// kind-9 claims; a revoke takes effect only over events of the same author,
// whichever arrives first. tags_pending holds the tag rows of events
// appended during a bulk load (see BeginBulk); it is empty otherwise.
//
// The secondary indexes are listed apart (secondaryIndexes) because a bulk
// load drops them and builds them again at its end; Open creates any that
// are missing, so a crash during a bulk load heals on the next start.
var schema = `
CREATE TABLE IF NOT EXISTS events (` + eventColumns + `);
CREATE TABLE IF NOT EXISTS tags (` + tagColumns + `,
	PRIMARY KEY (name, value, created_at, seq)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS tags_pending (` + tagColumns + `);
CREATE TABLE IF NOT EXISTS revokes (
	target     BLOB    NOT NULL,
	author     BLOB    NOT NULL,
	revoke_id  BLOB    NOT NULL,
	created_at INTEGER NOT NULL,
	PRIMARY KEY (target, author, revoke_id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS meta (
	key   TEXT PRIMARY KEY,
	value TEXT NOT NULL
);
` + strings.Join(secondaryIndexes, ";\n") + ";\n"

const eventColumns = `
	seq         INTEGER PRIMARY KEY,
	id          BLOB    NOT NULL,
	agent_id    BLOB    NOT NULL,
	created_at  INTEGER NOT NULL,
	kind        INTEGER NOT NULL,
	body        TEXT    NOT NULL,
	raw         BLOB,
	raw_type    TEXT,
	received_at INTEGER NOT NULL`

// secondaryIndexes are the indexes a bulk load drops. events_id makes ids
// unique and serves reads by id; the others serve the filtered reads.
// Queries answer newest first by (created_at, id), but events_order and
// events_kind (and the tags key) order ties of created_at by seq, the
// arrival order, carrying id after it: under a high publish rate many
// events share a second, and keyed by (created_at, id) each landed at a
// random place among that second's entries, a page write per event per
// index (with tags, 39% of the WAL frames of a bench run); keyed by seq
// they append at the tail. A query sorts each second's ties by id itself
// (SQLite's sort of the right part of ORDER BY), which costs a read only
// at high rates, in proportion to the events that share the boundary
// second of the page it returns.
// Every append updates each of them at a position set by its key, which
// at a million events means a scattered page write per index per event
// (ids are hashes, so events_id is the worst). events_id comes first: it
// is rebuilt first, so reads by id leave the bulk load's id map soonest.
var secondaryIndexes = []string{
	`CREATE UNIQUE INDEX IF NOT EXISTS events_id ON events(id)`,
	`CREATE INDEX IF NOT EXISTS events_order       ON events(created_at, seq, id)`,
	`CREATE INDEX IF NOT EXISTS events_author      ON events(agent_id, created_at, id)`,
	`CREATE INDEX IF NOT EXISTS events_kind        ON events(kind, created_at, seq, id)`,
	`CREATE INDEX IF NOT EXISTS events_author_kind ON events(agent_id, kind, created_at, id)`,
}

const tagColumns = `
	name       TEXT    NOT NULL,
	value      TEXT    NOT NULL,
	created_at INTEGER NOT NULL,
	id         BLOB    NOT NULL,
	kind       INTEGER NOT NULL,
	seq        INTEGER NOT NULL`

// migrateTags rebuilds tag tables made before they carried kind and seq
// (run before schema, which then creates what is missing).
const migrateTags = `
CREATE TABLE tags_v2 (` + tagColumns + `,
	PRIMARY KEY (name, value, created_at, seq)
) WITHOUT ROWID;
INSERT OR IGNORE INTO tags_v2(name, value, created_at, id, kind, seq)
	SELECT t.name, t.value, t.created_at, t.id, e.kind, e.seq FROM %s t JOIN events e ON e.id = t.id
	ORDER BY t.name, t.value, t.created_at, e.seq;
DROP TABLE tags;
DROP TABLE IF EXISTS tags_pending;
ALTER TABLE tags_v2 RENAME TO tags;`

// migrateEvents rebuilds an events table made when ids were unique by a
// constraint of the table itself, which no bulk load can drop (run before
// schema, which then creates the indexes).
const migrateEvents = `
CREATE TABLE events_v3 (` + eventColumns + `);
INSERT INTO events_v3(seq, id, agent_id, created_at, kind, body, raw, raw_type, received_at)
	SELECT seq, id, agent_id, created_at, kind, body, raw, raw_type, received_at FROM events ORDER BY seq;
DROP TABLE events;
ALTER TABLE events_v3 RENAME TO events;`

// migrateTagKey copies a tag table keyed by (name, value, created_at,
// id) into one keyed by seq after created_at, and dropTimeIndexes drops
// events_order and events_kind made with id after created_at, for schema
// to build again (see secondaryIndexes; both run before schema).
const (
	migrateTagKey = `
CREATE TABLE tags_v3 (` + tagColumns + `,
	PRIMARY KEY (name, value, created_at, seq)
) WITHOUT ROWID;
INSERT OR IGNORE INTO tags_v3(name, value, created_at, id, kind, seq)
	SELECT name, value, created_at, id, kind, seq FROM tags ORDER BY name, value, created_at, seq;
DROP TABLE tags;
ALTER TABLE tags_v3 RENAME TO tags;`
	dropTimeIndexes = `
DROP INDEX IF EXISTS events_order;
DROP INDEX IF EXISTS events_kind;`
)

// indexName returns the name in a CREATE [UNIQUE] INDEX statement.
func indexName(ddl string) string {
	ddl = strings.TrimPrefix(ddl, "CREATE UNIQUE INDEX IF NOT EXISTS ")
	return strings.Fields(strings.TrimPrefix(ddl, "CREATE INDEX IF NOT EXISTS "))[0]
}

// mergePending moves the bulk-loaded tag rows into tags, in key order so
// the primary key is written page by page.
const mergePending = `
INSERT OR IGNORE INTO tags(name, value, created_at, id, kind, seq)
	SELECT name, value, created_at, id, kind, seq FROM tags_pending ORDER BY name, value, created_at, seq;
DELETE FROM tags_pending;`
