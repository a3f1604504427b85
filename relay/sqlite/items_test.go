package sqlite

import (
	"context"
	"encoding/hex"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/eventlog"
)

// tableItems returns every row's (created_at, id) read from the events
// table, sorted.
func tableItems(t testing.TB, s *Store) []string {
	t.Helper()
	rows, err := s.read.Query(`SELECT created_at, id FROM events`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var at int64
		var id []byte
		if err := rows.Scan(&at, &id); err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%d %x", at, id))
	}
	slices.Sort(out)
	return out
}

// allItems returns what Items gives with no filter (the items file's
// path), sorted, and fails on a repeated item.
func allItems(t testing.TB, s *Store) []string {
	t.Helper()
	var out []string
	if err := s.Items(context.Background(), nil, nil, math.MinInt64, func(at int64, id []byte) {
		out = append(out, fmt.Sprintf("%d %x", at, id))
	}); err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	if len(slices.Compact(slices.Clone(out))) != len(out) {
		t.Fatal("Items gave an item twice")
	}
	return out
}

// checkItems requires Items with no filter to give the table's items, and
// the items file to hold a record per row.
func checkItems(t testing.TB, s *Store, stage string) {
	t.Helper()
	want := tableItems(t, s)
	if got := allItems(t, s); !slices.Equal(got, want) {
		t.Fatalf("%s: Items gave %d items, the table holds %d", stage, len(got), len(want))
	}
	if s.items == nil || s.items.n.Load() != int64(len(want)) {
		t.Fatalf("%s: the items file holds %v records, want %d", stage, s.items, len(want))
	}
	var fromFile []string
	all, _ := s.items.each(ItemsPath(s.path), func(at int64, id []byte) { fromFile = append(fromFile, fmt.Sprintf("%d %x", at, id)) })
	slices.Sort(fromFile)
	if !all || !slices.Equal(fromFile, want) {
		t.Fatalf("%s: the items file alone gave %d items (whole: %v), want %d", stage, len(fromFile), all, len(want))
	}
}

// itemsLog fills a log at dir/log.db with events, a withheld one and a
// tombstone, and closes it.
func itemsLog(t testing.TB, dir string, n int) string {
	t.Helper()
	path := filepath.Join(dir, "log.db")
	s, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	var evs []*protocol.Event
	for i := range n {
		evs = append(evs, ev(key(i%5), int64(500+(i*13)%37), 1, fmt.Sprint("item ", i)))
	}
	ctx := context.Background()
	recs := make([]Record, len(evs))
	for i, e := range evs {
		recs[i] = Record{Event: e}
	}
	if _, err := s.AppendBatch(ctx, recs); err != nil {
		t.Fatal(err)
	}
	if err := s.Redact(ctx, evs[3].ID, eventlog.Tombstone(evs[3].ID, eventlog.Withholding{Reason: "test", Redaction: evs[4].ID, CreatedAt: evs[3].CreatedAt})); err != nil {
		t.Fatal(err)
	}
	var other [32]byte
	other[0] = 7
	oid := hex.EncodeToString(other[:])
	if _, err := s.AppendTombstone(ctx, eventlog.Tombstone(oid, eventlog.Withholding{Reason: "copied", Redaction: evs[4].ID, CreatedAt: 99}), 1); err != nil {
		t.Fatal(err)
	}
	checkItems(t, s, "written")
	s.Close()
	return path
}

