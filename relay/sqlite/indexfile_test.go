package sqlite

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/eventlog"
)

// indexDump lists what the id and author indexes hold, in a canonical
// order: every (key, seq) of the ids and every author's entries with
// their kinds.
func indexDump(s *Store) string {
	var b strings.Builder
	x := s.ids
	type pair struct {
		k uint64
		s uint32
	}
	var ps []pair
	for _, r := range x.runs {
		for i := range r.keys {
			ps = append(ps, pair{r.keys[i], r.seqs[i]})
		}
	}
	for k, seq := range x.tail {
		ps = append(ps, pair{k, seq})
		for _, seq := range x.more[k] {
			ps = append(ps, pair{k, seq})
		}
	}
	slices.SortFunc(ps, func(a, b pair) int {
		if a.k != b.k {
			return map[bool]int{true: -1, false: 1}[a.k < b.k]
		}
		return int(a.s) - int(b.s)
	})
	for _, p := range ps {
		fmt.Fprintf(&b, "id %x %d\n", p.k, p.s)
	}
	a := s.authors
	var agents [][32]byte
	for agent := range a.m {
		agents = append(agents, agent)
	}
	slices.SortFunc(agents, func(x, y [32]byte) int { return bytes.Compare(x[:], y[:]) })
	for _, agent := range agents {
		fmt.Fprintf(&b, "author %x:", agent[:4])
		for _, c := range a.m[agent].chunks {
			for _, e := range c {
				fmt.Fprintf(&b, " (%d %x %d %d)", e.at(), e.id, e.seq, a.kindOf(e))
			}
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// indexLog fills a new log at dir/log.db with n events by 7 authors, out
// of created_at order, some sharing their id's first 8 bytes, one of a
// kind past 32 bits, and closes it (writing its index file). It returns
// the path and the ids stored.
func indexLog(t *testing.T, dir string, n int) (string, []string) {
	t.Helper()
	path := filepath.Join(dir, "log.db")
	s, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	var evs []*protocol.Event
	same := sharedPrefix(3)
	for i := 0; i < n; i++ {
		e := ev(key(i%7), int64(1000+(i*37)%101), int64(i%3), fmt.Sprint("event ", i), []string{"t", fmt.Sprint("t", i%5)})
		if i < len(same) {
			e = withID(e, same[i])
		}
		evs = append(evs, e)
	}
	evs = append(evs, ev(key(1), 1050, 1<<40, "a wide kind"))
	appendAll(t, s, evs...)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, e := range evs {
		ids = append(ids, e.ID)
	}
	return path, ids
}

// reopen opens path and requires how it filled its indexes to match
// want (From and Rows; Why empty or not as wantWhy), and returns it.
func reopen(t *testing.T, path string, from, rows int64, refused bool) *Store {
	t.Helper()
	s, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	got := s.IndexLoad()
	if got.From != from || got.Rows != rows || (got.Why != "") != refused {
		t.Fatalf("index load %+v, want from %d rows %d refused %v", got, from, rows, refused)
	}
	return s
}

// rebuilt returns indexDump of the log at path with its indexes read from
// the whole log (the index file moved aside and put back).
func rebuilt(t *testing.T, path string) string {
	t.Helper()
	idx := IndexPath(path)
	b, err := os.ReadFile(idx)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	had := err == nil
	os.Remove(idx)
	s, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.IndexLoad().From != 0 {
		t.Fatalf("rebuild used a file: %+v", s.IndexLoad())
	}
	d := indexDump(s)
	s.savedSeq.Store(s.nextSeq - 1)
	s.Close()
	if had {
		if err := os.WriteFile(idx, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

// copyFiles copies the log at src (its file and WAL) and, with idx, its
// index file to dst, as a kill -9 or a backup would leave them.
func copyFiles(t *testing.T, src, dst string, idx bool) {
	t.Helper()
	sfx := []string{"", "-wal"}
	if idx {
		sfx = append(sfx, ".idx")
	}
	for _, x := range sfx {
		b, err := os.ReadFile(src + x)
		if os.IsNotExist(err) && x == "-wal" {
			os.Remove(dst + x)
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst+x, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	os.Remove(dst + "-shm")
}

// TestIndexFileReadsOnlyTail saves the index file at one position, adds
// events after it, and requires the next Open to read only those from the
// log, with the same indexes as a rebuild from the whole log, and every
// read by id and author as before.
func TestIndexFileReadsOnlyTail(t *testing.T) {
	dir := t.TempDir()
	path, ids := indexLog(t, dir, 300)
	n := int64(len(ids))
	s := reopen(t, path, n, 0, false)
	d := indexDump(s)
	s.Close()
	if d != rebuilt(t, path) {
		t.Fatalf("indexes from the file differ from a rebuild:\n%s", d)
	}
	s = reopen(t, path, n, 0, false)
	saved, err := os.ReadFile(IndexPath(path))
	if err != nil {
		t.Fatal(err)
	}
	more := []*protocol.Event{ev(key(2), 999, 1, "older than all"), ev(key(8), 2000, 7, "a new author"), ev(key(3), 1001, 1<<35, "wide")}
	appendAll(t, s, more...)
	s.Close()
	// The file as a crash after the first save would leave it.
	if err := os.WriteFile(IndexPath(path), saved, 0o644); err != nil {
		t.Fatal(err)
	}
	s = reopen(t, path, n, int64(len(more)), false)
	d = indexDump(s)
	s.savedSeq.Store(s.nextSeq - 1) // keep the file at n
	s.Close()
	want := rebuilt(t, path)
	s = reopen(t, path, n, int64(len(more)), false)
	if d != want {
		t.Fatalf("indexes from the file and the tail differ from a rebuild:\n%s\nwant\n%s", d, want)
	}
	byID := map[string]int64{} // a page's worth: checkByID asks for them at once
	for i, id := range ids[:80] {
		byID[id] = int64(i + 1)
	}
	for i, e := range more {
		byID[e.ID] = n + int64(i) + 1
	}
	checkByID(t, s, "file and tail", byID, sharedPrefix(2))
	got, err := s.Query(context.Background(), Filter{Authors: []string{more[1].AgentID}})
	if err != nil || len(got) != 1 {
		t.Fatalf("author query of the new author: %d %v", len(got), err)
	}
	got, err = s.Query(context.Background(), Filter{Authors: []string{more[2].AgentID}, Kinds: []int64{1 << 35}})
	if err != nil || len(got) != 1 {
		t.Fatalf("author query of a wide kind: %d %v", len(got), err)
	}
}

// rewriteIndex rewrites the index file at path through change and puts a
// correct checksum back.
func rewriteIndex(t *testing.T, path string, change func([]byte) []byte) {
	t.Helper()
	b, err := os.ReadFile(IndexPath(path))
	if err != nil {
		t.Fatal(err)
	}
	b = change(b[:len(b)-sha256.Size])
	sum := sha256.Sum256(b)
	if err := os.WriteFile(IndexPath(path), append(b, sum[:]...), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestIndexFileRefused damages, outdates or replaces the index file in
// every way the file's checks look for, and requires Open to read the
// whole log instead, with the indexes a rebuild gives.
func TestIndexFileRefused(t *testing.T) {
	other, _ := indexLog(t, t.TempDir(), 120)
	cases := map[string]func(t *testing.T, path string){
		"missing": func(t *testing.T, path string) { os.Remove(IndexPath(path)) },
		"damaged": func(t *testing.T, path string) {
			b, _ := os.ReadFile(IndexPath(path))
			b[len(b)/2] ^= 1
			os.WriteFile(IndexPath(path), b, 0o644)
		},
		"truncated": func(t *testing.T, path string) {
			b, _ := os.ReadFile(IndexPath(path))
			os.WriteFile(IndexPath(path), b[:len(b)*2/3], 0o644)
		},
		"empty": func(t *testing.T, path string) { os.WriteFile(IndexPath(path), nil, 0o644) },
		"other version": func(t *testing.T, path string) {
			rewriteIndex(t, path, func(b []byte) []byte { binary.LittleEndian.PutUint32(b[8:], indexVersion+1); return b })
		},
		"other log": func(t *testing.T, path string) {
			b, _ := os.ReadFile(IndexPath(other))
			os.WriteFile(IndexPath(path), b, 0o644)
		},
		"ahead of the log": func(t *testing.T, path string) {
			rewriteIndex(t, path, func(b []byte) []byte {
				binary.LittleEndian.PutUint64(b[12:], binary.LittleEndian.Uint64(b[12:])+5)
				return b
			})
		},
		"withheld since": func(t *testing.T, path string) {
			// A redaction by a binary that knows no index file.
			rewriteIndex(t, path, func(b []byte) []byte { binary.LittleEndian.PutUint64(b[52:], 1); return b })
		},
		"log rewritten": func(t *testing.T, path string) {
			// A row lost and those after it numbered down, as a repair
			// that could not read it leaves the log.
			s, err := Open(path, nil)
			if err != nil {
				t.Fatal(err)
			}
			s.savedSeq.Store(s.nextSeq - 1) // Close must not save
			saved, _ := os.ReadFile(IndexPath(path))
			if _, err := s.write.Exec(`DELETE FROM events WHERE seq = 40; UPDATE events SET seq = seq - 1 WHERE seq > 40`); err != nil {
				t.Fatal(err)
			}
			s.Close()
			os.WriteFile(IndexPath(path), saved, 0o644)
		},
		"same end, other order": func(t *testing.T, path string) {
			s, err := Open(path, nil)
			if err != nil {
				t.Fatal(err)
			}
			s.savedSeq.Store(s.nextSeq - 1)
			saved, _ := os.ReadFile(IndexPath(path))
			if _, err := s.write.Exec(`UPDATE events SET seq = -seq WHERE seq IN (10, 11); UPDATE events SET seq = 21 + seq WHERE seq IN (-10, -11)`); err != nil {
				t.Fatal(err)
			}
			s.Close()
			os.WriteFile(IndexPath(path), saved, 0o644)
		},
	}
	for name, spoil := range cases {
		t.Run(name, func(t *testing.T) {
			path, ids := indexLog(t, t.TempDir(), 40)
			spoil(t, path)
			var n int64
			s, err := Open(path, nil)
			if err != nil {
				t.Fatal(err)
			}
			n = int64(s.nextSeq - 1)
			got := s.IndexLoad()
			s.savedSeq.Store(s.nextSeq - 1) // keep the spoiled file for rebuilt
			d := indexDump(s)
			s.Close()
			if got.From != 0 || got.Rows != n || got.Why == "" {
				t.Fatalf("index load %+v, want the whole log (%d events) and why", got, n)
			}
			t.Logf("refused: %s", got.Why)
			if want := rebuilt(t, path); d != want {
				t.Fatalf("indexes differ from a rebuild:\n%s\nwant\n%s", d, want)
			}
			if name == "missing" || name == "damaged" || name == "withheld since" {
				s = reopen(t, path, 0, n, true) // the file put back by rebuilt
				s.Close()
				os.Remove(IndexPath(path))
				s = reopen(t, path, 0, n, true)
				s.Close() // saves a good one
				s = reopen(t, path, n, 0, false)
				if name != "withheld since" {
					byID := map[string]int64{}
					for i, id := range ids {
						byID[id] = int64(i + 1)
					}
					checkByID(t, s, "resaved", byID, nil)
				}
			}
		})
	}
}

// TestIndexFileSavedWhileServing lowers the save interval, appends, and
// copies the log and its index file while the store is open (what a
// kill -9 leaves): the copy opens from the file saved meanwhile and reads
// only the events after it.
func TestIndexFileSavedWhileServing(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "log.db")
	s, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.saveMin.Store(20)
	for i := 0; i < 10; i++ {
		var evs []*protocol.Event
		for j := 0; j < 7; j++ {
			evs = append(evs, ev(key(j), int64(100+i), 1, fmt.Sprint(i, j)))
		}
		appendAll(t, s, evs...)
	}
	s.saveWG.Wait()
	saved := s.savedSeq.Load()
	if saved < 20 || saved > 70 {
		t.Fatalf("saved at %d", saved)
	}
	// Another save may start with the next commit; none is due now.
	crash := filepath.Join(t.TempDir(), "log.db")
	copyFiles(t, path, crash, true)
	c := reopen(t, crash, saved, 70-saved, false)
	if d := indexDump(c); d != indexDump(s) {
		t.Fatalf("indexes of the copy differ from the store's:\n%s", d)
	}
	// Torn: a save cut short leaves only its temporary file; one that
	// wrote part of the file itself is refused.
	c.Close()
	b, _ := os.ReadFile(IndexPath(crash))
	os.WriteFile(IndexPath(crash), b[:len(b)-1], 0o644)
	os.WriteFile(IndexPath(crash)+".tmp-123", b[:len(b)/2], 0o644)
	reopen(t, crash, 0, 70, true)
	if tmps, _ := filepath.Glob(IndexPath(crash) + ".tmp-*"); len(tmps) != 0 {
		t.Fatalf("left over: %v", tmps)
	}
}

// TestRedactDropsIndexFile requires a redaction to remove the index file
// (it would keep the event's author entry) and the next Close to save one
// without the entry, which the next Open uses.
func TestRedactDropsIndexFile(t *testing.T) {
	path, ids := indexLog(t, t.TempDir(), 30)
	s, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	victim := ids[4]
	author, err := s.Author(context.Background(), victim)
	if err != nil {
		t.Fatal(err)
	}
	tomb := eventlog.Tombstone(victim, eventlog.Withholding{Reason: "test", Redaction: ids[5], CreatedAt: 1000})
	if err := s.Redact(context.Background(), victim, tomb); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(IndexPath(path)); !os.IsNotExist(err) {
		t.Fatalf("index file after redact: %v", err)
	}
	before := indexDump(s)
	s.Close()
	s = reopen(t, path, int64(len(ids)), 0, false)
	if d := indexDump(s); d != before {
		t.Fatalf("reopened indexes differ:\n%s\nwant\n%s", d, before)
	}
	got, err := s.Query(context.Background(), Filter{Authors: []string{author}, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range logtestIDs(t, got) {
		if id == victim {
			t.Fatal("the withheld event is still an author's")
		}
	}
}

func logtestIDs(t *testing.T, bodies [][]byte) []string { return ids(t, bodies) }

// FuzzDecodeIndex feeds the index file parser arbitrary bytes: it must
// not panic, and whatever it accepts must encode back to the same bytes
// and install.
func FuzzDecodeIndex(f *testing.F) {
	snap := &indexSnap{seq: 9, withheld: 1,
		runs:    []idRun{{keys: []uint64{1, 1, 7}, seqs: []uint32{2, 5, 1}}, {keys: []uint64{3}, seqs: []uint32{9}}},
		authors: []authorSnap{{agent: [32]byte{1}, chunks: [][]authorEntry{{entryOf(5, 1, 1, 7), entryOf(5, 1<<40, 2, 7)}}}},
		wide:    map[uint32]int64{2: 1 << 40}}
	var good bytes.Buffer
	if err := snap.encode(&good); err != nil {
		f.Fatal(err)
	}
	f.Add(good.Bytes())
	f.Add(good.Bytes()[:40])
	f.Add([]byte(indexMagic))
	var empty bytes.Buffer
	(&indexSnap{wide: map[uint32]int64{}}).encode(&empty)
	f.Add(empty.Bytes())
	f.Fuzz(func(t *testing.T, b []byte) {
		snap, err := decodeIndex(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			return
		}
		var again bytes.Buffer
		if err := snap.encode(&again); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(again.Bytes(), b) {
			t.Fatalf("accepted %x, encodes as %x", b, again.Bytes())
		}
		snap.install()
	})
}

// TestIDIndexRunsMatchMap puts more ids than several tails hold (some
// sharing their key), settling between batches as the writer does,
// forgets a batch that did not commit, and requires every lookup to give
// what a map of keys to seqs gives, before and after a round trip through
// the index file's encoding.
func TestIDIndexRunsMatchMap(t *testing.T) {
	r := mrand.New(mrand.NewPCG(3, 4))
	x := newIDIndex()
	want := map[uint64][]int64{}
	var keys []uint64
	seq := int64(0)
	for batch := 0; seq < 3*idTailMax+1000; batch++ {
		var added [][32]byte
		first := seq + 1
		for range 1 + r.IntN(700) {
			var id [32]byte
			k := r.Uint64()
			if len(keys) > 0 && r.IntN(50) == 0 {
				k = keys[r.IntN(len(keys))] // a shared key
			}
			binary.LittleEndian.PutUint64(id[:], k)
			seq++
			x.put(id[:], seq)
			added = append(added, id)
		}
		if batch%17 == 5 {
			x.forget(added, first) // the transaction failed: its seqs go again
			seq = first - 1
			continue
		}
		for i, id := range added {
			k := idKey(id[:])
			if len(want[k]) == 0 {
				keys = append(keys, k)
			}
			want[k] = append(want[k], first+int64(i))
		}
		x.settle(false)
	}
	if len(x.runs) == 0 || x.tailN == 0 {
		t.Fatalf("%d runs, %d ids in the tail", len(x.runs), x.tailN)
	}
	check := func(stage string, x *idIndex) {
		t.Helper()
		n := 0
		for _, k := range keys {
			var id [32]byte
			binary.LittleEndian.PutUint64(id[:], k)
			if got := x.candidates(nil, id[:]); !slices.Equal(got, want[k]) {
				t.Fatalf("%s: key %x: %v, want %v", stage, k, got, want[k])
			}
			n += len(want[k])
		}
		var id [32]byte
		binary.LittleEndian.PutUint64(id[:], r.Uint64())
		if got := x.candidates(nil, id[:]); len(got) != 0 || x.len() != n {
			t.Fatalf("%s: an absent key gives %v; %d ids, want %d", stage, got, x.len(), n)
		}
	}
	check("live", x)
	s := &Store{ids: x, authors: newAuthorIndex(), nextSeq: seq + 1}
	var b bytes.Buffer
	if err := s.snapshot().encode(&b); err != nil {
		t.Fatal(err)
	}
	snap, err := decodeIndex(bytes.NewReader(b.Bytes()), int64(b.Len()))
	if err != nil {
		t.Fatal(err)
	}
	y, _ := snap.install()
	check("from the file", y)
	x.settle(true)
	x.wait()
	if len(x.runs) < 2 || mergeDue(x.runs) >= 0 {
		t.Fatalf("%d runs, a pair due for merging at %d", len(x.runs), mergeDue(x.runs))
	}
	check("settled", x)
}

// TestSnapshotUnchangedByLaterChanges takes a snapshot, then changes
// the indexes every way the writer does (appends, inserts out of order
// that split chunks, removals, ids past the tail): the snapshot must
// encode as it did when it was taken.
func TestSnapshotUnchangedByLaterChanges(t *testing.T) {
	r := mrand.New(mrand.NewPCG(5, 6))
	s := &Store{ids: newIDIndex(), authors: newAuthorIndex()}
	seq := int64(0)
	add := func(n int) {
		for range n {
			seq++
			var id [32]byte
			binary.LittleEndian.PutUint64(id[:], r.Uint64())
			s.ids.put(id[:], seq)
			s.authors.addLocked([32]byte{byte(r.IntN(3))}, r.Int64N(1000), r.Int64N(3), seq, r.Uint32())
		}
		s.ids.settle(false)
		s.nextSeq = seq + 1
	}
	add(idTailMax + 3*authorChunk)
	snap := s.snapshot()
	var before bytes.Buffer
	snap.encode(&before)
	add(idTailMax)
	for i := int64(1); i < seq; i += 7 {
		s.authors.remove([32]byte{byte(i % 3)}, i)
	}
	var after bytes.Buffer
	snap.encode(&after)
	if !bytes.Equal(before.Bytes(), after.Bytes()) {
		t.Fatal("the snapshot changed with the indexes")
	}
}

// TestLogFullAtMaxSeq requires the event at the highest seq the indexes
// hold to be stored and found, and the next append to be refused with
// the log unchanged.
func TestLogFullAtMaxSeq(t *testing.T) {
	ctx := context.Background()
	s := open(t)
	if err := s.control(ctx, func() error { s.nextSeq = maxSeq; return nil }); err != nil {
		t.Fatal(err)
	}
	last := ev(key(1), 100, 1, "last")
	if r, err := s.Append(ctx, Record{Event: last}); err != nil || r.Seq != maxSeq {
		t.Fatalf("append at the last seq: %+v %v", r, err)
	}
	checkByID(t, s, "last seq", map[string]int64{last.ID: maxSeq}, nil)
	if _, err := s.Append(ctx, Record{Event: ev(key(1), 101, 1, "one too many")}); !errors.Is(err, errLogFull) {
		t.Fatalf("append past the last seq: %v", err)
	}
	if n := countRows(t, s, "events"); n != 1 {
		t.Fatalf("%d events", n)
	}
}
