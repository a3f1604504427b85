package sqlite

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/eventlog/sqlq"
)

// withID returns a copy of e under id (the store does not check that an
// id is the event's hash, so tests can make ids that share a prefix).
func withID(e *protocol.Event, id string) *protocol.Event {
	c := *e
	c.ID = id
	return &c
}

// sharedPrefix returns n ids (hex) that share their first 8 bytes.
func sharedPrefix(n int) []string {
	var prefix [8]byte
	rand.Read(prefix[:])
	out := make([]string, n)
	for i := range out {
		var rest [24]byte
		rand.Read(rest[:])
		out[i] = hex.EncodeToString(prefix[:]) + hex.EncodeToString(rest[:])
	}
	return out
}

// checkByID requires every read by id to find want (id → seq) and every id
// in absent to be missing.
func checkByID(t *testing.T, s *Store, stage string, want map[string]int64, absent []string) {
	t.Helper()
	ctx := context.Background()
	var all []string
	for id, seq := range want {
		st, err := s.Get(ctx, id)
		if err != nil || st.Seq != seq || !strings.Contains(string(st.Body), id) {
			t.Fatalf("%s: get %s…: %+v %v, want seq %d", stage, id[:16], st, err, seq)
		}
		if _, found, err := s.Lookup(ctx, id); !found || err != nil {
			t.Fatalf("%s: lookup %s…: %v %v", stage, id[:16], found, err)
		}
		if _, err := s.Author(ctx, id); err != nil {
			t.Fatalf("%s: author %s…: %v", stage, id[:16], err)
		}
		all = append(all, id)
	}
	for _, id := range absent {
		if _, err := s.Get(ctx, id); !errors.Is(err, ErrNotFound) {
			t.Fatalf("%s: get of unstored %s…: %v", stage, id[:16], err)
		}
		if _, found, _ := s.Lookup(ctx, id); found {
			t.Fatalf("%s: lookup found unstored %s…", stage, id[:16])
		}
		if _, err := s.Author(ctx, id); !errors.Is(err, ErrNotFound) {
			t.Fatalf("%s: author of unstored %s…: %v", stage, id[:16], err)
		}
	}
	got, err := s.Query(ctx, Filter{IDs: append(slices.Clone(all), absent...), IncludeRevoked: true})
	if err != nil {
		t.Fatal(err)
	}
	gotIDs := ids(t, got)
	slices.Sort(gotIDs)
	slices.Sort(all)
	if !slices.Equal(gotIDs, all) {
		t.Fatalf("%s: ids query gave %d events, want %d", stage, len(gotIDs), len(all))
	}
	for _, id := range all {
		if r, err := s.Append(ctx, Record{Event: withID(ev(key(9), 1, 1, "copy"), id)}); err != nil || !r.Duplicate || r.Seq != want[id] {
			t.Fatalf("%s: copy of %s…: %+v %v, want duplicate at %d", stage, id[:16], r, err, want[id])
		}
	}
}

// TestIDIndexSharedPrefixes stores ids that share their first 8 bytes (the
// id index's key), some in one transaction, and requires each to keep its
// own seq, copies of each to be duplicates, an unstored id with the same
// prefix to be absent, and the same after the log is opened again (the
// index loaded from the log) and in a bulk load.
func TestIDIndexSharedPrefixes(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "log.db")
	s, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { s.Close() }()
	same := sharedPrefix(6)
	want := map[string]int64{}
	r, err := s.Append(ctx, Record{Event: withID(ev(key(1), 100, 1, "a"), same[0])})
	if err != nil {
		t.Fatal(err)
	}
	want[same[0]] = r.Seq
	// Three in one transaction, the second repeated in it.
	recs := []Record{{Event: withID(ev(key(1), 101, 1, "b"), same[1])}, {Event: withID(ev(key(1), 102, 1, "c"), same[2])},
		{Event: withID(ev(key(1), 103, 1, "d"), same[1])}, {Event: withID(ev(key(1), 104, 1, "e"), same[3])}}
	res, err := s.AppendBatch(ctx, recs)
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Duplicate || res[1].Duplicate || !res[2].Duplicate || res[2].Seq != res[0].Seq || res[3].Duplicate {
		t.Fatalf("batch results %+v", res)
	}
	want[same[1]], want[same[2]], want[same[3]] = res[0].Seq, res[1].Seq, res[3].Seq
	checkByID(t, s, "stored", want, same[4:])
	if n := s.ids.len(); n != 4 {
		t.Fatalf("id index holds %d ids, want 4", n)
	}
	s.Close()
	if s, err = Open(path, nil); err != nil {
		t.Fatal(err)
	}
	checkByID(t, s, "reopened", want, same[4:])
	if err := s.BeginBulk(ctx); err != nil {
		t.Fatal(err)
	}
	res, err = s.LoadBatch(ctx, []Record{{Event: withID(ev(key(2), 105, 1, "f"), same[4])}, {Event: withID(ev(key(2), 106, 1, "g"), same[2])}})
	if err != nil || res[0].Duplicate || !res[1].Duplicate || res[1].Seq != want[same[2]] {
		t.Fatalf("bulk results %+v %v", res, err)
	}
	want[same[4]] = res[0].Seq
	checkByID(t, s, "bulk", want, same[5:])
	if err := s.EndBulk(nil); err != nil {
		t.Fatal(err)
	}
	checkByID(t, s, "after bulk", want, same[5:])
}

