package sqlite

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/eventlog"
	"github.com/anp2net/relay/relay/eventlog/logtest"
)

// TestConformance runs the eventlog conformance suite on the SQLite store.
func TestConformance(t *testing.T) {
	logtest.Run(t, func(t *testing.T, hook func([]eventlog.Committed)) eventlog.Log {
		s, err := Open(filepath.Join(t.TempDir(), "log.db"), hook)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}

// The suite's helpers, under the names these tests use.
var (
	key          = logtest.Key
	ev           = logtest.Ev
	checkFilters = func(t *testing.T, s *Store, add func(...*protocol.Event)) { logtest.CheckFilters(t, s, add) }
	withRevoked  = logtest.WithRevoked
)

func appendAll(t *testing.T, s *Store, evs ...*protocol.Event) { logtest.AppendAll(t, s, evs...) }

func ids(t *testing.T, bodies [][]byte) []string { return logtest.IDs(t, bodies) }

func open(t *testing.T) *Store {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), "log.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestBulkLoadKeepsReadsRight loads the same log with the indexes
// dropped (BeginBulk) and checks every filter while the load is under way,
// after EndBulk, and after a store closed mid-load is opened again.
func TestBulkLoadKeepsReadsRight(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := Open(filepath.Join(dir, "log.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { s.Close() }()
	if err := s.BeginBulk(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.BeginBulk(ctx); err != nil { // nested: the inner End must not rebuild
		t.Fatal(err)
	}
	if !s.Bulk() || countRows(t, s, "sqlite_master WHERE type = 'index' AND name LIKE 'events_%'") != 0 {
		t.Fatal("bulk mode did not drop the secondary indexes")
	}
	checkFilters(t, s, func(evs ...*protocol.Event) {
		recs := make([]Record, len(evs))
		for i, e := range evs {
			recs[i] = Record{Event: e}
		}
		if _, err := s.AppendBatch(ctx, recs); err != nil {
			t.Fatal(err)
		}
	})
	if n := countRows(t, s, "tags_pending"); n != 8 {
		t.Fatalf("tags_pending holds %d rows, want 8 (one repeated tag dropped)", n)
	}
	var steps []string
	if err := s.EndBulk(func(step string) { steps = append(steps, step) }); err != nil || len(steps) != 0 || !s.Bulk() {
		t.Fatalf("inner EndBulk: %v %v %v", err, steps, s.Bulk())
	}
	// A publish while the load runs lands in the pending rows too.
	late := ev(key(3), 400, 1, "late", []string{"t", "late"})
	appendAll(t, s, late)
	if err := s.EndBulk(func(step string) { steps = append(steps, step) }); err != nil {
		t.Fatal(err)
	}
	if s.Bulk() || len(steps) != len(secondaryIndexes)+1 || countRows(t, s, "tags_pending") != 0 || countRows(t, s, "tags") != 9 {
		t.Fatalf("after EndBulk: bulk %v, steps %v, pending %d, tags %d", s.Bulk(), steps, countRows(t, s, "tags_pending"), countRows(t, s, "tags"))
	}
	checkPlans(t, s)
	got, err := s.Query(ctx, Filter{Tags: map[string][]string{"t": {"late"}}})
	if err != nil || len(got) != 1 {
		t.Fatalf("late publish: %d %v", len(got), err)
	}

	// A store closed in bulk mode (as by a crash) heals on the next Open.
	if err := s.BeginBulk(ctx); err != nil {
		t.Fatal(err)
	}
	appendAll(t, s, ev(key(3), 500, 1, "cut short", []string{"t", "late"}))
	s.Close()
	var repairs []string
	if s, err = OpenWithRepair(filepath.Join(dir, "log.db"), nil, func(w string) { repairs = append(repairs, w) }); err != nil {
		t.Fatal(err)
	}
	if len(repairs) != 1 || !strings.Contains(repairs[0], fmt.Sprintf("rebuilding %d indexes", len(secondaryIndexes))) {
		t.Fatalf("repair notices %q", repairs)
	}
	if n := countRows(t, s, "sqlite_master WHERE type = 'index' AND name LIKE 'events_%'"); n != len(secondaryIndexes) || countRows(t, s, "tags_pending") != 0 {
		t.Fatalf("reopen after a cut-short bulk load: %d indexes, %d pending rows", n, countRows(t, s, "tags_pending"))
	}
	if got, _ := s.Query(ctx, Filter{Tags: map[string][]string{"t": {"late"}}}); len(got) != 2 {
		t.Fatalf("tag rows of the cut-short load: %d events, want 2", len(got))
	}
}

func countRows(t *testing.T, s *Store, from string) int {
	t.Helper()
	var n int
	if err := s.read.QueryRow("SELECT COUNT(*) FROM " + from).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestQueryPlansUseIndexes(t *testing.T) {
	s := open(t)
	// Enough rows, with planner statistics, that a scan would be a real choice.
	for i := 0; i < 300; i++ {
		appendAll(t, s, ev(key(i%7), int64(100+i), int64(i%3), "x", []string{"t", fmt.Sprint("topic", i%40)}, []string{"p", protocol.AgentIDOf(key(i % 11))}))
	}
	if _, err := s.write.Exec("ANALYZE"); err != nil {
		t.Fatal(err)
	}
	checkPlans(t, s)
}

func checkPlans(t *testing.T, s *Store) {
	t.Helper()
	var author []byte
	if err := s.read.QueryRow(`SELECT agent_id FROM events LIMIT 1`).Scan(&author); err != nil {
		t.Fatal(err)
	}
	cases := map[string]Filter{
		"t":      {Tags: map[string][]string{"t": {"a"}}},
		"e":      {Tags: map[string][]string{"e": {strings.Repeat("a", 64)}}},
		"p":      {Tags: map[string][]string{"p": {strings.Repeat("b", 64)}}, Kinds: []int64{1}},
		"cap":    {Tags: map[string][]string{"cap": {"x.y"}}},
		"x":      {Tags: map[string][]string{"x": {"y"}}},
		"author": {Authors: []string{hex.EncodeToString(author)}},
	}
	for _, refs := range []bool{false, true} {
		for name, f := range cases {
			plan, err := s.explain(f, refs)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(plan, "SCAN e") || strings.Contains(plan, "SCAN t") || strings.Contains(plan, "SCAN events") || strings.Contains(plan, "SCAN tags") {
				t.Errorf("%s filter scans a table:\n%s", name, plan)
			}
			if name != "author" && !strings.Contains(plan, "SEARCH t USING PRIMARY KEY") {
				t.Errorf("%s filter does not search the tag index:\n%s", name, plan)
			}
			if name == "author" && !strings.Contains(plan, "SEARCH e USING INTEGER PRIMARY KEY") {
				t.Errorf("author filter does not read the author index's candidates by seq:\n%s", plan)
			}
			// The first step of a two-step query reads index entries only
			// (an author filter reads its candidates' rows by seq: the
			// author index is in memory).
			if refs && name != "author" && (strings.Contains(plan, " e ") || strings.Contains(plan, "revokes")) && !strings.Contains(plan, "COVERING INDEX") {
				t.Errorf("%s filter reads events for its refs:\n%s", name, plan)
			}
		}
	}
}

// TestMigrateOldTagTables opens a log whose tag tables predate the kind and
// seq columns (one event's rows still pending from a cut-short bulk load)
// and requires the same answers as before the downgrade.
func TestMigrateOldTagTables(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "old.db")
	s, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	var evs []*protocol.Event
	for i := 0; i < 60; i++ {
		evs = append(evs, ev(key(i%5), int64(100+i), int64(i%3), fmt.Sprint(i), []string{"t", fmt.Sprint("topic", i%4)}, []string{"p", protocol.AgentIDOf(key(i % 6))}))
	}
	appendAll(t, s, evs...)
	filters := []Filter{{Tags: map[string][]string{"t": {"topic1"}}}, {Tags: map[string][]string{"p": {protocol.AgentIDOf(key(2))}}, Kinds: []int64{2}},
		{Tags: map[string][]string{"t": {"topic2"}, "p": {protocol.AgentIDOf(key(4))}}}}
	var before [][][]byte
	for _, f := range filters {
		got, err := s.Query(ctx, f)
		if err != nil || len(got) == 0 {
			t.Fatalf("%+v: %d %v", f, len(got), err)
		}
		before = append(before, got)
	}
	_, err = s.write.Exec(`
		CREATE TABLE tags_old (name TEXT NOT NULL, value TEXT NOT NULL, created_at INTEGER NOT NULL, id BLOB NOT NULL,
			PRIMARY KEY (name, value, created_at, id)) WITHOUT ROWID;
		INSERT INTO tags_old SELECT name, value, created_at, id FROM tags;
		DROP TABLE tags; ALTER TABLE tags_old RENAME TO tags;
		DROP TABLE tags_pending;
		CREATE TABLE tags_pending (name TEXT NOT NULL, value TEXT NOT NULL, created_at INTEGER NOT NULL, id BLOB NOT NULL);
		INSERT INTO tags_pending SELECT * FROM tags WHERE id = (SELECT id FROM events WHERE seq = 2);
		DELETE FROM tags WHERE id = (SELECT id FROM events WHERE seq = 2);`)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	var repairs []string
	if s, err = OpenWithRepair(path, nil, func(w string) { repairs = append(repairs, w) }); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if len(repairs) != 1 || repairs[0] != "migrating the tag tables" {
		t.Fatalf("repair notices %q", repairs)
	}
	s.Close()
	repairs = nil
	if s, err = OpenWithRepair(path, nil, func(w string) { repairs = append(repairs, w) }); err != nil || len(repairs) != 0 {
		t.Fatalf("second open: %v, notices %q", err, repairs)
	}
	defer s.Close()
	if n := countRows(t, s, "pragma_table_info('tags') WHERE name IN ('kind', 'seq')"); n != 2 {
		t.Fatalf("tags not migrated: %d new columns", n)
	}
	for i, f := range filters {
		got, err := s.Query(ctx, f)
		if err != nil || !slicesEqual(got, before[i]) {
			t.Fatalf("%+v after migration: %d events, want %d (%v)", f, len(got), len(before[i]), err)
		}
	}
}

func slicesEqual(a, b [][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if string(a[i]) != string(b[i]) {
			return false
		}
	}
	return true
}

// writerSync returns the writer connection's PRAGMA synchronous (1 NORMAL,
// 2 FULL), read on the writer between transactions.
func writerSync(t *testing.T, s *Store) int {
	t.Helper()
	return writerPragma(t, s, "synchronous")
}

// writerPragma reads an integer PRAGMA on the writer between transactions.
func writerPragma(t *testing.T, s *Store, name string) int {
	t.Helper()
	var v int
	if err := s.control(context.Background(), func() error {
		return s.write.QueryRow("PRAGMA " + name).Scan(&v)
	}); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestLoadBatchSyncAndHookOrder checks that LoadBatch commits without an
// fsync only while the writer holds nothing else, that the next durable
// append restores synchronous=FULL, and that with loads and publishes
// interleaved the hook still sees every commit in sequence order before
// the append that made it returns.
func TestLoadBatchSyncAndHookOrder(t *testing.T) {
	var mu sync.Mutex
	var last int64
	seen := map[int64]bool{}
	var order []string
	s, err := Open(filepath.Join(t.TempDir(), "log.db"), func(c []Committed) {
		mu.Lock()
		defer mu.Unlock()
		for _, x := range c {
			if x.Seq <= last {
				order = append(order, fmt.Sprintf("seq %d after %d", x.Seq, last))
			}
			last = x.Seq
			seen[x.Seq] = true
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	if got := writerSync(t, s); got != 2 {
		t.Fatalf("fresh store synchronous=%d, want 2 (FULL)", got)
	}
	recs := func(k, from, n int) []Record {
		out := make([]Record, n)
		for i := range out {
			out[i] = Record{Event: ev(key(k), int64(from+i), 1, fmt.Sprint(k, i))}
		}
		return out
	}
	if _, err := s.LoadBatch(ctx, recs(1, 0, 50)); err != nil {
		t.Fatal(err)
	}
	if got := writerSync(t, s); got != 1 {
		t.Fatalf("after a lone LoadBatch synchronous=%d, want 1 (NORMAL)", got)
	}
	if _, err := s.Append(ctx, Record{Event: ev(key(2), 1, 1, "durable")}); err != nil {
		t.Fatal(err)
	}
	if got := writerSync(t, s); got != 2 {
		t.Fatalf("after an Append synchronous=%d, want 2 (FULL)", got)
	}
	var wg sync.WaitGroup
	check := func(res []Result) {
		mu.Lock()
		defer mu.Unlock()
		for _, r := range res {
			if !r.Duplicate && !seen[r.Seq] {
				t.Errorf("append of seq %d returned before the hook saw it", r.Seq)
			}
		}
	}
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 20 {
				batch := recs(10+g, 1000*i, 25)
				var res []Result
				var err error
				if g%2 == 0 {
					res, err = s.LoadBatch(ctx, batch)
				} else {
					res, err = s.AppendBatch(ctx, batch)
				}
				if err != nil {
					t.Error(err)
					return
				}
				check(res)
			}
		}()
	}
	wg.Wait()
	if len(order) > 0 {
		t.Fatalf("hook out of order: %v", order)
	}
	st, _ := s.Stats(ctx)
	if st.Events != 51+4*20*25 || len(seen) != int(st.Events) {
		t.Fatalf("stored %d, hook saw %d", st.Events, len(seen))
	}
}

// TestBulkLoadKeepsIDsUnique checks that ids stay unique and readable by id
// through the id index during a bulk load and after it: copies of events
// stored before and during the load are duplicates with their first seq,
// Get, Lookup, Author and ids= answer for both, and an id never stored is
// not found. The log never has an index on ids.
func TestBulkLoadKeepsIDsUnique(t *testing.T) {
	ctx := context.Background()
	s := open(t)
	before := ev(key(1), 100, 1, "before", []string{"t", "x"})
	appendAll(t, s, before)
	if err := s.BeginBulk(ctx); err != nil {
		t.Fatal(err)
	}
	if countRows(t, s, "sqlite_master WHERE type = 'index' AND name LIKE 'events%'") != 0 {
		t.Fatal("bulk mode kept an index")
	}
	during := ev(key(2), 200, 1, "during", []string{"t", "x"})
	res, err := s.LoadBatch(ctx, []Record{{Event: during}, {Event: before}, {Event: during}})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Duplicate || !res[1].Duplicate || res[1].Seq != 1 || !res[2].Duplicate || res[2].Seq != res[0].Seq {
		t.Fatalf("load results %+v", res)
	}
	check := func(stage string) {
		t.Helper()
		for _, e := range []*protocol.Event{before, during} {
			if r, err := s.Append(ctx, Record{Event: e}); err != nil || !r.Duplicate {
				t.Fatalf("%s: second copy of %q: %+v %v", stage, e.Content, r, err)
			}
			st, err := s.Get(ctx, e.ID)
			if err != nil || !strings.Contains(string(st.Body), e.Sig) {
				t.Fatalf("%s: get %q: %v", stage, e.Content, err)
			}
			if sig, found, err := s.Lookup(ctx, e.ID); !found || sig != e.Sig || err != nil {
				t.Fatalf("%s: lookup %q: %v %v", stage, e.Content, found, err)
			}
			if a, err := s.Author(ctx, e.ID); a != e.AgentID || err != nil {
				t.Fatalf("%s: author %q: %q %v", stage, e.Content, a, err)
			}
		}
		never := ev(key(3), 300, 1, "never stored")
		if _, err := s.Get(ctx, never.ID); !errors.Is(err, ErrNotFound) {
			t.Fatalf("%s: get of an unstored id: %v", stage, err)
		}
		if _, found, _ := s.Lookup(ctx, never.ID); found {
			t.Fatalf("%s: lookup found an unstored id", stage)
		}
		got, err := s.Query(ctx, Filter{IDs: []string{never.ID, during.ID, before.ID}})
		if err != nil || strings.Join(ids(t, got), ",") != during.ID+","+before.ID {
			t.Fatalf("%s: ids query: %d events %v", stage, len(got), err)
		}
		if got, _ := s.Query(ctx, Filter{IDs: []string{never.ID}}); len(got) != 0 {
			t.Fatalf("%s: ids query of an unstored id gave %d events", stage, len(got))
		}
		if n := countRows(t, s, "events"); n != 2 {
			t.Fatalf("%s: %d events stored, want 2", stage, n)
		}
	}
	check("during the load")
	if c := writerPragma(t, s, "cache_size"); fmt.Sprint(c) != bulkCache {
		t.Fatalf("writer's cache_size during the load: %d, want %s", c, bulkCache)
	}
	if err := s.EndBulk(nil); err != nil {
		t.Fatal(err)
	}
	if countRows(t, s, "sqlite_master WHERE name = 'events_id'") != 0 ||
		countRows(t, s, "sqlite_master WHERE name LIKE 'events_%'") != len(secondaryIndexes) || s.ids.len() != 2 {
		t.Fatal("EndBulk did not bring exactly the secondary indexes back, or the id index lost count")
	}
	// The rebuild's sorter settings are the writer's own again.
	if c, ts, th := writerPragma(t, s, "cache_size"), writerPragma(t, s, "temp_store"), writerPragma(t, s, "threads"); fmt.Sprint(c) != writerCache || ts != 2 || th != 0 {
		t.Fatalf("writer after EndBulk: cache_size %d, temp_store %d, threads %d", c, ts, th)
	}
	check("after the load")
}

// TestBulkLoadFailedBatchForgetsIDs makes a bulk transaction fail on its
// second record: the writer retries each record alone, and the first and
// third must then be stored, not taken for copies of ids the failed
// transaction had recorded.
func TestBulkLoadFailedBatchForgetsIDs(t *testing.T) {
	ctx := context.Background()
	s := open(t)
	if err := s.BeginBulk(ctx); err != nil {
		t.Fatal(err)
	}
	good1, good2 := ev(key(1), 100, 1, "one"), ev(key(1), 101, 1, "two")
	bad := &protocol.Event{ID: "not hex", AgentID: good1.AgentID, Kind: 1, Tags: [][]string{}}
	res, err := s.LoadBatch(ctx, []Record{{Event: good1}, {Event: bad}, {Event: good2}})
	if err == nil {
		t.Fatal("a record with a bad id was stored")
	}
	if res[0].Duplicate || res[0].Seq == 0 || res[2].Duplicate || res[2].Seq == 0 {
		t.Fatalf("good records after the retry: %+v", res)
	}
	if err := s.EndBulk(nil); err != nil {
		t.Fatal(err)
	}
	for _, e := range []*protocol.Event{good1, good2} {
		if _, err := s.Get(ctx, e.ID); err != nil {
			t.Fatalf("%q lost: %v", e.Content, err)
		}
	}
}

// TestMigrateInlineIDConstraint opens a log whose events table makes ids
// unique by a table constraint (as logs did before events_id) and requires
// the migration notice once, no constraint nor index on ids, and the same
// answers as before.
func TestMigrateInlineIDConstraint(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "old.db")
	s, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	var evs []*protocol.Event
	for i := 0; i < 40; i++ {
		evs = append(evs, ev(key(i%4), int64(100+i), int64(i%3), fmt.Sprint(i), []string{"t", fmt.Sprint("topic", i%5)}))
	}
	appendAll(t, s, evs...)
	filters := []Filter{{}, {Kinds: []int64{1}}, {Authors: []string{protocol.AgentIDOf(key(2))}},
		{Tags: map[string][]string{"t": {"topic3"}}}, {IDs: []string{evs[5].ID, evs[30].ID}}}
	var want []string
	for _, f := range filters {
		got, err := s.Query(ctx, f)
		if err != nil || len(got) == 0 {
			t.Fatalf("%+v: %d %v", f, len(got), err)
		}
		want = append(want, strings.Join(ids(t, got), ","))
	}
	_, err = s.write.Exec(`
		CREATE TABLE events_old (seq INTEGER PRIMARY KEY, id BLOB NOT NULL UNIQUE, agent_id BLOB NOT NULL,
			created_at INTEGER NOT NULL, kind INTEGER NOT NULL, body TEXT NOT NULL, raw BLOB, raw_type TEXT,
			received_at INTEGER NOT NULL);
		INSERT INTO events_old SELECT * FROM events;
		DROP TABLE events; ALTER TABLE events_old RENAME TO events;`)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	var repairs []string
	if s, err = OpenWithRepair(path, nil, func(w string) { repairs = append(repairs, w) }); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if len(repairs) != 1 || !strings.Contains(repairs[0], "unique constraint on event ids") {
		t.Fatalf("repair notices %q", repairs)
	}
	if countRows(t, s, "sqlite_master WHERE name = 'sqlite_autoindex_events_1'") != 0 ||
		countRows(t, s, "sqlite_master WHERE type = 'index' AND name LIKE 'events_%'") != len(secondaryIndexes) {
		t.Fatal("constraint not dropped, or the indexes not rebuilt")
	}
	for i, f := range filters {
		got, err := s.Query(ctx, f)
		if err != nil || strings.Join(ids(t, got), ",") != want[i] {
			t.Fatalf("%+v after migration: %v", f, err)
		}
	}
	if r, err := s.Append(ctx, Record{Event: evs[7]}); err != nil || !r.Duplicate || r.Seq != 8 {
		t.Fatalf("copy after migration: %+v %v", r, err)
	}
	s.Close()
	repairs = nil
	if s, err = OpenWithRepair(path, nil, func(w string) { repairs = append(repairs, w) }); err != nil || len(repairs) != 0 {
		t.Fatalf("second open: %v, notices %q", err, repairs)
	}
	s.Close()
}

// TestSortingFallsBack makes the sorted statement fail once, inside a
// transaction it leaves open (as a failed merge does): sorting must roll
// it back and run the statement again with the writer's own settings (the
// in-memory sorter), and leave those settings in place.
func TestSortingFallsBack(t *testing.T) {
	s := open(t)
	calls := 0
	var during []int
	err := s.control(context.Background(), func() error {
		return sorting(s.write, func() error {
			calls++
			var ts int
			if err := s.write.QueryRow("PRAGMA temp_store").Scan(&ts); err != nil {
				return err
			}
			during = append(during, ts)
			if _, err := s.write.Exec(`BEGIN IMMEDIATE; INSERT INTO meta(key, value) VALUES('probe', 'x')`); err != nil {
				return err
			}
			if calls == 1 {
				return errors.New("no temporary directory")
			}
			_, err := s.write.Exec(`COMMIT`)
			return err
		})
	})
	if err != nil || calls != 2 || fmt.Sprint(during) != "[1 2]" {
		t.Fatalf("err %v, calls %d, temp_store during the calls %v (want FILE then MEMORY: [1 2])", err, calls, during)
	}
	if n := countRows(t, s, "meta WHERE key = 'probe'"); n != 1 {
		t.Fatalf("%d probe rows: the first attempt's transaction was not rolled back", n)
	}
	if c := writerPragma(t, s, "cache_size"); fmt.Sprint(c) != writerCache {
		t.Fatalf("cache_size %d after the fallback", c)
	}
}

// TestBulkLoadTagRowsInMany loads events whose tag rows fill several
// many-row inserts and a remainder in one transaction: every row lands in
// tags_pending, and after the merge every tag answers as on a plain log.
func TestBulkLoadTagRowsInMany(t *testing.T) {
	ctx := context.Background()
	plain, bulk := open(t), open(t)
	var recs []Record
	for i := range 150 {
		e := ev(key(i%7), int64(100+i), 1, fmt.Sprint(i), []string{"t", fmt.Sprint("topic", i%5)}, []string{"p", protocol.AgentIDOf(key(i % 3))}, []string{"x"})
		recs = append(recs, Record{Event: e})
	}
	if _, err := plain.AppendBatch(ctx, recs); err != nil {
		t.Fatal(err)
	}
	if err := bulk.BeginBulk(ctx); err != nil {
		t.Fatal(err)
	}
	res, err := bulk.LoadBatch(ctx, recs)
	if err != nil {
		t.Fatal(err)
	}
	// The writer numbers a bulk load's events itself: each answer's seq
	// is the stored event's, and they run 1..150.
	seen := map[int64]bool{}
	for i, r := range res {
		st, err := bulk.Get(ctx, recs[i].Event.ID)
		if err != nil || r.Duplicate || st.Seq != r.Seq || r.Seq < 1 || r.Seq > 150 || seen[r.Seq] {
			t.Fatalf("event %d: answered %+v, stored at %v (%v)", i, r, st, err)
		}
		seen[r.Seq] = true
	}
	if n := countRows(t, bulk, "tags_pending"); n != 300 {
		t.Fatalf("%d pending tag rows, want 300", n)
	}
	if err := bulk.EndBulk(nil); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		for _, f := range []Filter{{Tags: map[string][]string{"t": {fmt.Sprint("topic", i)}}, Limit: 1000},
			{Tags: map[string][]string{"p": {protocol.AgentIDOf(key(i % 3))}}, Limit: 1000}} {
			a, err1 := plain.Query(ctx, f)
			b, err2 := bulk.Query(ctx, f)
			if err1 != nil || err2 != nil || len(a) == 0 || !slicesEqual(a, b) {
				t.Fatalf("%+v: plain %d, bulk %d (%v %v)", f.Tags, len(a), len(b), err1, err2)
			}
		}
	}
}

// TestTiesAnswerByIDAndMigrate appends events that share their created_at
// in an order unrelated to their ids, and requires every filtered read
// (through events_order, events_kind, the tag key and the author indexes,
// with and without a second tag, a kind and an until bound) to answer
// newest first with ties by id, as a sort of all matching events says;
// then downgrades the log to the earlier keys (ties by id in the tag key
// and the time indexes) and requires the same answers after Open rekeys
// it, once.
func TestTiesAnswerByIDAndMigrate(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "ties.db")
	s, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	var evs []*protocol.Event
	for i := 0; i < 300; i++ {
		evs = append(evs, ev(key(i%7), int64(100+i%4), int64(i%3), fmt.Sprint("tie ", i),
			[]string{"t", fmt.Sprint("topic", i%5)}, []string{"p", protocol.AgentIDOf(key(i % 6))}))
	}
	appendAll(t, s, evs...)
	until := int64(102)
	filters := []Filter{{}, {Limit: 7}, {Kinds: []int64{1}}, {Kinds: []int64{0, 2}, Limit: 50}, {Until: &until, Limit: 30},
		{Tags: map[string][]string{"t": {"topic1"}}}, {Tags: map[string][]string{"t": {"topic1", "topic3"}}, Limit: 40},
		{Tags: map[string][]string{"t": {"topic2"}, "p": {protocol.AgentIDOf(key(4))}}},
		{Tags: map[string][]string{"p": {protocol.AgentIDOf(key(2))}}, Kinds: []int64{2}, Until: &until},
		{Authors: []string{protocol.AgentIDOf(key(3))}}, {Authors: []string{protocol.AgentIDOf(key(3))}, Kinds: []int64{1}}}
	// want sorts every event a filter matches, newest first, ties by id.
	want := func(f Filter) []string {
		var ids []string
		var match []*protocol.Event
		for _, e := range evs {
			if f.Until != nil && e.CreatedAt > *f.Until || len(f.Kinds) > 0 && !slices.Contains(f.Kinds, e.Kind) ||
				len(f.Authors) > 0 && !slices.Contains(f.Authors, e.AgentID) {
				continue
			}
			ok := true
			for name, vals := range f.Tags {
				has := false
				for _, tag := range e.Tags {
					has = has || tag[0] == name && slices.Contains(vals, tag[1])
				}
				ok = ok && has
			}
			if ok {
				match = append(match, e)
			}
		}
		slices.SortFunc(match, func(a, b *protocol.Event) int {
			if a.CreatedAt != b.CreatedAt {
				return int(b.CreatedAt - a.CreatedAt)
			}
			return strings.Compare(b.ID, a.ID)
		})
		limit := f.Limit
		if limit == 0 {
			limit = 100
		}
		for _, e := range match[:min(limit, len(match))] {
			ids = append(ids, e.ID)
		}
		return ids
	}
	check := func(when string) {
		t.Helper()
		for _, f := range filters {
			got, err := s.Query(ctx, f)
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, b := range got {
				e, err := protocol.DecodeJSON(b)
				if err != nil {
					t.Fatal(err)
				}
				ids = append(ids, e.ID)
			}
			if w := want(f); !slices.Equal(ids, w) || len(w) == 0 {
				t.Fatalf("%s, %+v: %d ids, want %d in order (%v)", when, f, len(ids), len(w), slices.Equal(ids, w))
			}
		}
	}
	check("new log")
	_, err = s.write.Exec(`
		CREATE TABLE tags_old (` + tagColumns + `, PRIMARY KEY (name, value, created_at, id)) WITHOUT ROWID;
		INSERT INTO tags_old SELECT * FROM tags;
		DROP TABLE tags; ALTER TABLE tags_old RENAME TO tags;
		DROP INDEX events_order; DROP INDEX events_kind;
		CREATE INDEX events_order ON events(created_at, id);
		CREATE INDEX events_kind ON events(kind, created_at, id);`)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	var repairs []string
	if s, err = OpenWithRepair(path, nil, func(w string) { repairs = append(repairs, w) }); err != nil {
		t.Fatal(err)
	}
	if len(repairs) != 1 || !strings.Contains(repairs[0], "by arrival") {
		t.Fatalf("repair notices %q", repairs)
	}
	check("rekeyed log")
	s.Close()
	repairs = nil
	if s, err = OpenWithRepair(path, nil, func(w string) { repairs = append(repairs, w) }); err != nil || len(repairs) != 0 {
		t.Fatalf("second open: %v, notices %q", err, repairs)
	}
	defer s.Close()
	if n := countRows(t, s, "pragma_table_info('tags') WHERE name = 'seq' AND pk = 4"); n != 1 {
		t.Fatal("tag key not rekeyed by seq")
	}
	for _, idx := range []string{"events_order", "events_kind"} {
		if n := countRows(t, s, "pragma_index_info('"+idx+"') WHERE name = 'seq'"); n != 1 {
			t.Fatalf("%s not rekeyed by seq", idx)
		}
	}
	check("reopened log")
}
