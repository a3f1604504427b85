package sqlite

import (
	"bytes"
	"context"
	"testing"

	"github.com/anp2net/relay/protocol"
)

// TestBodyCacheStaysWithinBudget fills the cache far past its budget: each
// shard keeps its newest entries and never holds more bytes than its share.
func TestBodyCacheStaysWithinBudget(t *testing.T) {
	c := newBodyCache(16 * 1000)
	body := func(seq int64) []byte { return bytes.Repeat([]byte{byte(seq)}, 100) }
	for seq := int64(1); seq <= 5000; seq++ {
		c.put(seq, body(seq))
		c.put(seq, body(seq)) // a second put of the same seq changes nothing
	}
	for i := range c.shards {
		sh := &c.shards[i]
		if sh.bytes > sh.budget || len(sh.m) != sh.budget/100 || len(sh.m) != len(sh.order)-sh.head {
			t.Fatalf("shard %d: %d bytes in %d entries (budget %d, order %d from %d)", i, sh.bytes, len(sh.m), sh.budget, len(sh.order), sh.head)
		}
	}
	for seq := int64(5000 - 16*9); seq <= 5000; seq++ {
		if b, ok := c.get(seq); !ok || !bytes.Equal(b, body(seq)) {
			t.Fatalf("recent seq %d evicted or wrong", seq)
		}
	}
	if _, ok := c.get(1); ok {
		t.Fatal("oldest entry kept past the budget")
	}
}

// TestCommittedBodiesAreCached: an append puts its body in the cache (what
// newest-first reads ask for next); an append during a bulk load does not.
func TestCommittedBodiesAreCached(t *testing.T) {
	s := open(t)
	ctx := context.Background()
	e := ev(key(1), 100, 1, "fresh")
	r, err := s.Append(ctx, Record{Event: e})
	if err != nil {
		t.Fatal(err)
	}
	if b, ok := s.cache.get(r.Seq); !ok || !bytes.Equal(b, protocol.AppendJSON(nil, e)) {
		t.Fatalf("committed body not cached: %q %v", b, ok)
	}
	if err := s.BeginBulk(ctx); err != nil {
		t.Fatal(err)
	}
	r, err = s.Append(ctx, Record{Event: ev(key(1), 101, 1, "bulk")})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s.cache.get(r.Seq); ok {
		t.Fatal("a bulk load filled the cache")
	}
	if err := s.EndBulk(nil); err != nil {
		t.Fatal(err)
	}
}
