package postgres

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/anp2net/relay/relay/eventlog"

	"github.com/anp2net/relay/relay/eventlog/logtest"
	"github.com/anp2net/relay/relay/postgres/pgtest"
)

// TestRedact runs the redaction checks on a real server, across a second
// store over the same database; Serving counts that store's listener.
func TestRedact(t *testing.T) {
	url := pgtest.DB(t)
	s := open(t, url, nil)
	logtest.CheckRedact(t, s, func() logtest.Redactor { return open(t, url, nil) })
	if n, err := Serving(context.Background(), url); err != nil || n < 1 {
		t.Fatalf("Serving = %d, %v with two stores open", n, err)
	}
}

// TestAppendTombstone runs the tombstone append checks on a real server,
// with a commit hook (delivering another process's commits reads past
// the tombstone's seq).
func TestAppendTombstone(t *testing.T) {
	url := pgtest.DB(t)
	var seqs []int64
	var mu sync.Mutex
	s := open(t, url, func(b []eventlog.Committed) {
		mu.Lock()
		for _, c := range b {
			seqs = append(seqs, c.Seq)
		}
		mu.Unlock()
	})
	logtest.CheckAppendTombstone(t, s)
	other := open(t, url, nil)
	logtest.AppendAll(t, other, logtest.Ev(logtest.Key(9), 1_780_000_400, 1, "from another process"))
	logtest.AppendAll(t, s, logtest.Ev(logtest.Key(9), 1_780_000_401, 1, "after it"))
	mu.Lock()
	defer mu.Unlock()
	if want := []int64{1, 3, 4, 5}; !slices.Equal(seqs, want) {
		t.Fatalf("the hook saw seqs %v, want %v (the tombstone at 2 has no event)", seqs, want)
	}
}
