//go:build !unix

package sqlite

import (
	"errors"
	"os"
)

var errWouldBlock = errors.New("lock held")

// flock is a no-op where flock(2) does not exist: one writer per log is
// then the operator's to keep.
func flock(*os.File) error { return nil }
