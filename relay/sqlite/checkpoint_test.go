package sqlite

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anp2net/relay/protocol"
)

// TestCheckpointerBoundsWAL appends far more WAL frames than walLimit
// allows, with the checkpointer woken every 32 events (some 1 MiB of
// frames here, so the file may pass the 1 MiB limit by that much before
// the writer is asked to start it over), and checks that no commit
// checkpoints by itself (wal_autocheckpoint is off) while the
// checkpointer and the writer keep the WAL bounded: with the writer idle
// between appends, with it never idle, and after a reader that pinned an
// old snapshot (and let the WAL grow) ends.
func TestCheckpointerBoundsWAL(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log.db")
	s, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var auto int
	if err := s.write.QueryRow("PRAGMA wal_autocheckpoint").Scan(&auto); err != nil || auto != 0 {
		t.Fatalf("writer's wal_autocheckpoint = %d (%v), want 0", auto, err)
	}
	s.ckptEvery.Store(32)
	limit := int64(1 << 20)
	s.walLimit.Store(limit)
	ctx := context.Background()
	walSize := s.walSize
	var most atomic.Int64
	next := 0
	signed := func(n int) []Record {
		var recs []Record
		for i := next; i < next+n; i++ {
			e := &protocol.Event{CreatedAt: int64(1e9 + i), Kind: 1, Content: fmt.Sprint("wal ", i), Tags: [][]string{{"t", fmt.Sprint("t", i%50)}}}
			e.Sign(key(i % 20))
			recs = append(recs, Record{Event: e})
		}
		next += n
		return recs
	}
	// appendAll appends recs from writers goroutines in batches of 10,
	// noting the WAL's largest size.
	appendAll := func(recs []Record, writers int) {
		t.Helper()
		most.Store(0)
		var wg sync.WaitGroup
		per := len(recs) / writers
		for g := 0; g < writers; g++ {
			wg.Add(1)
			go func(part []Record) {
				defer wg.Done()
				for len(part) > 0 {
					n := min(10, len(part))
					if _, err := s.AppendBatch(ctx, part[:n]); err != nil {
						t.Error(err)
						return
					}
					part = part[n:]
					if w := walSize(); w > most.Load() {
						most.Store(w)
					}
				}
			}(recs[g*per : (g+1)*per])
		}
		wg.Wait()
	}

	// 2,000 events write some 30 MiB of WAL frames; without checkpoints
	// the WAL would hold them all. One appender: the writer idles
	// between its batches.
	appendAll(signed(2000), 1)
	if most.Load() > 4*limit {
		t.Fatalf("WAL reached %d bytes, limit %d", most.Load(), limit)
	}
	// With a publish announced throughout and four appenders of
	// pre-signed events, the writer never idles and no passive
	// checkpoint finishes between two of its transactions: only the
	// start-over it is made to do past the limit bounds the WAL.
	s.Expect(1)
	appendAll(signed(2000), 4)
	s.Expect(-1)
	if most.Load() > 4*limit {
		t.Fatalf("WAL reached %d bytes with the writer never idle, limit %d", most.Load(), limit)
	}

	// A reader pinning a snapshot keeps the WAL from starting over; once
	// it ends, it starts over, and the commit after cuts the file back.
	conn, err := s.read.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := conn.QueryRowContext(ctx, "SELECT COUNT(*) FROM events").Scan(&n); err != nil || n != next {
		t.Fatalf("count = %d (%v), want %d", n, err, next)
	}
	appendAll(signed(1000), 1) // the writer goes on; the WAL grows behind the reader
	if walSize() <= 4*limit {
		t.Fatalf("WAL %d bytes behind a pinned snapshot: the test does not exercise the limit", walSize())
	}
	if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	s.kick <- struct{}{}
	waitFor(t, "WAL back under the limit after the reader ended", func() bool {
		appendAll(signed(1), 1)
		return walSize() <= limit+256<<10
	})
	var got int
	if err := s.read.QueryRow("SELECT COUNT(*) FROM events").Scan(&got); err != nil || got != next {
		t.Fatalf("count = %d (%v), want %d", got, err, next)
	}
}

// waitFor polls cond for up to a minute (the checkpointer runs beside the
// writer); the bound is a deadlock guard, not a timing assertion.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(time.Minute); !cond(); {
		if time.Now().After(end) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestBusyWriterStartsWALOver checks that after drainWAL the next commit
// writes the WAL from its start, with a publish announced throughout (so
// the writer never counts itself idle) and the WAL past walLimit (so
// drainWAL has the writer copy the last frames between two
// transactions). Whether a pass alone would have let the WAL start over
// (it does when it ends while the writer waits, as here) the test cannot
// tell; under steady publishing it never does, which the bench shows.
func TestBusyWriterStartsWALOver(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log.db")
	s, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.ckptEvery.Store(1 << 30) // only the test drains
	s.walLimit.Store(256 << 10)
	ctx := context.Background()
	s.Expect(1)
	defer s.Expect(-1)
	recs := make([]Record, 0, 200)
	for i := 0; i < 200; i++ {
		e := &protocol.Event{CreatedAt: int64(1e9 + i), Kind: 1, Content: fmt.Sprint("busy ", i), Tags: [][]string{{"t", fmt.Sprint("t", i%50)}}}
		e.Sign(key(i % 20))
		recs = append(recs, Record{Event: e})
	}
	for _, r := range recs[:199] { // a transaction each: more frames
		if _, err := s.Append(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	frames := func() int {
		var busy, n, done int
		if err := s.ckpt.QueryRow("PRAGMA wal_checkpoint(PASSIVE)").Scan(&busy, &n, &done); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := frames()
	if int64(before)*s.frameSize < s.walLimit.Load() {
		t.Fatalf("%d frames: under the limit, the test exercises nothing", before)
	}
	if !s.drainWAL() {
		t.Fatal("drainWAL: a pass did not copy every frame")
	}
	if _, err := s.AppendBatch(ctx, recs[199:]); err != nil {
		t.Fatal(err)
	}
	if after := frames(); after >= before {
		t.Fatalf("WAL has %d frames after a commit, %d before: it did not start over", after, before)
	}
	var n int
	if err := s.read.QueryRow("SELECT COUNT(*) FROM events").Scan(&n); err != nil || n != 200 {
		t.Fatalf("count = %d (%v), want 200", n, err)
	}
}

// walSize is the size of the WAL file (0 when it cannot be read): what
// the checkpointer bounds (it goes by frame counts itself).
func (s *Store) walSize() int64 {
	fi, err := os.Stat(s.path + "-wal")
	if err != nil {
		return 0
	}
	return fi.Size()
}
