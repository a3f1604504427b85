package statetest

import (
	"path/filepath"
	"testing"

	"github.com/anp2net/relay/relay/state"
)

// SaveLatest captures s, saves it in a fresh state directory under
// t.TempDir() and returns what a restart reads back from it.
func SaveLatest(t testing.TB, s *state.State) *state.Saved {
	t.Helper()
	c, err := s.Capture()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := state.OpenDir(filepath.Join(t.TempDir(), "state"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dir.Save(c); err != nil {
		t.Fatal(err)
	}
	sv, err := dir.Latest()
	if err != nil {
		t.Fatal(err)
	}
	return sv
}
