package federation

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/anp2net/relay/protocol"
)

// pagedLog answers pages of evs as another relay's GET /events would: the
// events in [since, until], sorted by time in the given order, at most cap.
func pagedLog(evs []*protocol.Event, newestFirst bool, cap int, seen map[string]int) func(since, until int64) ([]*protocol.Event, error) {
	return func(since, until int64) ([]*protocol.Event, error) {
		var out []*protocol.Event
		for _, e := range evs {
			if e.CreatedAt >= since && (until < 0 || e.CreatedAt <= until) {
				out = append(out, e)
			}
		}
		slices.SortStableFunc(out, func(a, b *protocol.Event) int {
			if newestFirst {
				return int(b.CreatedAt - a.CreatedAt)
			}
			return int(a.CreatedAt - b.CreatedAt)
		})
		out = out[:min(cap, len(out))]
		for _, e := range out {
			seen[e.ID]++
		}
		return out, nil
	}
}

func TestPageEventsWalksEveryEvent(t *testing.T) {
	// 300 events over 40 seconds, up to 9 in one second, and 30 in the
	// last one.
	var evs []*protocol.Event
	for i := range 300 {
		at := int64(1000 + i*40/270)
		if i >= 270 {
			at = 1100
		}
		evs = append(evs, &protocol.Event{ID: fmt.Sprintf("e%03d", i), CreatedAt: at})
	}
	for _, newestFirst := range []bool{true, false} {
		for _, cap := range []int{31, 50, 1000} {
			for _, since := range []int64{0, 1020} {
				seen := map[string]int{}
				if _, err := pageEvents(context.Background(), newWalk(since), 1000, pagedLog(evs, newestFirst, cap, seen)); err != nil {
					t.Fatal(err)
				}
				for _, e := range evs {
					if e.CreatedAt >= since && seen[e.ID] == 0 {
						t.Fatalf("newest first %v, page %d, since %d: %s (at %d) never read", newestFirst, cap, since, e.ID, e.CreatedAt)
					}
					if e.CreatedAt < since && seen[e.ID] > 0 {
						t.Fatalf("read %s before since", e.ID)
					}
				}
			}
		}
	}
}

// TestPageEventsStepsPastAFullSecond: a peer with more events in one second
// than its page holds cannot be walked completely by time alone; the walk
// must still end.
func TestPageEventsStepsPastAFullSecond(t *testing.T) {
	var evs []*protocol.Event
	for i := range 60 {
		evs = append(evs, &protocol.Event{ID: fmt.Sprintf("e%03d", i), CreatedAt: 1000 + int64(i/40)})
	}
	for _, newestFirst := range []bool{true, false} {
		seen := map[string]int{}
		if _, err := pageEvents(context.Background(), newWalk(0), 1000, pagedLog(evs, newestFirst, 20, seen)); err != nil {
			t.Fatal(err)
		}
		if len(seen) < 40 {
			t.Fatalf("newest first %v: read %d distinct events", newestFirst, len(seen))
		}
	}
}
