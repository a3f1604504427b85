package sqlite

import (
	"cmp"
	"context"
	"encoding/hex"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/eventlog"
	"github.com/anp2net/relay/relay/eventlog/sqlq"
)

// TestAuthorListKeepsOrder inserts entries in random, ascending and
// descending order (chunks split many times over) and requires the list
// and every walk from a bound to be a sorted slice's.
func TestAuthorListKeepsOrder(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for name, at := range map[string]func(i int) int64{
		"random":     func(int) int64 { return r.Int64N(400) },
		"ascending":  func(i int) int64 { return int64(i / 3) },
		"descending": func(i int) int64 { return int64(10000 - i/3) },
	} {
		var l authorList
		var want []authorEntry
		for i := 0; i < 5*authorChunk; i++ {
			e := entryOf(at(i), r.Int64N(3), int64(i+1), uint32(r.Uint64N(8)))
			l.insert(e)
			want = append(want, e)
		}
		slices.SortFunc(want, compareEntries)
		var got []authorEntry
		for _, c := range l.chunks {
			if len(c) == 0 || len(c) > authorChunk {
				t.Fatalf("%s: a chunk of %d", name, len(c))
			}
			got = append(got, c...)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("%s: list out of order", name)
		}
		for _, until := range []int64{-1, 0, 5, 199, 400, 3000, 9999, 20000} {
			var walk []authorEntry
			for c := l.cursorAt(until); c.valid(); c.next() {
				walk = append(walk, c.entry())
			}
			var ref []authorEntry
			for i := len(want) - 1; i >= 0; i-- {
				if want[i].at() <= until {
					ref = append(ref, want[i])
				}
			}
			if !slices.Equal(walk, ref) {
				t.Fatalf("%s: walk from %d gives %d entries, want %d", name, until, len(walk), len(ref))
			}
		}
	}
}

// TestAuthorFiltersMatchScan stores events of a few authors out of order,
// many sharing a second, some revoked, and requires every author filter
// (with kinds, bounds, limits, revoked left out or kept) and History and
// Items to answer as a scan of the events in memory does, before and after
// the log is opened again (the index then comes from the log).
func TestAuthorFiltersMatchScan(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "log.db")
	s, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { s.Close() }()
	r := rand.New(rand.NewPCG(3, 4))
	var evs []*protocol.Event
	revoked := map[string]bool{}
	for i := 0; i < 1500; i++ {
		a := r.IntN(4)
		e := ev(key(a), 1000+r.Int64N(120), []int64{0, 1, 1, 1, 7}[r.IntN(5)], fmt.Sprint("event ", i))
		if i > 0 && r.IntN(12) == 0 {
			// A revoke of an earlier event, effective only over the
			// revoker's own.
			target := evs[r.IntN(len(evs))]
			e = ev(key(a), 1000+r.Int64N(120), protocol.KindRevoke, "", []string{"e", target.ID})
			if target.AgentID == e.AgentID {
				revoked[target.ID] = true
			}
		}
		evs = append(evs, e)
	}
	// Arrival order is not time order: blocks of 100 arrive newest first.
	for i := 0; i < len(evs); i += 100 {
		block := slices.Clone(evs[i:min(i+100, len(evs))])
		slices.SortFunc(block, func(a, b *protocol.Event) int { return cmp.Compare(b.CreatedAt, a.CreatedAt) })
		if _, err := s.AppendBatch(ctx, records(block)); err != nil {
			t.Fatal(err)
		}
	}
	check := func(stage string) {
		t.Helper()
		for i := 0; i < 300; i++ {
			f := eventlog.Filter{Limit: []int{1, 5, 40, 300, 0}[r.IntN(5)]}
			for a := 0; a < 5; a++ { // author 4 published nothing
				if r.IntN(2) == 0 {
					f.Authors = append(f.Authors, protocol.AgentIDOf(key(a)))
				}
			}
			if len(f.Authors) == 0 {
				f.Authors = []string{protocol.AgentIDOf(key(r.IntN(4)))}
			}
			if r.IntN(2) == 0 {
				f.Kinds = []int64{[]int64{0, 1, 7, 9}[r.IntN(4)]}
			}
			if r.IntN(2) == 0 {
				f.Since = ptr(1000 + r.Int64N(120))
			}
			if r.IntN(2) == 0 {
				f.Until = ptr(1000 + r.Int64N(120))
			}
			switch r.IntN(3) {
			case 0:
				f.IncludeRevoked = true
			case 1:
				f.Revoked = func(id string) bool { return revoked[id] }
			}
			got, err := s.Query(ctx, f)
			if err != nil {
				t.Fatal(err)
			}
			if want := scan(evs, f, revoked); !slices.Equal(ids(t, got), want) {
				t.Fatalf("%s: %+v:\n got %d %v\nwant %d %v", stage, f, len(got), ids(t, got), len(want), want)
			}
		}
		for a := 0; a < 5; a++ {
			agent := protocol.AgentIDOf(key(a))
			for _, kind := range []int64{0, 1, 9} {
				got, err := s.History(ctx, agent, kind)
				if err != nil {
					t.Fatal(err)
				}
				want := scan(evs, eventlog.Filter{Authors: []string{agent}, Kinds: []int64{kind}, IncludeRevoked: true, Limit: len(evs)}, nil)
				slices.Reverse(want)
				if !slices.Equal(ids(t, got), want) {
					t.Fatalf("%s: history of %d kind %d: %d events, want %d", stage, a, kind, len(got), len(want))
				}
			}
			since := 1000 + r.Int64N(120)
			var items []string
			if err := s.Items(ctx, []int64{1, 7}, []string{agent}, since, func(at int64, id []byte) {
				items = append(items, hex.EncodeToString(id))
			}); err != nil {
				t.Fatal(err)
			}
			want := scan(evs, eventlog.Filter{Authors: []string{agent}, Kinds: []int64{1, 7}, Since: &since, IncludeRevoked: true, Limit: len(evs)}, nil)
			slices.Sort(items)
			slices.Sort(want)
			if !slices.Equal(items, want) {
				t.Fatalf("%s: items of %d: %d, want %d", stage, a, len(items), len(want))
			}
		}
	}
	check("as written")
	s.Close()
	if s, err = Open(path, nil); err != nil {
		t.Fatal(err)
	}
	if s.authors.len() != len(evs) {
		t.Fatalf("author index holds %d events, want %d", s.authors.len(), len(evs))
	}
	check("opened again")
}

