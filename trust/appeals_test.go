package trust

import (
	"testing"

	"github.com/anp2net/relay/protocol"
)

// TestOpenAppeals: an appeal is open while its event is hidden; one row
// per event with its latest counted appeal, newest first; an appeal on a
// visible event, and an event hidden without an appeal, are not listed.
func TestOpenAppeals(t *testing.T) {
	v := newViews()
	a, b, c, d := post(author, t0, "a"), post(author, t0+1, "b"), post(author, t0+2, "c"), post(author, t0+3, "d")
	v.add(a, b, c, d)
	for _, p := range []*protocol.Event{a, b, d} { // hidden by three flags; c has one
		for f := 1; f <= 3; f++ {
			v.add(flag(f, t0+60, "spam", p))
		}
	}
	v.add(flag(1, t0+60, "spam", c))
	v.add(flag(author, t0+300, "appeal", a), flag(author, t0+400, "appeal", b), flag(author, t0+500, "appeal", c))
	v.add(flag(author, t0+600, "appeal", a)) // within a's 24 h cooldown: not counted
	open := v.m.Compute(t0 + 3600).OpenAppeals()
	if len(open) != 2 || open[0].EventID != b.ID || open[1].EventID != a.ID {
		t.Fatalf("open appeals: %+v", open)
	}
	if open[1].AppealCreatedAt != t0+300 || open[1].Appeals != 1 || open[1].FlagCount != 3 || len(open[1].Flags) != 3 || open[1].Author != agent(author) {
		t.Fatalf("a's row: %+v", open[1])
	}
}
