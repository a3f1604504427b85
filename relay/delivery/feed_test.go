package delivery

import (
	"testing"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/eventlog"
)

func batch(seqs ...int64) []eventlog.Committed {
	out := make([]eventlog.Committed, len(seqs))
	for i, s := range seqs {
		out[i] = eventlog.Committed{Seq: s, Event: &protocol.Event{}}
	}
	return out
}

func seqsOf(cs []eventlog.Committed) []int64 {
	out := make([]int64, len(cs))
	for i, c := range cs {
		out[i] = c.Seq
	}
	return out
}

// TestFeed: the feed gives the events past the cursor only while it
// holds all of them; a dropped commit (full, or kept false) and the log
// before the module started send the matcher to the log until its
// cursor passes them.
func TestFeed(t *testing.T) {
	f := feed{max: 4}
	f.markGap(10) // the log's end at Mount
	f.add(batch(11, 12), true)
	if _, ok := f.after(9, 100); ok {
		t.Fatal("cursor 9 before the gap at 10: the feed lacks event 10, the log must be read")
	}
	got, ok := f.after(10, 100)
	if !ok || len(got) != 2 || got[0].Seq != 11 || got[1].Seq != 12 {
		t.Fatalf("after(10) = %v %v, want [11 12] true", seqsOf(got), ok)
	}
	if got, ok := f.after(10, 1); !ok || len(got) != 1 || got[0].Seq != 11 {
		t.Fatalf("after(10, 1) = %v %v, want [11] true", seqsOf(got), ok)
	}
	f.add(batch(13, 14, 15), true) // 2 + 3 > 4: dropped
	if _, ok := f.after(12, 100); ok {
		t.Fatal("events 13–15 were dropped: the log must be read")
	}
	if len(f.items) != 0 {
		t.Fatalf("after(12) kept %v, want the matched events let go", seqsOf(f.items))
	}
	f.add(batch(16), true)
	if got, ok := f.after(15, 100); !ok || len(got) != 1 || got[0].Seq != 16 {
		t.Fatalf("after(15) = %v %v, want [16] true", seqsOf(got), ok)
	}
	f.add(batch(17), false) // no trigger: not kept
	if _, ok := f.after(16, 100); ok {
		t.Fatal("event 17 was not kept: the log must be read")
	}
	if got, ok := f.after(17, 100); !ok || len(got) != 0 {
		t.Fatalf("after(17) = %v %v, want [] true", seqsOf(got), ok)
	}
}
