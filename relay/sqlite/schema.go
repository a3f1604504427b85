package sqlite

import (
	"strings"

	"github.com/anp2net/relay/relay/eventlog/sqlq"
)

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
// are missing, so a crash during a bulk load heals on the next start. Ids
// are unique by the writer's in-memory id index (idIndex), not by the log.
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

// secondaryIndexes are the indexes a bulk load drops; they serve the
// filtered reads. Ids have no index: the writer's id index keeps them
// unique and serves reads by id (see idIndex).
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
// Authors have no index of the log but events_latest: the writer's author
// index (authorIndex) lists each author's events in memory, because an
// index keyed by author takes a page write at a scattered place for every
// append. events_latest holds only the events of overwrite kinds (profiles,
// capabilities, funding: a few per author), for the "latest as of" check
// of an as_of query and for History.
var secondaryIndexes = []string{
	`CREATE INDEX IF NOT EXISTS events_order       ON events(created_at, seq, id)`,
	`CREATE INDEX IF NOT EXISTS events_kind        ON events(kind, created_at, seq, id)`,
	latestIndex,
}

// latestIndex is events_latest (see secondaryIndexes). Its condition is
// overwriteKinds, written as the queries that use it write it: SQLite
// takes a partial index only for a query whose WHERE clause contains the
// index's. Open builds it again when the overwrite kinds change.
var latestIndex = `CREATE INDEX IF NOT EXISTS events_latest ON events(agent_id, kind, created_at, id) WHERE kind IN (` + overwriteKinds() + `)`

// droppedIndexes are indexes of earlier logs that Open drops: ids and
// authors are indexed in memory now (idIndex, authorIndex). An earlier
// binary that opens the log creates them again.
var droppedIndexes = []string{"events_id", "events_author", "events_author_kind"}

// overwriteKinds lists protocol.OverwriteKinds for SQL, in ascending
// order, as the queries write it.
func overwriteKinds() string { return sqlq.OverwriteKinds() }

// idIndexName is the unique index on events(id) that logs kept before the
// id index moved into memory (and that a binary from then creates again
// when it opens the log). Open drops it: every append would still write it.
const idIndexName = "events_id"

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
