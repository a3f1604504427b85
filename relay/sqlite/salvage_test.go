package sqlite

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/anp2net/relay/protocol"
)

// TestSalvageDamagedPages damages the leaf holding a middle event and the
// rightmost leaf of the events table (so MAX(seq) fails too) and requires
// Salvage to finish, return every other row, and report exactly the rows
// it did not return, with the ids the indexes still name.
func TestSalvageDamagedPages(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log.db")
	s, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	var recs []Record
	var evs []*protocol.Event
	for i := range 2000 {
		e := ev(key(i%20), 1767225600+int64(i), 1, "salvage me", []string{"t", "x"})
		evs = append(evs, e)
		recs = append(recs, Record{Event: e})
	}
	if _, err := s.AppendBatch(context.Background(), recs); err != nil {
		t.Fatal(err)
	}
	s.Close()
	b, _ := os.ReadFile(path)
	for _, e := range []*protocol.Event{evs[1000], evs[len(evs)-1]} {
		at := bytes.Index(b, []byte(e.ID)) / 4096 * 4096
		for i := range 2000 {
			b[at+i] = byte(i*7 + 13)
		}
	}
	os.WriteFile(path, b, 0o644)

	got := map[int64]bool{}
	rep, err := Salvage(context.Background(), path, func(rows []Row) error {
		for _, r := range rows {
			got[r.Seq] = true
		}
		return nil
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	lost := map[int64]bool{}
	for _, l := range rep.Lost {
		for seq := l.From; seq <= l.To; seq++ {
			lost[seq] = true
		}
	}
	for seq := int64(1); seq <= 2000; seq++ {
		if got[seq] == lost[seq] {
			t.Fatalf("seq %d: read %v, reported lost %v (report %+v)", seq, got[seq], lost[seq], rep.Lost)
		}
	}
	if len(lost) == 0 || !lost[2000] || !lost[1001] || len(lost) > 400 || rep.Through != 2000 || len(rep.LostIDs) != len(lost) {
		t.Fatalf("lost %d rows (%+v), through %d, %d ids known", len(lost), rep.Lost, rep.Through, len(rep.LostIDs))
	}
	if rep.LostIDs[2000] != evs[1999].ID || len(rep.Integrity) == 0 {
		t.Fatalf("lost id of seq 2000: %q; integrity %q", rep.LostIDs[2000], rep.Integrity)
	}
	t.Logf("read %d rows, lost %d in %v", rep.Rows, len(lost), rep.Lost)
}
