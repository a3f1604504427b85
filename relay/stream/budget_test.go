package stream

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anp2net/relay/protocol"
)

// TestQueueByteBudgets drives the hub's byte budgets with subscribers
// that never take their frames: each is let go once its own bytes, its
// shared quota's or the hub's total would pass the budget, and the
// bytes queued never pass the total by more than one frame. Frames taken
// or dropped give their bytes back.
func TestQueueByteBudgets(t *testing.T) {
	h := NewHub(Options{Backlog: func(_ context.Context, _ int64, start func(int64) error, _ func(int64, []byte) error) error {
		return start(0)
	},
		QueueBytes: 300 << 10, TotalBytes: 1 << 20})
	big := strings.Repeat("x", 60_000)
	ev := func(i int) []Item {
		return []Item{{Seq: int64(i), Event: mk(key(1), int64(i), 1, big)}}
	}
	// One lone subscriber: dropped by its own budget (about five frames).
	lone, _ := h.Subscribe(nil, "")
	for i := 1; i <= 8; i++ {
		h.Publish(ev(i))
	}
	if !gone(lone) || !lone.Slow() {
		t.Fatal("a subscriber 480 kB behind on a 300 KiB budget was not dropped as too slow")
	}
	if q := h.Stats().QueuedBytes; q != 0 {
		t.Fatalf("%d bytes still counted after the only subscriber was dropped", q)
	}
	// Two sharing a 150 KiB quota: together they pass it after three frames.
	q := NewQuota(150 << 10)
	a, _ := h.SubscribeQuota(nil, "", q)
	b, _ := h.SubscribeQuota(nil, "", q)
	for i := 9; i <= 10; i++ {
		h.Publish(ev(i))
	}
	if !gone(a) && !gone(b) {
		t.Fatalf("two subscriptions sharing a 150 KiB quota hold %d bytes and neither was dropped", q.Used())
	}
	a.Close()
	b.Close()
	if q.Used() != 0 {
		t.Fatalf("quota still counts %d bytes after both closed", q.Used())
	}
	// Twelve subscribers within their own budgets pass the 1 MiB total:
	// the largest queues go first, and the total stays bounded.
	var subs []*Subscription
	for range 12 {
		s, _ := h.Subscribe(nil, "")
		subs = append(subs, s)
	}
	taker, _ := h.Subscribe(nil, "")
	for i := 11; i <= 14; i++ {
		h.Publish(ev(i))
		taker.Take() // a reader that keeps up holds nothing
	}
	st := h.Stats()
	if st.PeakQueuedBytes > 1<<20+70_000 {
		t.Fatalf("peak queued %d bytes, over the 1 MiB total plus one frame", st.PeakQueuedBytes)
	}
	dropped := 0
	for _, s := range subs {
		if gone(s) {
			dropped++
		}
	}
	if dropped == 0 || gone(taker) {
		t.Fatalf("%d of 12 stalled subscribers dropped (want some), reader that keeps up dropped: %v", dropped, gone(taker))
	}
	if est, real := jsonSize(mk(key(1), 1, 1, "a\x01\"b", []string{"t", "x\ny"})), len(protocol.AppendJSON(nil, mk(key(1), 1, 1, "a\x01\"b", []string{"t", "x\ny"}))); est < int64(real) {
		t.Fatalf("size bound %d below the encoded size %d", est, real)
	}
}

func gone(s *Subscription) bool {
	select {
	case <-s.Gone():
		return true
	default:
		return false
	}
}

// TestReplayReadBudget: a resumed stream's replay is charged every row
// it reads to its address; when the budget runs out the stream ends
// with a retry: field and where to resume, and resuming there once the
// budget has refilled misses nothing and repeats nothing.
func TestReplayReadBudget(t *testing.T) {
	var mu sync.Mutex
	now := time.Unix(1_700_000_000, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	budget := NewAddrBudget(100)
	r := newRig(t, Options{ReadBudget: budget, Now: clock})
	var seqs []int64
	for i := range 250 {
		seqs = append(seqs, r.append(t, mk(key(1), int64(i), 1, "p")))
	}
	var got []int64
	resume := "0"
	for round := 0; len(got) < len(seqs); round++ {
		if round > 5 {
			t.Fatalf("after %d rounds %d of %d events", round, len(got), len(seqs))
		}
		c := r.connect(t, "", "Last-Event-ID", resume, "X-Addr", "2001:db8::/64")
		for {
			f, ok := c.next(t, 10*time.Second)
			if !ok {
				t.Fatalf("stream ended without a resume point after %d events", len(got))
			}
			if f.isEvent() {
				got = append(got, f.seq(t))
				continue
			}
			if f.comment("live") {
				break
			}
			if f.comment("read budget spent, resume with Last-Event-ID ") {
				if ms, err := strconv.Atoi(f.retry); err != nil || ms < 1000 {
					t.Fatalf("retry field %q, want the milliseconds until the budget refills", f.retry)
				}
				if want := "read budget spent, resume with Last-Event-ID " + c.lastID; !f.comment(want) {
					t.Fatalf("final frame %+v, want %q", f, want)
				}
				resume = c.lastID
				break
			}
		}
		c.close()
		mu.Lock()
		now = now.Add(time.Minute)
		mu.Unlock()
	}
	if !slices.Equal(got, seqs) {
		t.Fatalf("replayed %v, want %v", got, seqs)
	}
	if rows, refused := budget.Counters(); rows != 250 || refused != 2 {
		t.Fatalf("budget charged %d rows, refused %d times; want 250 and 2", rows, refused)
	}
}
