//go:build !race

package reconcile

const raceEnabled = false
