package sqlite

import (
	"errors"
	"strings"
	"syscall"
	"time"

	msqlite "modernc.org/sqlite"
)

// SQLite result codes the store tells apart (the low byte of an extended
// code is its primary code).
const (
	sqliteCorrupt    = 11
	sqliteFull       = 13
	sqliteNotADB     = 26
	sqliteIOErrShmSz = 4874 // SQLITE_IOERR_SHMSIZE: the -shm file could not grow
)

// ErrFull matches, with errors.Is, an append refused because the disk (or
// the database's size limit) is full. Nothing of the refused append is
// stored; appends succeed again once space returns.
var ErrFull = errors.New("database or disk is full")

// FullError is an append refused for want of space. First is set on the
// first such refusal since the last successful commit (the start of an
// episode), so a caller can log an episode once rather than per request.
type FullError struct {
	Err   error
	First bool
	Since time.Time // when the episode began
}

func (e *FullError) Error() string        { return "storage full: " + e.Err.Error() }
func (e *FullError) Unwrap() error        { return e.Err }
func (e *FullError) Is(target error) bool { return target == ErrFull }

// ErrCorrupt matches, with errors.Is, an error SQLite gave because the
// database file is damaged ("database disk image is malformed").
var ErrCorrupt = errors.New("database file is damaged")

// IsCorrupt reports whether err says the database file is damaged.
func IsCorrupt(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, ErrCorrupt) {
		return true
	}
	var se *msqlite.Error
	if errors.As(err, &se) {
		if c := se.Code() & 0xff; c == sqliteCorrupt || c == sqliteNotADB {
			return true
		}
	}
	msg := err.Error()
	return strings.Contains(msg, "malformed") || strings.Contains(msg, "file is not a database")
}

// isFull reports whether err says there was no room to write.
func isFull(err error) bool {
	if err == nil {
		return false
	}
	var se *msqlite.Error
	if errors.As(err, &se) && (se.Code()&0xff == sqliteFull || se.Code() == sqliteIOErrShmSz) {
		return true
	}
	if errors.Is(err, syscall.ENOSPC) {
		return true
	}
	msg := err.Error()
	return strings.Contains(msg, "database or disk is full") || strings.Contains(msg, "no space left on device")
}

// corrupt wraps err so errors.Is(err, ErrCorrupt) holds when SQLite said
// the file is damaged; other errors are returned as they are.
func corrupt(err error) error {
	if err == nil || errors.Is(err, ErrCorrupt) || !IsCorrupt(err) {
		return err
	}
	return &corruptError{err}
}

type corruptError struct{ err error }

func (e *corruptError) Error() string        { return e.err.Error() }
func (e *corruptError) Unwrap() error        { return e.err }
func (e *corruptError) Is(target error) bool { return target == ErrCorrupt }

// fullEpisode turns a failed commit's error into a *FullError when it is
// one, and tracks episodes: ok (a successful commit) ends one.
type fullEpisode struct {
	since time.Time // zero when no episode is under way; finisher only
}

func (f *fullEpisode) classify(err error) error {
	if err == nil {
		f.since = time.Time{}
		return nil
	}
	if !isFull(err) {
		return err
	}
	first := f.since.IsZero()
	if first {
		f.since = time.Now()
	}
	return &FullError{Err: err, First: first, Since: f.since}
}