// TestItemsFileFollowsLog requires the items file to give every row's
// item, across a reopen (with nothing to read from the log), and after
// the file is torn, damaged, emptied, ahead of the log or another log's:
// Open keeps what belongs to the log and reads the rest from it.
func TestItemsFileFollowsLog(t *testing.T) {
	other := itemsLog(t, t.TempDir(), 30)
	cases := map[string]func(t *testing.T, path string){
		"kept": func(t *testing.T, path string) {},
		"torn": func(t *testing.T, path string) {
			fi, _ := os.Stat(ItemsPath(path))
			os.Truncate(ItemsPath(path), fi.Size()-itemRecord-7)
		},
		"damaged end": func(t *testing.T, path string) {
			b, _ := os.ReadFile(ItemsPath(path))
			b[len(b)-3] ^= 1
			os.WriteFile(ItemsPath(path), b, 0o644)
		},
		"damaged middle": func(t *testing.T, path string) {
			b, _ := os.ReadFile(ItemsPath(path))
			b[itemsHeader+5*itemRecord+20] ^= 1
			os.WriteFile(ItemsPath(path), b, 0o644)
		},
		"missing": func(t *testing.T, path string) { os.Remove(ItemsPath(path)) },
		"empty":   func(t *testing.T, path string) { os.WriteFile(ItemsPath(path), nil, 0o644) },
		"garbage": func(t *testing.T, path string) {
			os.WriteFile(ItemsPath(path), []byte("anp2itm\n\x01\x00\x00\x00garbage"), 0o644)
		},
		"other log": func(t *testing.T, path string) {
			b, _ := os.ReadFile(ItemsPath(other))
			os.WriteFile(ItemsPath(path), b, 0o644)
		},
		"ahead of the log": func(t *testing.T, path string) {
			// The log restored from a copy taken before its last events.
			backup := filepath.Join(t.TempDir(), "copy.db")
			copyFiles(t, path, backup, false)
			s, err := Open(path, nil)
			if err != nil {
				t.Fatal(err)
			}
			appendAll(t, s, ev(key(1), 900, 1, "after the copy"), ev(key(2), 901, 1, "after the copy too"))
			s.Close()
			items, _ := os.ReadFile(ItemsPath(path))
			copyFiles(t, backup, path, false)
			os.WriteFile(ItemsPath(path), items, 0o644)
		},
	}
	for name, spoil := range cases {
		t.Run(name, func(t *testing.T) {
			path := itemsLog(t, t.TempDir(), 40)
			spoil(t, path)
			s, err := Open(path, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			checkItems(t, s, "reopened")
			appendAll(t, s, ev(key(3), 1000, 1, "next"))
			checkItems(t, s, "appended")
		})
	}
}

// TestItemsReadFallsBackOnDamage damages a record of the items file under
// a running store: Items gives the records before the damaged chunk's
// from the file and the rest from the log, each once.
func TestItemsReadFallsBackOnDamage(t *testing.T) {
	path := itemsLog(t, t.TempDir(), 20)
	s, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	f, err := os.OpenFile(ItemsPath(path), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte{0xff, 0xfe}, itemsHeader+10*itemRecord+30)
	f.Close()
	if got, want := allItems(t, s), tableItems(t, s); !slices.Equal(got, want) {
		t.Fatalf("Items gave %d items, want %d", len(got), len(want))
	}
}

// FuzzItemsFile opens a small log with arbitrary bytes as its items file:
// Open must succeed and Items give the table's items.
func FuzzItemsFile(f *testing.F) {
	dir := f.TempDir()
	path := itemsLog(f, dir, 6)
	good, err := os.ReadFile(ItemsPath(path))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add(good[:len(good)-5])
	f.Add([]byte(itemsMagic))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		if err := os.WriteFile(ItemsPath(path), b, 0o644); err != nil {
			t.Fatal(err)
		}
		s, err := Open(path, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if got, want := allItems(t, s), tableItems(t, s); !slices.Equal(got, want) {
			t.Fatalf("Items gave %d items, want %d", len(got), len(want))
		}
	})
}

// TestItemsWhileAppending reads every item while appends go on (run with
// -race): each read gives whole items of stored events, never one twice,
// and the last, after the appends, all of them.
func TestItemsWhileAppending(t *testing.T) {
	s := open(t)
	done := make(chan error)
	go func() {
		for i := range 40 {
			var recs []Record
			for j := range 8 {
				recs = append(recs, Record{Event: ev(key(j), int64(100+i), 1, fmt.Sprint(i, " ", j))})
			}
			if _, err := s.AppendBatch(context.Background(), recs); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	for reading := true; reading; {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			reading = false
		default:
		}
		got := allItems(t, s)
		want := tableItems(t, s)
		for _, it := range got {
			if _, found := slices.BinarySearch(want, it); !found {
				t.Fatalf("Items gave %s, which the log does not hold", it)
			}
		}
	}
	checkItems(t, s, "after the appends")
}
