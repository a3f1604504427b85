package postgres

import (
	"testing"
	"time"

	"github.com/anp2net/relay/relay/postgres/pgtest"
)

// TestRatesSharedAcrossStores charges one key through two logs on one
// database: the limit counts both, as the in-memory GCRA does for one.
func TestRatesSharedAcrossStores(t *testing.T) {
	url := pgtest.DB(t)
	a, b := open(t, url, nil).Rates("agent"), open(t, url, nil).Rates("agent")
	now := time.Unix(1_700_000_000, 0)
	const window = time.Minute
	interval := window / 3 // 3 per minute, a burst of 3
	for i, r := range []*Rates{a, b, a} {
		if ok, _, err := r.Take("k", now, interval, window, true); !ok || err != nil {
			t.Fatalf("charge %d refused: %v", i, err)
		}
	}
	if ok, _, err := b.Take("k", now, interval, window, false); ok || err != nil {
		t.Fatalf("a peek at a full key says it fits: %v", err)
	}
	ok, wait, err := b.Take("k", now, interval, window, true)
	if ok || err != nil || wait != interval {
		t.Fatalf("fourth charge: ok %v wait %v err %v, want refused for %v", ok, wait, err, interval)
	}
	// Another limit's key of the same name is its own.
	if ok, _, _ := open(t, url, nil).Rates("other").Take("k", now, interval, window, true); !ok {
		t.Fatal("limits share keys")
	}
	// One interval later, one more fits, on either process.
	later := now.Add(interval)
	if ok, _, err := a.Take("k", later, interval, window, true); !ok || err != nil {
		t.Fatalf("after an interval: %v", err)
	}
	if ok, _, _ := b.Take("k", later, interval, window, true); ok {
		t.Fatal("two charges fit in one interval")
	}
}
