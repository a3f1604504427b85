package sqlite

import "sync"

// bodyCache keeps recently read event bodies by seq, up to a byte budget.
// A stored body never changes, so entries are only ever evicted, oldest
// first, never invalidated. Sharded so concurrent readers rarely meet.
type bodyCache struct {
	shards [16]cacheShard
}

type cacheShard struct {
	mu     sync.Mutex
	m      map[int64][]byte
	order  []int64 // insertion order, for eviction
	head   int     // order[head:] are live
	bytes  int
	budget int
}

func newBodyCache(budget int) *bodyCache {
	c := &bodyCache{}
	for i := range c.shards {
		c.shards[i] = cacheShard{m: map[int64][]byte{}, budget: budget / len(c.shards)}
	}
	return c
}

func (c *bodyCache) shard(seq int64) *cacheShard { return &c.shards[uint64(seq)%uint64(len(c.shards))] }

func (c *bodyCache) get(seq int64) ([]byte, bool) {
	sh := c.shard(seq)
	sh.mu.Lock()
	b, ok := sh.m[seq]
	sh.mu.Unlock()
	return b, ok
}

// put stores b for seq (callers must not modify b afterwards).
func (c *bodyCache) put(seq int64, b []byte) {
	sh := c.shard(seq)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if _, ok := sh.m[seq]; ok || len(b) > sh.budget {
		return
	}
	sh.m[seq] = b
	sh.order = append(sh.order, seq)
	sh.bytes += len(b)
	for sh.bytes > sh.budget {
		old := sh.order[sh.head]
		sh.head++
		sh.bytes -= len(sh.m[old])
		delete(sh.m, old)
	}
	if sh.head > len(sh.order)/2 && sh.head > 1024 {
		sh.order = append(sh.order[:0], sh.order[sh.head:]...)
		sh.head = 0
	}
}