// TestIDIndexForget checks that removing the ids of a failed transaction
// leaves the others sharing their key in place, oldest first.
func TestIDIndexForget(t *testing.T) {
	x := newIDIndex()
	var ids [][32]byte
	for _, h := range sharedPrefix(4) {
		b, _ := hex.DecodeString(h)
		ids = append(ids, [32]byte(b))
	}
	for i, id := range ids {
		x.put(id[:], int64(10+i))
	}
	x.forget(ids[1:3], 11) // the middle two
	if got := x.candidates(nil, ids[0][:]); !slices.Equal(got, []int64{10, 13}) {
		t.Fatalf("after forgetting 11 and 12: %v", got)
	}
	x.forget(ids[:1], 10)
	if got := x.candidates(nil, ids[0][:]); !slices.Equal(got, []int64{13}) || len(x.more) != 0 {
		t.Fatalf("after forgetting 10: %v (more %v)", got, x.more)
	}
	x.forget(ids[3:], 13)
	if x.len() != 0 || len(x.tail) != 0 {
		t.Fatalf("index not empty: %d", x.len())
	}
}

// TestReadsByIDSeeAnsweredAppends has publishers read their events by id
// the moment each append is answered, while others keep the writer busy
// and readers ask for ids not yet stored: every answered append must be
// found (run with -race for the index's locking).
func TestReadsByIDSeeAnsweredAppends(t *testing.T) {
	ctx := context.Background()
	s := open(t)
	const publishers, each = 8, 40
	evs := make([][]*protocol.Event, publishers)
	for p := range evs {
		for i := 0; i < each; i++ {
			evs[p] = append(evs[p], ev(key(p), int64(1000+i), 1, fmt.Sprint(p, "/", i), []string{"t", "x"}))
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, publishers*2)
	for p := 0; p < publishers; p++ {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for _, e := range evs[p] {
				r, err := s.Append(ctx, Record{Event: e})
				if err != nil {
					errs <- err
					return
				}
				st, err := s.Get(ctx, e.ID)
				if err != nil || st.Seq != r.Seq {
					errs <- fmt.Errorf("get %q right after its append: %v", e.Content, err)
					return
				}
				if _, found, err := s.Lookup(ctx, e.ID); !found || err != nil {
					errs <- fmt.Errorf("lookup %q right after its append: %v %v", e.Content, found, err)
					return
				}
				if got, err := s.Query(ctx, Filter{IDs: []string{e.ID}}); err != nil || len(got) != 1 {
					errs <- fmt.Errorf("ids query %q right after its append: %d %v", e.Content, len(got), err)
					return
				}
			}
		}()
		// A reader of the next publisher's ids, stored or not yet.
		go func() {
			defer wg.Done()
			for _, e := range evs[(p+1)%publishers] {
				if st, err := s.Get(ctx, e.ID); err == nil && !strings.Contains(string(st.Body), e.Sig) {
					errs <- fmt.Errorf("get %q gave another event", e.Content)
					return
				} else if err != nil && !errors.Is(err, ErrNotFound) {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if n := countRows(t, s, "events"); n != publishers*each || s.ids.len() != n {
		t.Fatalf("%d events stored, %d in the id index, want %d", n, s.ids.len(), publishers*each)
	}
}

// TestOlderBinaryRoundTrip opens the log as a binary from before the id
// and author indexes would (it creates events_id, events_author and
// events_author_kind again and appends with ON CONFLICT(id) DO NOTHING),
// then with this one: Open must say it drops them, drop them, find the
// older binary's events by id, as duplicates and by author, and leave ids
// unique so that the older binary can build its index again.
func TestOlderBinaryRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log.db")
	s, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	mine := ev(key(1), 100, 1, "new binary")
	appendAll(t, s, mine)
	s.Close()
	theirs := ev(key(2), 101, 1, "old binary", []string{"t", "x"})
	older := func() {
		t.Helper()
		db, err := sql.Open("sqlite", dsn(path, false))
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		// What the older binary's Open and Append run.
		if _, err := db.Exec(`CREATE UNIQUE INDEX IF NOT EXISTS events_id ON events(id);
			CREATE INDEX IF NOT EXISTS events_author ON events(agent_id, created_at, id);
			CREATE INDEX IF NOT EXISTS events_author_kind ON events(agent_id, kind, created_at, id)`); err != nil {
			t.Fatalf("older binary rebuilding its indexes: %v", err)
		}
		for _, e := range []*protocol.Event{mine, theirs} {
			id, _ := hex.DecodeString(e.ID)
			agent, _ := hex.DecodeString(e.AgentID)
			if _, err := db.Exec(`INSERT INTO events(id, agent_id, created_at, kind, body, raw, raw_type, received_at)
				VALUES(?,?,?,?,?,NULL,NULL,0) ON CONFLICT(id) DO NOTHING`, id, agent, e.CreatedAt, e.Kind, protocol.AppendJSON(nil, e)); err != nil {
				t.Fatal(err)
			}
		}
	}
	older()
	var notices []string
	if s, err = OpenWithRepair(path, nil, func(n string) { notices = append(notices, n) }); err != nil {
		t.Fatal(err)
	}
	defer func() { s.Close() }()
	if len(notices) != 1 || !strings.Contains(notices[0], "dropping the indexes events_id, events_author, events_author_kind") {
		t.Fatalf("notices %q", notices)
	}
	if n := countRows(t, s, "sqlite_master WHERE name IN ('events_id', 'events_author', 'events_author_kind')"); n != 0 {
		t.Fatalf("%d of the older binary's indexes not dropped", n)
	}
	checkByID(t, s, "after the older binary", map[string]int64{mine.ID: 1, theirs.ID: 2}, nil)
	if got, err := s.Query(context.Background(), Filter{Authors: []string{theirs.AgentID, mine.AgentID}}); err != nil || len(got) != 2 ||
		!strings.Contains(string(got[0]), theirs.ID) || !strings.Contains(string(got[1]), mine.ID) {
		t.Fatalf("by author after the older binary: %q %v", got, err)
	}
	appendAll(t, s, ev(key(3), 102, 1, "new again"))
	s.Close()
	older() // builds events_id over the ids again: they are unique
	if s, err = Open(path, nil); err != nil {
		t.Fatal(err)
	}
	if n := countRows(t, s, "events"); n != 3 || s.ids.len() != 3 {
		t.Fatalf("%d events, %d ids, want 3", n, s.ids.len())
	}
}

// TestIDIndexMemory reports the id index's bytes per event at a million
// ids put as the writer puts them (go test -run IDIndexMemory -v); it
// fails past 16 bytes an id: the runs hold 12, the tail at most 2^16.
func TestIDIndexMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("fills a million ids")
	}
	const n = 1_000_000
	per := idIndexBytes(n)
	t.Logf("id index at %d ids: %.1f bytes an id, %.1f MiB", n, per, per*n/(1<<20))
	if per > 16 {
		t.Errorf("%.1f bytes an id", per)
	}
}

// idIndexBytes fills an id index with n random ids, settling after every
// 32 as the writer does after a transaction, and returns the heap it
// takes per id.
func idIndexBytes(n int) float64 {
	ids := make([]byte, 32*n)
	rand.Read(ids)
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	x := newIDIndex()
	for i := 0; i < n; i++ {
		x.put(ids[32*i:32*i+32], int64(i+1))
		if i%32 == 31 {
			x.settle(false)
		}
	}
	x.wait()
	runtime.GC()
	runtime.ReadMemStats(&m1)
	runtime.KeepAlive(x)
	runtime.KeepAlive(ids)
	return float64(int64(m1.HeapAlloc)-int64(m0.HeapAlloc)) / float64(n)
}

// authorIndexBytes fills an author index with n events of authors
// authors (each author's in order, 50 a second) and returns the heap it
// takes per event.
func authorIndexBytes(n, authors int) float64 {
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	x := newAuthorIndex()
	for i := 0; i < n; i++ {
		var agent [32]byte
		agent[0], agent[1] = byte(i%authors), byte(i%authors>>8)
		x.addLocked(agent, int64(i/50), 1, int64(i+1), uint32(i*2654435761))
	}
	runtime.GC()
	runtime.ReadMemStats(&m1)
	runtime.KeepAlive(x)
	return float64(int64(m1.HeapAlloc)-int64(m0.HeapAlloc)) / float64(n)
}

// BenchmarkIndexBytes reports the bytes per event of the id index and of
// the author index (2,000 authors) at ANP2_BENCH_EVENTS events (default
// 100,000; the figures in docs/benchmarks.md are at 1,000,000).
func BenchmarkIndexBytes(b *testing.B) {
	n := benchEvents(b, 100_000)
	for range b.N {
		b.ReportMetric(idIndexBytes(n), "id-B/event")
		b.ReportMetric(authorIndexBytes(n, 2000), "author-B/event")
	}
}

// benchEvents is ANP2_BENCH_EVENTS, or def.
func benchEvents(b *testing.B, def int) int {
	if v := os.Getenv("ANP2_BENCH_EVENTS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			b.Fatalf("ANP2_BENCH_EVENTS=%q", v)
		}
		return n
	}
	return def
}

