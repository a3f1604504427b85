package sqlite

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/anp2net/relay/protocol"
)

// TestCheckpointerBoundsWAL appends far more WAL frames than walLimit
// allows, with the checkpointer woken every 32 events, and checks that
// no commit checkpoints by itself (wal_autocheckpoint is off) while the
// checkpointer keeps the WAL file under the limit; then that a reader
// holding an old snapshot delays the WAL's emptying only until it ends.
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
	s.walLimit.Store(1 << 20)
	ctx := context.Background()
	appendN := func(n, from int) {
		t.Helper()
		recs := make([]Record, 0, 50)
		for i := from; i < from+n; i++ {
			e := &protocol.Event{CreatedAt: int64(1e9 + i), Kind: 1, Content: fmt.Sprint("wal ", i), Tags: [][]string{{"t", fmt.Sprint("t", i%50)}}}
			e.Sign(key(i % 20))
			recs = append(recs, Record{Event: e})
			if len(recs) == cap(recs) || i == from+n-1 {
				if _, err := s.AppendBatch(ctx, recs); err != nil {
					t.Fatal(err)
				}
				recs = recs[:0]
			}
		}
	}
	walSize := func() int64 {
		fi, err := os.Stat(path + "-wal")
		if err != nil {
			return 0
		}
		return fi.Size()
	}
	// 2,000 events write some 30 MiB of WAL frames; without checkpoints
	// the WAL would hold them all.
	appendN(2000, 0)
	// The last wake-up may have come before the last appends: one more
	// (the writer's own come every 32 events) lets the checkpointer see
	// them all.
	wake := func() { s.kick <- struct{}{} }
	wake()
	waitFor(t, "WAL under 1 MiB", func() bool { return walSize() <= s.walLimit.Load() })

	// A reader pinning a snapshot keeps the WAL from being emptied; once
	// it ends, the next wake-up empties it.
	conn, err := s.read.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := conn.QueryRowContext(ctx, "SELECT COUNT(*) FROM events").Scan(&n); err != nil || n != 2000 {
		t.Fatalf("count = %d (%v)", n, err)
	}
	appendN(1000, 2000) // the writer goes on; the WAL grows behind the reader
	if walSize() <= s.walLimit.Load() {
		t.Fatalf("WAL %d bytes behind a pinned snapshot: the test does not exercise the limit", walSize())
	}
	if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	appendN(64, 3000) // wakes the checkpointer after the reader ended
	wake()
	waitFor(t, "WAL under 1 MiB after the reader ended", func() bool { return walSize() <= s.walLimit.Load() })
	var got int
	if err := s.read.QueryRow("SELECT COUNT(*) FROM events").Scan(&got); err != nil || got != 3064 {
		t.Fatalf("count = %d (%v), want 3064", got, err)
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
