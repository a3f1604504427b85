package reconcile

import (
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// millionFixture is two sets of a million shared items with 50 differences
// each way, built once for all benchmarks.
var millionFixture = sync.OnceValues(func() (client, server *Index) {
	r := rand.New(rand.NewPCG(5, 6))
	c, s := splitSets(r, 1_000_000, 50, 50, epoch, 365*86400)
	return NewIndex(c), NewIndex(s)
})

// BenchmarkIndexAdd inserts into an index of a million items: at random
// positions, in created_at order as live events arrive, and all in one
// second after the rest (as `anp2 bench` publishes: random ids tied on
// created_at), reporting the CPU time per insert beside the wall time.
func BenchmarkIndexAdd(b *testing.B) {
	for _, order := range []string{"random", "in-order", "same-second"} {
		b.Run(order, func(b *testing.B) {
			r := rand.New(rand.NewPCG(13, 14))
			x := NewIndex(randItems(r, 1_000_000, epoch, month))
			items := randItems(r, b.N, epoch, month)
			for i := range items {
				switch order {
				case "in-order":
					items[i].CreatedAt = epoch + month + int64(i)
				case "same-second":
					items[i].CreatedAt = epoch + month
				}
			}
			b.ResetTimer()
			cpu0 := cpuTime()
			for i := range b.N {
				x.Add(items[i])
			}
			b.StopTimer()
			b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
		})
	}
}

// cpuTime is the process's CPU time (every thread), which a loaded
// machine does not inflate as it does the wall time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkNewIndex builds an index from a million sorted items, as the
// relay does for a filtered sync from a query ordered by (created_at, id).
func BenchmarkNewIndex(b *testing.B) {
	r := rand.New(rand.NewPCG(15, 16))
	items := sortedItems(randItems(r, 1_000_000, epoch, month))
	b.ResetTimer()
	for range b.N {
		NewIndex(items)
	}
}

// BenchmarkRespond is the server's work for a whole reconciliation against
// an index of a million items: every reply of the exchange, per op.
func BenchmarkRespond(b *testing.B) {
	client, server := millionFixture()
	for _, tc := range []struct {
		name   string
		client *Index
	}{{"0-differences", server}, {"100-differences", client}} {
		b.Run(tc.name, func(b *testing.B) {
			msgs := clientMessages(b, tc.client, server)
			b.ResetTimer()
			wire := 0
			for range b.N {
				wire = 0
				for _, m := range msgs {
					reply, err := Respond(server, m)
					if err != nil {
						b.Fatal(err)
					}
					wire += len(m) + len(reply)
				}
			}
			b.ReportMetric(float64(len(msgs)), "roundtrips")
			b.ReportMetric(float64(wire), "wire-bytes")
		})
	}
}

// BenchmarkSync is a whole exchange, both sides, at a million items with
// 100 differences.
func BenchmarkSync(b *testing.B) {
	client, server := millionFixture()
	for range b.N {
		if _, err := runSync(client, server, Params{}, Params{}); err != nil {
			b.Fatal(err)
		}
	}
}

// clientMessages records the messages a client sends during a whole
// exchange.
func clientMessages(b *testing.B, client, server *Index) [][]byte {
	sess := NewSession(client)
	var msgs [][]byte
	for m := sess.Initiate(); m != nil; {
		msgs = append(msgs, m)
		reply, err := Respond(server, m)
		if err != nil {
			b.Fatal(err)
		}
		if m, _, _, err = sess.Reconcile(reply); err != nil {
			b.Fatal(err)
		}
	}
	return msgs
}

// BenchmarkIndexHas looks items up in an index of a million: absent ones
// (every new publish's duplicate check), absent ones newer than all (a
// live publish), and present ones.
func BenchmarkIndexHas(b *testing.B) {
	client, _ := millionFixture()
	r := rand.New(rand.NewPCG(17, 18))
	absent := randItems(r, 4096, epoch, 365*86400)
	newest := randItems(r, 4096, epoch+400*86400, 86400) // after every item held, as live events are
	present := make([]Item, 4096)
	for i := range present {
		present[i] = client.at(r.IntN(client.Len()))
	}
	for _, tc := range []struct {
		name  string
		items []Item
		want  bool
	}{{"absent", absent, false}, {"newest", newest, false}, {"present", present, true}} {
		b.Run(tc.name, func(b *testing.B) {
			for i := range b.N {
				if client.Has(tc.items[i%len(tc.items)]) != tc.want && tc.want {
					b.Fatal("present item not found")
				}
			}
		})
	}
}

// BenchmarkIndexBytes reports the heap an index takes per item at 100,000
// items (ANP2_BENCH_EVENTS sets another number): "built" by NewIndex from
// a list, "live" by Add in arrival order as the relay's index grows (a
// mirror's backfill out of order now and then, one in 50), the way the
// relay's index of every stored event is made.
func BenchmarkIndexBytes(b *testing.B) {
	n := 100_000
	if v, err := strconv.Atoi(os.Getenv("ANP2_BENCH_EVENTS")); err == nil && v > 0 {
		n = v
	}
	for _, how := range []string{"built", "live"} {
		b.Run(how, func(b *testing.B) {
			r := rand.New(rand.NewPCG(17, 18))
			items := randItems(r, n, epoch, month)
			for i := range items {
				if how == "live" && i%50 != 0 {
					items[i].CreatedAt = epoch + month + int64(i/20)
				}
			}
			for range b.N {
				runtime.GC()
				var m0, m1 runtime.MemStats
				runtime.ReadMemStats(&m0)
				var x *Index
				if how == "built" {
					x = NewIndex(items)
				} else {
					x = NewIndex(nil)
					for _, it := range items {
						x.Add(it)
					}
				}
				runtime.GC()
				runtime.ReadMemStats(&m1)
				runtime.KeepAlive(x)
				b.ReportMetric(float64(int64(m1.HeapAlloc)-int64(m0.HeapAlloc))/float64(n), "B/item")
			}
		})
	}
}