// buildBenchLog writes a log of n events with random ids (not signed: the
// store checks neither) by 2,000 agents, in a bulk load, and returns its
// path.
func buildBenchLog(b *testing.B, n int) string {
	ctx := context.Background()
	path := filepath.Join(b.TempDir(), "log.db")
	s, err := Open(path, nil)
	if err != nil {
		b.Fatal(err)
	}
	if err := s.BeginBulk(ctx); err != nil {
		b.Fatal(err)
	}
	agents := make([]string, 2000)
	for i := range agents {
		agents[i] = protocol.AgentIDOf(key(i))
	}
	for i := 0; i < n; i += 8192 {
		recs := make([]Record, 0, 8192)
		for j := i; j < min(i+8192, n); j++ {
			var id [32]byte
			rand.Read(id[:])
			e := &protocol.Event{ID: hex.EncodeToString(id[:]), AgentID: agents[j%len(agents)], CreatedAt: int64(1e9 + j/50), Kind: 1,
				Content: fmt.Sprint("event ", j), Tags: [][]string{{"t", fmt.Sprint("t", j%50)}}, Sig: strings.Repeat("0", 128)}
			recs = append(recs, Record{Event: e})
		}
		if _, err := s.LoadBatch(ctx, recs); err != nil {
			b.Fatal(err)
		}
	}
	if err := s.EndBulk(nil); err != nil {
		b.Fatal(err)
	}
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	return path
}

