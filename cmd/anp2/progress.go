package main

import (
	"fmt"
	"io"
	"os"
	"time"
)

// progress prints a self-overwriting status line when its writer is a
// terminal, and nothing otherwise (logs and CI stay clean).
type progress struct {
	w     io.Writer
	tty   bool
	last  time.Time
	phase string // the last phase given to step
}

func newProgress(w io.Writer) *progress {
	p := &progress{w: w}
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			p.tty = true
		}
	}
	return p
}

// update redraws the line at most ten times a second.
func (p *progress) update(format string, args ...any) {
	if !p.tty || time.Since(p.last) < 100*time.Millisecond {
		return
	}
	p.last = time.Now()
	fmt.Fprintf(p.w, "\r\033[K"+format, args...)
}

// step is update for a line that names a phase: a line whose phase
// differs from the last one's is drawn however recently the line was, so
// no phase is lost to the rate limit.
func (p *progress) step(phase, format string, args ...any) {
	if phase != p.phase {
		p.phase, p.last = phase, time.Time{}
	}
	p.update(format, args...)
}

// done ends the status line.
func (p *progress) done() {
	if p.tty {
		fmt.Fprint(p.w, "\r\033[K")
	}
}
