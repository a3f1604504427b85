package discovery_test

import (
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/anp2net/relay/relay/discovery"
)

var (
	benchDirOnce sync.Once
	benchDir     string
)

// benchNew is an empty fold over a store file of its own, as a relay with
// a state directory holds it: the benchmarks measure the store on disk,
// not in memory. The files are removed when the test binary exits.
func benchNew(tb testing.TB) *discovery.Fold {
	tb.Helper()
	benchDirOnce.Do(func() {
		d, err := os.MkdirTemp("", "anp2-discovery-bench-")
		if err != nil {
			tb.Fatal(err)
		}
		benchDir = d
	})
	f, err := os.CreateTemp(benchDir, "store-*.db")
	if err != nil {
		tb.Fatal(err)
	}
	f.Close()
	fold, err := discovery.Open(filepath.Join(benchDir, filepath.Base(f.Name())), false)
	if err != nil {
		tb.Fatal(err)
	}
	return fold
}

func TestMain(m *testing.M) {
	code := m.Run()
	if benchDir != "" {
		os.RemoveAll(benchDir)
	}
	os.Exit(code)
}