// BenchmarkOpenLoadsIDs times Open of a log of ANP2_BENCH_EVENTS events
// (default 100,000): "file" with the index file Close left (Open reads
// only the log after it), "rebuild" without it (Open reads the whole
// events table). Each Open is followed by an untimed Close, which writes
// the file again in "rebuild".
func BenchmarkOpenLoadsIDs(b *testing.B) {
	n := benchEvents(b, 100_000)
	path := buildBenchLog(b, n)
	for _, mode := range []string{"file", "rebuild"} {
		b.Run(mode, func(b *testing.B) {
			var rows int64
			for range b.N {
				b.StopTimer()
				if mode == "rebuild" {
					os.Remove(IndexPath(path))
				}
				b.StartTimer()
				s, err := Open(path, nil)
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				if s.ids.len() != n || s.authors.len() != n {
					b.Fatalf("loaded %d ids, %d author entries, want %d", s.ids.len(), s.authors.len(), n)
				}
				rows = s.IndexLoad().Rows
				s.Close()
				b.StartTimer()
			}
			b.ReportMetric(float64(rows), "rows-read")
		})
	}
	// The items of every event, which a start fills the relay's
	// reconciliation index with (relay/state.go): from the items file
	// ("items"), and from the table as before it ("items-table").
	s, err := Open(path, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	for _, from := range []string{"items", "items-table"} {
		b.Run(from, func(b *testing.B) {
			for range b.N {
				got := 0
				count := func(int64, []byte) { got++ }
				var err error
				if from == "items" {
					err = s.Items(context.Background(), nil, nil, math.MinInt64, count)
				} else {
					err = sqlq.ScanItems(context.Background(), reader{s.read}, `SELECT created_at, id FROM events`, nil, count)
				}
				if err != nil || got != n {
					b.Fatalf("%d items: %v", got, err)
				}
			}
		})
	}
}

// TestFailedCommitThatStoredCatchesUp stands in for a commit that reported
// an error after its transaction became durable: rows the writer did not
// record are in the log past its next seq. The next transaction must take
// their ids as stored and number new events after them.
func TestFailedCommitThatStoredCatchesUp(t *testing.T) {
	ctx := context.Background()
	s := open(t)
	first := ev(key(1), 100, 1, "first")
	appendAll(t, s, first)
	ghost := ev(key(1), 101, 1, "stored by a commit that failed")
	if err := s.control(ctx, func() error {
		id, _ := hex.DecodeString(ghost.ID)
		agent, _ := hex.DecodeString(ghost.AgentID)
		_, err := s.write.Exec(`INSERT INTO events(seq, id, agent_id, created_at, kind, body, received_at) VALUES(?,?,?,?,?,?,0)`,
			s.nextSeq, id, agent, ghost.CreatedAt, ghost.Kind, protocol.AppendJSON(nil, ghost))
		s.unsure = true
		return err
	}); err != nil {
		t.Fatal(err)
	}
	next := ev(key(1), 102, 1, "next")
	res, err := s.AppendBatch(ctx, []Record{{Event: ghost}, {Event: next}})
	if err != nil || !res[0].Duplicate || res[0].Seq != 2 || res[1].Duplicate || res[1].Seq != 3 {
		t.Fatalf("after the failed commit: %+v %v", res, err)
	}
	checkByID(t, s, "caught up", map[string]int64{first.ID: 1, ghost.ID: 2, next.ID: 3}, nil)
}

// TestIDsFilterReadsBySeq requires an ids filter, alone or with others,
// to read the events by seq (the log has no index on ids) rather than
// scan.
func TestIDsFilterReadsBySeq(t *testing.T) {
	s := open(t)
	var evs []*protocol.Event
	for i := 0; i < 300; i++ {
		evs = append(evs, ev(key(i%7), int64(100+i), int64(i%3), "x", []string{"t", fmt.Sprint("topic", i%40)}))
	}
	appendAll(t, s, evs...)
	if _, err := s.write.Exec("ANALYZE"); err != nil {
		t.Fatal(err)
	}
	some := []string{evs[3].ID, evs[150].ID, evs[299].ID}
	for name, f := range map[string]Filter{
		"ids":         {IDs: some},
		"ids+kinds":   {IDs: some, Kinds: []int64{1}},
		"ids+authors": {IDs: some, Authors: []string{evs[3].AgentID}},
		"ids+since":   {IDs: some, Since: ptr(int64(120))},
	} {
		for _, refs := range []bool{false, true} {
			plan, err := s.explain(f, refs)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(plan, "SEARCH e USING INTEGER PRIMARY KEY") {
				t.Errorf("%s (refs %v) does not read by seq:\n%s", name, refs, plan)
			}
		}
	}
}

func ptr[T any](v T) *T { return &v }

// BenchmarkIDIndexLookup times a lookup of a stored id (half the time)
// or an unstored one in an id index of ANP2_BENCH_EVENTS ids (default
// 100,000), put as the writer puts them: "runs" is the index, "map" the
// map of 8-byte keys to seqs it replaced (about 38 bytes an id).
func BenchmarkIDIndexLookup(b *testing.B) {
	n := benchEvents(b, 100_000)
	ids := make([]byte, 32*n)
	rand.Read(ids)
	b.Run("runs", func(b *testing.B) {
		x := newIDIndex()
		for i := 0; i < n; i++ {
			x.put(ids[32*i:32*i+32], int64(i+1))
			if i%32 == 31 {
				x.settle(false)
			}
		}
		x.wait()
		var probe [32]byte
		var dst []int64
		b.ResetTimer()
		for i := range b.N {
			if i%2 == 0 {
				dst = x.candidates(dst[:0], ids[32*(i%n):])
			} else {
				binary.LittleEndian.PutUint64(probe[:], uint64(i)*0x9e3779b97f4a7c15)
				dst = x.candidates(dst[:0], probe[:])
			}
		}
		b.ReportMetric(float64(len(x.runs)), "runs")
	})
	b.Run("map", func(b *testing.B) {
		m := make(map[uint64]int64, n)
		for i := 0; i < n; i++ {
			m[idKey(ids[32*i:])] = int64(i + 1)
		}
		var probe [32]byte
		var mu sync.RWMutex
		var dst []int64
		b.ResetTimer()
		for i := range b.N {
			k := idKey(ids[32*(i%n):])
			if i%2 == 1 {
				binary.LittleEndian.PutUint64(probe[:], uint64(i)*0x9e3779b97f4a7c15)
				k = idKey(probe[:])
			}
			mu.RLock()
			if seq, ok := m[k]; ok {
				dst = append(dst[:0], seq)
			}
			mu.RUnlock()
		}
	})
}
