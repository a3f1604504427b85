package protocol

import (
	"fmt"
	"testing"
)

// TestCheckFirstBatchAgrees checks real network events, the conformance
// vectors and events broken in each way a check can fail, in batches of
// several sizes, and requires CheckFirst's answer (the same error, or
// none) for every one; entries already failed or nil stay as they were.
func TestCheckFirstBatchAgrees(t *testing.T) {
	c := DefaultChecker()
	c.PoW.ActiveFrom = 0
	c.Limits.MaxAge = 0
	const now = 1779200000
	var evs []*Event
	for _, line := range networkSample(t) {
		e, err := DecodeJSON(line)
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, e)
	}
	for _, v := range loadVectors(t) {
		if e, err := DecodeJSON(v.Event); err == nil {
			evs = append(evs, e)
		}
	}
	// Valid events of one key (its table gets built on the way) and
	// the ways one of them can be wrong.
	for i := range 40 {
		e := signed(1, fmt.Sprint("post ", i), []string{"t", "x"})
		switch i % 8 {
		case 1: // another valid signature, wrong for this event
			e.Sig = signed(1, "other").Sig
		case 2: // not hex
			e.Sig = "zz" + e.Sig[2:]
		case 3: // the id does not match
			e.Content += "!"
		case 4: // too far in the future
			e.CreatedAt = now + 86400
			e.Sign(testKey)
		case 5: // a kind rule: a trust vote without its target
			e = signed(6, "{}")
		}
		evs = append(evs, e)
	}
	evs = append(evs, nil)
	want := make([]error, len(evs))
	codes := map[string]int{}
	for i, e := range evs {
		if e != nil {
			want[i] = c.CheckFirst(e, now)
			codes[codeOf(want[i])]++
		}
	}
	if len(codes) < 5 || codes[""] < 200 || codes[CodeBadSignature] < 5 {
		t.Fatalf("the events do not cover the checks: %v", codes)
	}
	for _, size := range []int{1, 7, 64, len(evs)} {
		got := make([]error, len(evs))
		preset := fmt.Errorf("failed before")
		got[0] = preset
		for lo := 0; lo < len(evs); lo += size {
			hi := min(lo+size, len(evs))
			c.CheckFirstBatch(evs[lo:hi], now, got[lo:hi])
		}
		if got[0] != preset {
			t.Fatalf("batch %d: a preset error was replaced by %v", size, got[0])
		}
		for i := 1; i < len(evs); i++ {
			if fmt.Sprint(got[i]) != fmt.Sprint(want[i]) {
				t.Fatalf("batch %d, event %d: got %v, CheckFirst %v", size, i, got[i], want[i])
			}
		}
	}
}
