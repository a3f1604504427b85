//go:build race

package reconcile

// raceEnabled scales the heaviest tests down under the race detector, which
// slows this package's arithmetic some fifty times.
const raceEnabled = true
