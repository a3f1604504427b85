package main

import (
	"os"
	"testing"
)

// The abuse suite: the files abuse_*_test.go run each attack of SPEC §20
// (Threat model) against real relay processes, a hostile peer server,
// free-key floods, slow readers, crafted filters and forged headers. Each
// attack asserts the behaviour that closes it. The heavier ones (thousands
// of connections or megabytes of traffic) call heavyAbuse and run when
// ANP2_ABUSE_HEAVY=1, as .ci/run sets it.

// heavyAbuse skips t unless ANP2_ABUSE_HEAVY=1.
func heavyAbuse(t *testing.T) {
	t.Helper()
	if os.Getenv("ANP2_ABUSE_HEAVY") != "1" {
		t.Skip("heavy abuse test: set ANP2_ABUSE_HEAVY=1 to run it (.ci/run does)")
	}
}
