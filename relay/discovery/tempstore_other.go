//go:build !unix

package discovery

import "os"

// createTemp creates a temporary store file (no lock: a killed relay's
// file stays behind).
func createTemp() (path string, lock *os.File, err error) {
	f, err := os.CreateTemp("", "anp2-discovery-*.db")
	if err != nil {
		return "", nil, err
	}
	return f.Name(), f, nil
}
