package ws

import (
	"math"
	"net/netip"
	"sync"
	"time"
)

// The REQ read budget. Every stored row a REQ makes the relay read and
// decode (the stored matches of a REQ without after, the replay of one
// with after) is charged, with a fixed reqCost per REQ for its
// statement, against two token buckets: the connection's
// (Options.ReqRows) and its client address's (Options.ReqRowsPerAddr,
// IPv6 keyed by /64), each refilled at its size per minute of the relay
// clock. A REQ the buckets cannot cover is refused with rate_limited; a
// replay that empties them ends with where to resume. So the CPU one
// client address can spend on reads is bounded whatever the number of
// its connections and REQs, and /health and publishes keep theirs.

// reqCost is what a REQ is charged, in rows, before it reads any: the
// cost of its statement.
const reqCost = 10

// rowBucket is a token bucket of rows, refilled continuously at size
// per minute.
type rowBucket struct {
	tokens float64
	at     time.Time
}

// fill brings b up to now; a new bucket starts full.
func (b *rowBucket) fill(now time.Time, size float64) {
	if b.at.IsZero() {
		b.tokens, b.at = size, now
		return
	}
	if d := now.Sub(b.at); d > 0 {
		b.tokens = min(size, b.tokens+size*d.Minutes())
		b.at = now
	}
}

// wait is how long b needs to hold n rows again.
func (b *rowBucket) wait(n, size float64) time.Duration {
	if b.tokens >= n || size <= 0 {
		return 0
	}
	return time.Duration((n - b.tokens) / size * float64(time.Minute))
}

// budget holds the per-address buckets and the read counters.
type budget struct {
	mu     sync.Mutex
	addrs  map[string]*rowBucket
	pruned time.Time
	// rows is every row charged; refused counts REQs refused or ended
	// for want of budget.
	rows    int64
	refused int64
}

// pruneEvery bounds how often full buckets are swept from addrs (a
// full bucket is what a new one would be, so dropping it loses
// nothing).
const pruneEvery = 10 * time.Second

// take charges n rows to c and its address, both or neither; it
// returns false, with how long until both could pay, when either is
// short.
func (m *Module) take(c *conn, n int) (bool, time.Duration) {
	now := m.core.Config().Now()
	connSize, addrSize := float64(m.opts.ReqRows), float64(m.opts.ReqRowsPerAddr)
	b := &m.budget
	b.mu.Lock()
	defer b.mu.Unlock()
	ab := b.addrs[c.addr]
	if ab == nil {
		b.prune(now, addrSize)
		ab = &rowBucket{}
		b.addrs[c.addr] = ab
	}
	c.rows.fill(now, connSize)
	ab.fill(now, addrSize)
	need := float64(n)
	if c.rows.tokens < need || ab.tokens < need {
		b.refused++
		return false, max(c.rows.wait(need, connSize), ab.wait(need, addrSize))
	}
	c.rows.tokens -= need
	ab.tokens -= need
	b.rows += int64(n)
	return true, 0
}

// refund gives back n rows charged to c but not read.
func (m *Module) refund(c *conn, n int) {
	if n <= 0 {
		return
	}
	b := &m.budget
	b.mu.Lock()
	defer b.mu.Unlock()
	c.rows.tokens += float64(n)
	if ab := b.addrs[c.addr]; ab != nil {
		ab.tokens += float64(n)
	}
	b.rows -= int64(n)
}

// prune drops the buckets that have refilled; the caller holds b.mu.
func (b *budget) prune(now time.Time, size float64) {
	if now.Sub(b.pruned) < pruneEvery {
		return
	}
	b.pruned = now
	for k, ab := range b.addrs {
		if ab.fill(now, size); ab.tokens >= size {
			delete(b.addrs, k)
		}
	}
}

// counters returns the rows charged and the REQs refused so far.
func (b *budget) counters() (rows, refused int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.rows, b.refused
}

// addrKey is the key of a client address for per-address limits: an
// IPv6 address by its /64 (one host usually holds a whole /64, so
// rotating within it must not buy a fresh allowance), anything else as
// is. (A local helper until the relay core has a shared one.)
func addrKey(ip string) string {
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return ip
	}
	a = a.Unmap()
	if a.Is4() {
		return a.String()
	}
	p, _ := a.WithZone("").Prefix(64)
	return p.String()
}

// seconds rounds d up to whole seconds, at least 1.
func seconds(d time.Duration) int64 {
	return max(1, int64(math.Ceil(d.Seconds())))
}
