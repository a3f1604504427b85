package credit

import (
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/tasks"
	tt "github.com/anp2net/relay/tasks/taskstest"
)

var (
	corpusOnce sync.Once
	corpus     []*protocol.Event
)

func benchLedger(b *testing.B) (*tasks.Fold, *Ledger) {
	b.Helper()
	corpusOnce.Do(func() { corpus = tt.Corpus(1, 10000, t0) })
	f := tasks.New(tt.Weight)
	for _, e := range corpus {
		f.Add(e)
	}
	l := New(f, "")
	l.Account("", t0, tt.Weight) // initial sync
	b.Logf("%d tasks, %d events, GOMAXPROCS %d", f.Len(), len(corpus), runtime.GOMAXPROCS(0))
	return f, l
}

// BenchmarkAccount is GET /agents/{id}/credit for the issuer (about 9,000
// of the 10k tasks, 500 of them weight-dependent), the treasury (every
// fee), and a provider.
func BenchmarkAccount(b *testing.B) {
	_, l := benchLedger(b)
	for _, who := range []struct{ name, id string }{
		{"issuer", tt.NewAgent("taskreq").ID},
		{"treasury", DefaultTreasury},
		{"provider", tt.NewAgent("provider3").ID},
	} {
		b.Run(who.name, func(b *testing.B) {
			lat := make([]time.Duration, 0, b.N)
			for range b.N {
				start := time.Now()
				l.Account(who.id, t0+3600, tt.Weight)
				lat = append(lat, time.Since(start))
			}
			reportP99(b, lat)
		})
	}
}

// BenchmarkAccountAfterWrite interleaves one new event with each query, so
// every query first brings the cache up to date.
func BenchmarkAccountAfterWrite(b *testing.B) {
	f, l := benchLedger(b)
	issuer := tt.NewAgent("taskreq")
	extra := make([]*protocol.Event, 0, 512)
	for i := range 512 {
		extra = append(extra, tt.Request(issuer, t0+int64(i), t0+7200, tt.Reward{Amount: 10}, false))
	}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		if i < len(extra) {
			f.Add(extra[i])
		} else {
			f.Remove(extra[i%len(extra)])
			f.Add(extra[i%len(extra)])
		}
		start := time.Now()
		l.Account(issuer.ID, t0+3600, tt.Weight)
		lat = append(lat, time.Since(start))
	}
	reportP99(b, lat)
}

func reportP99(b *testing.B, lat []time.Duration) {
	slices.Sort(lat)
	if len(lat) > 0 {
		b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "p99-ns")
	}
}

// BenchmarkInitialSync builds the cache from a cold ledger over 10k tasks.
func BenchmarkInitialSync(b *testing.B) {
	f, _ := benchLedger(b)
	b.ResetTimer()
	for range b.N {
		New(f, "").Account("", t0, nil)
	}
}

// BenchmarkDigest hashes every account.
func BenchmarkDigest(b *testing.B) {
	_, l := benchLedger(b)
	b.ResetTimer()
	for range b.N {
		l.Digest(t0+3600, tt.Weight)
	}
}
