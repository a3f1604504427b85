package sqlite

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// A log has one writer process. Two relays appending to one file would
// each fold only the events it appended itself, and their derived state
// would drift apart without either noticing, so Open takes an exclusive
// flock(2) on <db>.lock and keeps it until Close. The operating system
// drops the lock when its holder exits, however it exits, so a crashed
// relay never blocks its restart. The file says who holds it.

// LockedError is returned by Open when another process holds the log.
type LockedError struct {
	Path   string
	Holder string // what the holder wrote into the lock file ("pid=… started=…")
}

func (e *LockedError) Error() string {
	h := e.Holder
	if h == "" {
		h = "a process that has not said who it is yet"
	}
	return fmt.Sprintf("log %s is in use by another process (%s): a log has one writer; stop that process or choose another --db", e.Path, h)
}

// ErrLocked matches any *LockedError with errors.Is.
var ErrLocked = errors.New("log in use by another process")

// Is reports target == ErrLocked.
func (e *LockedError) Is(target error) bool { return target == ErrLocked }

// logLock is a held lock on a log.
type logLock struct {
	f    *os.File
	info string
}

// LockPath is the lock file that guards the log at path.
func LockPath(path string) string { return path + ".lock" }

// Lock takes the writer lock on the log at path without opening it (a
// repair holds it while it reads a damaged log). It returns a *LockedError
// naming the holder when another process has it. Close releases it.
func Lock(path string) (io.Closer, error) {
	l, err := lockLog(path)
	if err != nil {
		return nil, err
	}
	return l, nil
}

func lockLog(path string) (*logLock, error) {
	f, err := os.OpenFile(LockPath(path), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock log: %w", err)
	}
	if err := flock(f); err != nil {
		holder, _ := io.ReadAll(io.LimitReader(f, 4096))
		f.Close()
		if errors.Is(err, errWouldBlock) {
			return nil, &LockedError{Path: path, Holder: strings.Join(strings.Fields(string(holder)), " ")}
		}
		return nil, fmt.Errorf("lock log: %w", err)
	}
	l := &logLock{f: f}
	l.info = fmt.Sprintf("pid=%d started=%s cmd=%q", os.Getpid(), time.Now().UTC().Format(time.RFC3339), strings.Join(os.Args, " "))
	if err := l.write(); err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

// write replaces the lock file's text with l.info and extra.
func (l *logLock) write(extra ...string) error {
	text := strings.Join(append([]string{l.info}, extra...), " ") + "\n"
	if err := l.f.Truncate(0); err != nil {
		return fmt.Errorf("lock log: %w", err)
	}
	if _, err := l.f.WriteAt([]byte(text), 0); err != nil {
		return fmt.Errorf("lock log: %w", err)
	}
	return nil
}

// Close releases the lock. The file stays: removing it would let a
// process that opened it just before lock a file nobody else sees.
func (l *logLock) Close() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Close() // closing the descriptor drops the flock
	l.f = nil
	return err
}

// Announce adds what a holder learned after Open (a relay's listening
// address, say) to the lock file, so a second relay's refusal names it.
func (s *Store) Announce(kv ...string) error {
	if s.lock == nil {
		return nil
	}
	return s.lock.write(kv...)
}
