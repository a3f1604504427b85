package state

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Discard removes every saved snapshot in the state directory at path
// (a missing directory has none) and returns how many it removed. anp2
// redact calls it: a snapshot saved before an event's body was withheld
// still holds what the views took from it, and the tail the relay would
// fold after it cannot take it out again (the body is gone), so the
// relay must fold the whole log at its next start.
func Discard(path string) (int, error) {
	ents, err := os.ReadDir(path)
	if os.IsNotExist(err) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("state dir: %w", err)
	}
	n := 0
	for _, e := range ents {
		if e.IsDir() && strings.HasPrefix(e.Name(), "snap-") || strings.HasPrefix(e.Name(), "tmp-") {
			if err := os.RemoveAll(filepath.Join(path, e.Name())); err != nil {
				return n, fmt.Errorf("state dir: %w", err)
			}
			n++
		}
	}
	return n, nil
}