// scan answers f over evs by brute force, as the log must.
func scan(evs []*protocol.Event, f eventlog.Filter, revoked map[string]bool) []string {
	var match []*protocol.Event
	for _, e := range evs {
		if len(f.Authors) > 0 && !slices.Contains(f.Authors, e.AgentID) ||
			len(f.Kinds) > 0 && !slices.Contains(f.Kinds, e.Kind) ||
			f.Since != nil && e.CreatedAt < *f.Since || f.Until != nil && e.CreatedAt > *f.Until ||
			!f.IncludeRevoked && revoked[e.ID] {
			continue
		}
		match = append(match, e)
	}
	slices.SortFunc(match, func(a, b *protocol.Event) int {
		return cmp.Or(cmp.Compare(b.CreatedAt, a.CreatedAt), cmp.Compare(b.ID, a.ID))
	})
	limit := f.Limit
	if limit <= 0 {
		limit = 100
	}
	var out []string
	for _, e := range match[:min(limit, len(match))] {
		out = append(out, e.ID)
	}
	return out
}

func records(evs []*protocol.Event) []Record {
	out := make([]Record, len(evs))
	for i, e := range evs {
		out[i] = Record{Event: e}
	}
	return out
}

// TestAsOfReadsLatestIndex requires the "latest as of" probe of an as_of
// query, and History of an overwrite kind, to search events_latest rather
// than scan, and Open to build events_latest again when it was made for
// other overwrite kinds.
func TestAsOfReadsLatestIndex(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log.db")
	s, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	appendAll(t, s, ev(key(1), 100, 0, "profile"), ev(key(1), 101, 1, "post"))
	plan, err := s.explain(Filter{AsOf: ptr(int64(100)), Kinds: []int64{0}}, false)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(plan, "USING COVERING INDEX events_latest") || strings.Contains(plan, "SCAN n") {
		t.Errorf("as_of probe does not search events_latest:\n%s", plan)
	}
	var hist []string
	histQ, histArgs := sqlq.History(&dialect, []byte("x"), 0, false, nil)
	rows, err := s.read.Query(`EXPLAIN QUERY PLAN `+histQ, histArgs...)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id, parent, notused int
		var detail string
		rows.Scan(&id, &parent, &notused, &detail)
		hist = append(hist, detail)
	}
	rows.Close()
	if !strings.Contains(fmt.Sprint(hist), "events_latest") {
		t.Errorf("history of an overwrite kind does not search events_latest: %v", hist)
	}
	// A log whose events_latest was made for other kinds.
	if _, err := s.write.Exec(`DROP INDEX events_latest; CREATE INDEX events_latest ON events(agent_id, kind, created_at, id) WHERE kind IN (0)`); err != nil {
		t.Fatal(err)
	}
	s.Close()
	var notices []string
	if s, err = OpenWithRepair(path, nil, func(n string) { notices = append(notices, n) }); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var ddl string
	if err := s.read.QueryRow(`SELECT sql FROM sqlite_master WHERE name = 'events_latest'`).Scan(&ddl); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(ddl, "IN ("+overwriteKinds()+")") || len(notices) != 1 {
		t.Fatalf("events_latest after open: %s (notices %q)", ddl, notices)
	}
}

// TestAuthorIndexMemory reports the author index's bytes per event at a
// million events from 10,000 authors (go test -run AuthorIndexMemory -v);
// it fails past 32 bytes an event: an entry is 20 (the rest is each
// author's last chunk's spare room, a hundred events an author here).
func TestAuthorIndexMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("fills a million entries")
	}
	per := authorIndexBytes(1_000_000, 10_000)
	t.Logf("%.1f bytes an event", per)
	if per > 32 {
		t.Errorf("%.1f bytes an event", per)
	}
}

