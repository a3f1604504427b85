package main

import (
	"crypto/ed25519"
	"testing"
)

// TestBenchPhasesSignDistinctEvents: two phases of a bench whose
// created_at falls on the same second must not sign the same events (the
// paced run once re-sent the batch run's events and timed duplicates).
func TestBenchPhasesSignDistinctEvents(t *testing.T) {
	keys := []ed25519.PrivateKey{ed25519.NewKeyFromSeed(make([]byte, 32))}
	var c benchCmd
	a, b := c.makeEvents(keys, 20, 1_700_000_000, "batch"), c.makeEvents(keys, 20, 1_700_000_000, "paced")
	seen := map[string]bool{}
	for _, e := range a {
		seen[e.ID] = true
	}
	for _, e := range b {
		if seen[e.ID] {
			t.Fatalf("phases share event %s", e.ID)
		}
	}
}
