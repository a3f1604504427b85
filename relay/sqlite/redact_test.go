package sqlite

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/anp2net/relay/relay/eventlog/logtest"
)

// TestRedact runs the redaction checks on the SQLite log, across a
// reopen, and requires the withheld body's bytes gone from its files.
func TestRedact(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log.db")
	s, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	logtest.CheckRedact(t, s, func() logtest.Redactor {
		s.Close()
		if s, err = Open(path, nil); err != nil {
			t.Fatal(err)
		}
		return s
	})
	s.Close()
	for _, f := range []string{path, path + "-wal"} {
		b, err := os.ReadFile(f)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte(logtest.RedactContent)) {
			t.Fatalf("%s still holds the withheld body", f)
		}
	}
}

// TestAppendTombstone runs the tombstone append checks on SQLite.
func TestAppendTombstone(t *testing.T) { logtest.CheckAppendTombstone(t, open(t)) }
