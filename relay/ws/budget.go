package ws

import (
	"math"
	"sync"
	"time"

	"github.com/anp2net/relay/relay/stream"
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

// budget holds the per-address buckets and the read counters.
type budget struct {
	mu     sync.Mutex
	addrs  map[string]*stream.RowBucket
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
		ab = &stream.RowBucket{}
		b.addrs[c.addr] = ab
	}
	c.rows.Fill(now, connSize)
	ab.Fill(now, addrSize)
	need := float64(n)
	if c.rows.Tokens < need || ab.Tokens < need {
		b.refused++
		return false, max(c.rows.Wait(need, connSize), ab.Wait(need, addrSize))
	}
	c.rows.Tokens -= need
	ab.Tokens -= need
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
	c.rows.Tokens += float64(n)
	if ab := b.addrs[c.addr]; ab != nil {
		ab.Tokens += float64(n)
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
		if ab.Fill(now, size); ab.Tokens >= size {
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

// seconds rounds d up to whole seconds, at least 1.
func seconds(d time.Duration) int64 {
	return max(1, int64(math.Ceil(d.Seconds())))
}
