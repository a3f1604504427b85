package reconcile

import (
	"math/rand/v2"
	"testing"
)

// targetCase measures one reconciliation of two sets of `shared` items
// with 50 differences each way, and of a set with itself.
func targetCase(t *testing.T, shared int) (diff, same syncStats) {
	r := rand.New(rand.NewPCG(5, 6))
	client, server := splitSets(r, shared, 50, 50, epoch, 365*86400)
	ci, si := NewIndex(client), NewIndex(server)
	diff = reconcile(t, ci, si, Params{}, Params{})
	checkDiff(t, diff, client, server)
	t.Logf("%d shared, 100 differences: %d round trips, %d bytes (%d up, %d down), largest message %d",
		shared, diff.rounds, diff.bytes(), diff.up, diff.down, diff.maxFrame)
	same = reconcile(t, si, si, Params{}, Params{})
	checkDiff(t, same, server, server)
	t.Logf("%d shared, 0 differences: %d round trip, %d bytes (%d up, %d down)",
		shared, same.rounds, same.bytes(), same.up, same.down)
	return diff, same
}

// TestTargets checks the targets: two sets of 100,000 shared items
// reconcile 100 differences (50 each way) in at most 3 round trips and
// 200 KB, and confirm equality in 1 round trip and 1 KB.
func TestTargets(t *testing.T) {
	diff, same := targetCase(t, 100_000)
	if diff.rounds > 3 || diff.bytes() > 200_000 {
		t.Errorf("100 differences: %d round trips and %d bytes, want <= 3 and <= 200000", diff.rounds, diff.bytes())
	}
	if same.rounds != 1 || same.bytes() > 1000 {
		t.Errorf("0 differences: %d round trips and %d bytes, want 1 and <= 1000", same.rounds, same.bytes())
	}
}

// TestTargetsMillion holds a million shared items to the same targets.
func TestTargetsMillion(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("builds two indexes of a million items")
	}
	diff, same := targetCase(t, 1_000_000)
	if diff.rounds > 3 || diff.bytes() > 200_000 {
		t.Errorf("100 differences: %d round trips and %d bytes, want <= 3 and <= 200000", diff.rounds, diff.bytes())
	}
	if same.rounds != 1 || same.bytes() > 1000 {
		t.Errorf("0 differences: %d round trips and %d bytes, want 1 and <= 1000", same.rounds, same.bytes())
	}
}
