package delivery

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"path/filepath"
	"strings"
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

// TestAppendPayload: the webhook body built without encoding the event
// again is the bytes an encoder (without HTML escaping: the event is sent
// as stored) makes of the Payload, for ids with characters JSON escapes
// too.
func TestAppendPayload(t *testing.T) {
	ev := []byte(`{"id":"ab","kind":1,"content":"x \"q\" <b> \u2028","tags":[["t","a"]]}`)
	for _, a := range []Attempt{
		{DeliveryID: newID(), InvocationID: "inv", TriggerID: newID(), IdempotencyKey: IdempotencyKey("e", "t"), OwnerLease: 2, Attempt: 1},
		{DeliveryID: "a\"b\\c\x01é", InvocationID: "", TriggerID: "<t>&", IdempotencyKey: "k", OwnerLease: 1 << 40, Attempt: 8},
	} {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(Payload{Attempt: a, Event: ev}); err != nil {
			t.Fatal(err)
		}
		want := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
		if got := appendPayload(nil, a, ev); !bytes.Equal(got, want) {
			t.Fatalf("appendPayload\n got %s\nwant %s", got, want)
		}
	}
}

// TestThrottleQueryUsesPartialIndex: the throttle count reads the partial
// index that only throttled deliveries enter, not the whole queue; the
// claim's reads of the owners with waiting work and of one owner's due
// deliveries read the partial index of waiting deliveries.
func TestThrottleQueryUsesPartialIndex(t *testing.T) {
	st, err := openStore(filepath.Join(t.TempDir(), "q.delivery"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.close()
	plan := func(q string, args ...any) string {
		rows, err := st.db.Query(`EXPLAIN QUERY PLAN `+q, args...)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var plan string
		for rows.Next() {
			var id, parent, notused int
			var detail string
			if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
				t.Fatal(err)
			}
			plan += detail + "\n"
		}
		return plan
	}
	if p := plan(qThrottle, "t", "=x", 0); !strings.Contains(p, "deliveries_throttled") {
		t.Fatalf("throttle query plan:\n%s", p)
	}
	if p := plan(qOwners); strings.Count(p, "deliveries_waiting") < 2 || strings.Contains(p, "SCAN deliveries") {
		t.Fatalf("owners query plan:\n%s", p)
	}
	if p := plan(qDueOf, "o", 0, 10); !strings.Contains(p, "deliveries_waiting") || strings.Contains(p, "TEMP B-TREE") {
		t.Fatalf("due query plan:\n%s", p)
	}
}
