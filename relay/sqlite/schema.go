package sqlite

// schema is the log's layout. events is append-only; seq is the local
// arrival order (the rowid). tags holds one row per tag with at least two
// elements and serves every tag filter from its primary key. revokes records
// kind-9 claims; a revoke takes effect only over events of the same author,
// whichever arrives first.
const schema = `
CREATE TABLE IF NOT EXISTS events (
	seq         INTEGER PRIMARY KEY,
	id          BLOB    NOT NULL UNIQUE,
	agent_id    BLOB    NOT NULL,
	created_at  INTEGER NOT NULL,
	kind        INTEGER NOT NULL,
	body        TEXT    NOT NULL,
	raw         BLOB,
	raw_type    TEXT,
	received_at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS events_order       ON events(created_at, id);
CREATE INDEX IF NOT EXISTS events_author      ON events(agent_id, created_at, id);
CREATE INDEX IF NOT EXISTS events_kind        ON events(kind, created_at, id);
CREATE INDEX IF NOT EXISTS events_author_kind ON events(agent_id, kind, created_at, id);
CREATE TABLE IF NOT EXISTS tags (
	name       TEXT    NOT NULL,
	value      TEXT    NOT NULL,
	created_at INTEGER NOT NULL,
	id         BLOB    NOT NULL,
	PRIMARY KEY (name, value, created_at, id)
) WITHOUT ROWID;
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
`
