package tasks

import (
	"encoding/hex"
	"math"
)

// WeightFunc returns the weight of a verifier's kind 53 in the high-stakes
// consensus (§18.6.1). The trust package provides
// sqrt(max(0, weighted_score+1)). It must be safe for concurrent use and
// deterministic for a given trust state. nil means every agent weighs 1.
type WeightFunc func(agentID string) float64

// MaxWeight caps a verifier's weight; larger values count as MaxWeight.
const MaxWeight = 1e6

// quantize returns w(agent) in integer micro-units, clamped to
// [0, MaxWeight]; NaN and negative weights count 0. Integer sums make the
// consensus exact and independent of summation order and CPU.
func quantize(w WeightFunc, agent string) int64 {
	x := 1.0
	if w != nil {
		x = w(agent)
	}
	if !(x > 0) {
		return 0
	}
	if x > MaxWeight {
		x = MaxWeight
	}
	return int64(math.Round(x * 1e6))
}

// Status is a task's derived status (§18.10).
type Status string

// The §18.10 statuses.
const (
	StatusPending   Status = "pending"
	StatusAccepted  Status = "accepted"
	StatusCompleted Status = "completed"
	StatusVerified  Status = "verified"
	StatusPaid      Status = "paid"
	StatusRefunded  Status = "refunded"
	StatusDisputed  Status = "disputed"
	StatusTimedOut  Status = "timed_out"
	StatusCancelled Status = "cancelled"
)

// Statuses lists every status, in lifecycle order.
var Statuses = []Status{StatusPending, StatusAccepted, StatusCompleted, StatusVerified, StatusPaid,
	StatusRefunded, StatusDisputed, StatusTimedOut, StatusCancelled}

// Open reports whether s is pending, accepted or completed: committed but
// not settled (§18.11 locked).
func (s Status) Open() bool {
	return s == StatusPending || s == StatusAccepted || s == StatusCompleted
}

// Valid reports whether s is one of the §18.10 statuses.
func (s Status) Valid() bool {
	for _, x := range Statuses {
		if s == x {
			return true
		}
	}
	return false
}

func hexID(id [32]byte) string { return hex.EncodeToString(id[:]) }
