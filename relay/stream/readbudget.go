package stream

import (
	"sync"
	"time"
)

// RowBucket is a token bucket of stored rows, refilled continuously at
// its size per minute; the zero RowBucket is full at its first Fill.
type RowBucket struct {
	Tokens float64
	At     time.Time
}

// Fill brings b up to now.
func (b *RowBucket) Fill(now time.Time, size float64) {
	if b.At.IsZero() {
		b.Tokens, b.At = size, now
		return
	}
	if d := now.Sub(b.At); d > 0 {
		b.Tokens = min(size, b.Tokens+size*d.Minutes())
		b.At = now
	}
}

// Wait is how long b needs to hold n rows again.
func (b *RowBucket) Wait(n, size float64) time.Duration {
	if b.Tokens >= n || size <= 0 {
		return 0
	}
	return time.Duration((n - b.Tokens) / size * float64(time.Minute))
}

// AddrBudget is a read budget per client address: the stored rows the
// replays of one address's streams may read per minute, a RowBucket per
// address. Its methods are safe for concurrent use.
type AddrBudget struct {
	size float64

	mu      sync.Mutex
	addrs   map[string]*RowBucket
	pruned  time.Time
	rows    int64
	refused int64
}

// NewAddrBudget returns a budget of perMinute rows per address.
func NewAddrBudget(perMinute int) *AddrBudget {
	return &AddrBudget{size: float64(perMinute), addrs: map[string]*RowBucket{}}
}

// pruneEvery bounds how often refilled buckets are swept (a full
// bucket is what a new one would be).
const pruneEvery = 10 * time.Second

// Take charges n rows to addr at now; it returns false, with how long
// until addr could pay, when its bucket is short.
func (b *AddrBudget) Take(now time.Time, addr string, n int) (bool, time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	ab := b.addrs[addr]
	if ab == nil {
		if now.Sub(b.pruned) >= pruneEvery {
			b.pruned = now
			for k, x := range b.addrs {
				if x.Fill(now, b.size); x.Tokens >= b.size {
					delete(b.addrs, k)
				}
			}
		}
		ab = &RowBucket{}
		b.addrs[addr] = ab
	}
	ab.Fill(now, b.size)
	if ab.Tokens < float64(n) {
		b.refused++
		return false, ab.Wait(float64(n), b.size)
	}
	ab.Tokens -= float64(n)
	b.rows += int64(n)
	return true, 0
}

// Counters returns the rows charged and the refusals so far.
func (b *AddrBudget) Counters() (rows, refused int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.rows, b.refused
}
