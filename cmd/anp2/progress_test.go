package main

import (
	"strings"
	"testing"
)

// TestProgressKeepsPhases draws lines in quick succession: counts within
// 100 ms of the last line are dropped, a new phase never is, and a line of
// the same phase is rate-limited again.
func TestProgressKeepsPhases(t *testing.T) {
	var out strings.Builder
	p := &progress{w: &out, tty: true}
	p.step("load", "load 1")
	p.step("load", "load 2")      // dropped: too soon
	p.step("index a", "index a")  // a new phase: drawn
	p.step("index b", "index b")  // drawn
	p.step("index b", "index b'") // dropped
	p.update("plain")             // dropped
	var drawn []string
	for _, l := range strings.Split(out.String(), "\r\033[K") {
		if l != "" {
			drawn = append(drawn, l)
		}
	}
	if got := strings.Join(drawn, "|"); got != "load 1|index a|index b" {
		t.Fatalf("drawn: %q", got)
	}
}
