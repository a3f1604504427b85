//go:build unix

package discovery_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/anp2net/relay/relay/discovery"
)

// TestTempStoreSwept: a relay without a state directory keeps its store
// in a temporary file, locked while it runs and removed at Close; the
// temporary stores of relays killed before they could remove theirs (no
// lock held, left over a minute ago) are removed by the next one, and a
// running relay's store is not.
func TestTempStoreSwept(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	stale := filepath.Join(os.TempDir(), "anp2-discovery-stale.db")
	for _, p := range []string{stale, stale + "-wal"} {
		if err := os.WriteFile(p, []byte("left by a killed relay"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	old := time.Now().Add(-time.Hour)
	os.Chtimes(stale, old, old)
	running := discovery.NewModule()
	if err := running.OpenState(""); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Fatalf("the stale store is still there: %v", err)
	}
	if _, err := os.Stat(stale + "-wal"); !os.IsNotExist(err) {
		t.Fatalf("the stale store's WAL is still there: %v", err)
	}
	mine, _ := filepath.Glob(filepath.Join(os.TempDir(), "anp2-discovery-*.db"))
	if len(mine) != 1 {
		t.Fatalf("temporary stores %v, want the running one", mine)
	}
	os.Chtimes(mine[0], old, old)
	other := discovery.NewModule()
	if err := other.OpenState(""); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(mine[0]); err != nil {
		t.Fatalf("a running relay's store was swept: %v", err)
	}
	running.Close()
	other.Close()
	if left, _ := filepath.Glob(filepath.Join(os.TempDir(), "anp2-discovery-*")); len(left) != 0 {
		t.Fatalf("left after Close: %v", left)
	}
}
