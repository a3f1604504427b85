//go:build unix

package discovery

import (
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// tempPattern names the temporary stores (a relay without a state
// directory, a replay) in the system's temporary directory.
const tempPattern = "anp2-discovery-*.db"

// createTemp creates a temporary store file, locked (flock) for as long
// as the returned file stays open, after removing the temporary stores no
// process holds (those of relays killed before they could remove them).
func createTemp() (path string, lock *os.File, err error) {
	sweepTemp()
	f, err := os.CreateTemp("", tempPattern)
	if err != nil {
		return "", nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		os.Remove(f.Name())
		return "", nil, err
	}
	return f.Name(), f, nil
}

// sweepTemp removes the temporary stores whose lock nobody holds.
func sweepTemp() {
	paths, _ := filepath.Glob(filepath.Join(os.TempDir(), tempPattern))
	for _, p := range paths {
		// A file just created may not be locked yet: only files left a
		// minute ago are judged.
		if fi, err := os.Stat(p); err != nil || time.Since(fi.ModTime()) < time.Minute {
			continue
		}
		f, err := os.Open(p)
		if err != nil {
			continue
		}
		if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil {
			removeStoreFiles(p)
		}
		f.Close()
	}
}
