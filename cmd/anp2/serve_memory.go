package main

import (
	"runtime/debug"
)

// releaseStartMemory returns to the OS, once and in the background so as
// not to delay serving, the heap the start's fold or restore used and freed
// (decoded snapshots, discovery's refold, the log's index loads). The
// runtime would otherwise keep most of it, up to about the size of the
// live heap, as resident anonymous memory until its scavenger slowly gave
// it back.
func releaseStartMemory() { go debug.FreeOSMemory() }