// TestAuthorCandidatesKeepTies requires candidates to carry past want
// every entry that ties the last one taken as far as the index can tell
// (entries of one second whose ids share their first 4 bytes): the log
// orders those by the whole id, which the index does not hold.
func TestAuthorCandidatesKeepTies(t *testing.T) {
	x := newAuthorIndex()
	a, b := [32]byte{1}, [32]byte{2}
	x.add([]newEntry{{agent: a, at: 10, seq: 1, id: 5}, {agent: b, at: 10, seq: 2, id: 5}, {agent: a, at: 10, seq: 3, id: 5},
		{agent: b, at: 9, seq: 4}, {agent: a, at: 11, seq: 5, kind: 1}, {agent: b, at: 9, seq: 6, kind: 1 << 40},
		{agent: a, at: 10, seq: 7, id: 9}})
	all := authorScope{since: -1 << 63, until: 1<<63 - 1}
	for _, c := range []struct {
		want  int
		scope authorScope
		seqs  []int64
		more  bool
	}{
		{1, all, []int64{5}, true},
		{2, all, []int64{5, 7}, true},
		{3, all, []int64{5, 7, 3, 2, 1}, true},
		{5, all, []int64{5, 7, 3, 2, 1}, true},
		{6, all, []int64{5, 7, 3, 2, 1, 6, 4}, false},
		{1, authorScope{kinds: []int64{0}, since: 10, until: 10}, []int64{7}, true},
		{2, authorScope{kinds: []int64{0}, since: 10, until: 10}, []int64{7, 3, 2, 1}, false},
		{9, authorScope{kinds: []int64{1 << 40}, since: 0, until: 100}, []int64{6}, false},
		{9, authorScope{kinds: []int64{1}, since: 0, until: 100}, []int64{5}, false},
	} {
		seqs, more := x.candidates([][32]byte{a, b, {3}}, c.scope, c.want)
		if !slices.Equal(seqs, c.seqs) || more != c.more {
			t.Errorf("want %d %+v: %v %v, want %v %v", c.want, c.scope, seqs, more, c.seqs, c.more)
		}
	}
}

// TestAuthorPageFallsBackOnOtherBodies stores an event whose body does
// not begin with its id (as no body this relay writes does, but a log
// from elsewhere might): an author filter must still answer it, through
// the statement.
func TestAuthorPageFallsBackOnOtherBodies(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "log.db")
	s, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	first, other := ev(key(1), 100, 1, "first"), ev(key(1), 101, 1, "other")
	appendAll(t, s, first)
	id, _ := hex.DecodeString(other.ID)
	agent, _ := hex.DecodeString(other.AgentID)
	body := fmt.Sprintf(`{"agent_id":%q,"id":%q,"created_at":101,"kind":1,"tags":[],"content":"other","sig":%q}`, other.AgentID, other.ID, other.Sig)
	if _, err := s.write.Exec(`INSERT INTO events(seq, id, agent_id, created_at, kind, body, received_at) VALUES(2,?,?,101,1,?,0)`, id, agent, body); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if s, err = Open(path, nil); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := s.Query(ctx, Filter{Authors: []string{first.AgentID}, Revoked: func(string) bool { return false }})
	if err != nil || len(got) != 2 || string(got[0]) != body {
		t.Fatalf("got %q %v", got, err)
	}
	if _, ok := bodyID(got[0]); ok {
		t.Fatal("bodyID read an id from a body that does not begin with one")
	}
}

// TestAuthorCandidatesOfOneSecond stores 2,000 events of one author that
// share a created_at (an author chooses its events' times): a query for
// 10 takes about 10 candidates, not the whole second, and answers the
// newest 10 by (created_at, id).
func TestAuthorCandidatesOfOneSecond(t *testing.T) {
	s := open(t)
	var evs []*protocol.Event
	for i := range 2000 {
		evs = append(evs, ev(key(1), 5000, 1, fmt.Sprint("same second ", i)))
	}
	appendAll(t, s, evs...)
	agent, _ := hex.DecodeString(evs[0].AgentID)
	seqs, _ := s.authors.candidates([][32]byte{[32]byte(agent)}, authorScope{since: math.MinInt64, until: math.MaxInt64}, 10)
	if len(seqs) > 12 {
		t.Fatalf("%d candidates for 10", len(seqs))
	}
	got, err := s.Query(context.Background(), Filter{Authors: []string{evs[0].AgentID}, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, e := range evs {
		want = append(want, e.ID)
	}
	slices.Sort(want)
	slices.Reverse(want)
	if gotIDs := ids(t, got); !slices.Equal(gotIDs, want[:10]) {
		t.Fatalf("newest 10 of one second: %v, want %v", gotIDs, want[:10])
	}
}
