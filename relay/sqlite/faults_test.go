package sqlite

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestOneWriterPerLog: a second Open of a log that is open fails with a
// *LockedError naming the holder, and succeeds once the first is closed.
// (flock locks belong to the open file, so this holds within one process
// too; cmd/anp2's TestOneRelayPerLog checks two processes and SIGKILL.)
func TestOneWriterPerLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "one.db")
	a, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	a.Announce("addr=127.0.0.1:1")
	_, err = Open(path, nil)
	var le *LockedError
	if !errors.As(err, &le) || !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), "addr=127.0.0.1:1") || !strings.Contains(le.Holder, "pid=") {
		t.Fatalf("second Open: %v", err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := Open(path, nil)
	if err != nil {
		t.Fatalf("Open after the holder closed: %v", err)
	}
	b.Close()
}

// TestFullEpisodes: out-of-space failures become *FullError (ErrFull),
// First only on the first since a successful commit; other errors pass.
func TestFullEpisodes(t *testing.T) {
	var f fullEpisode
	full := fmt.Errorf("commit: %w", errors.New("database or disk is full (13)"))
	enospc := fmt.Errorf("write: %w", syscall.ENOSPC)
	other := errors.New("constraint failed")
	for i, c := range []struct {
		err         error
		full, first bool
	}{
		{full, true, true}, {enospc, true, false}, {other, false, false},
		{nil, false, false}, // a successful commit ends the episode
		{full, true, true},
	} {
		got := f.classify(c.err)
		var fe *FullError
		if errors.Is(got, ErrFull) != c.full || c.full && (!errors.As(got, &fe) || fe.First != c.first) {
			t.Fatalf("step %d: %v -> %v (want full %v first %v)", i, c.err, got, c.full, c.first)
		}
		if !c.full && got != c.err {
			t.Fatalf("step %d: %v changed to %v", i, c.err, got)
		}
	}
}
