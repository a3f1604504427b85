package delivery

import (
	"database/sql"
	"path/filepath"
	"testing"
)

// TestMigrateOldQueue: a queue written before A2A targets (no
// target_type column) opens with the column added and its deliveries
// read as webhook deliveries.
func TestMigrateOldQueue(t *testing.T) {
	path := filepath.Join(t.TempDir(), "old.delivery")
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`CREATE TABLE deliveries(
  id TEXT PRIMARY KEY, idem_key TEXT NOT NULL UNIQUE,
  trigger_id TEXT NOT NULL, owner TEXT NOT NULL, event_id TEXT NOT NULL, seq INTEGER NOT NULL,
  target TEXT NOT NULL, throttle_key TEXT NOT NULL, depth INTEGER NOT NULL,
  status TEXT NOT NULL, owner_lease INTEGER NOT NULL, attempts INTEGER NOT NULL,
  next_at INTEGER NOT NULL, deadline INTEGER NOT NULL, last_error TEXT NOT NULL,
  created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL,
  body BLOB, token TEXT NOT NULL DEFAULT '');
INSERT INTO deliveries VALUES ('d1', 'k1', 't1', 'o', 'e1', 5, 'https://h.example/', '', 0, 'pending', 1, 0, 0, 0, '', 1, 1, NULL, '')`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	for range 2 { // and a second open finds nothing to do
		st, err := openStore(path)
		if err != nil {
			t.Fatal(err)
		}
		d, err := st.get(t.Context(), "d1")
		st.close()
		if err != nil || d == nil || d.TargetType != TargetWebhook || d.Target != "https://h.example/" {
			t.Fatalf("after migration: %+v %v", d, err)
		}
	}
}
