package sigverify

import (
	"math/rand/v2"
	"testing"

	"filippo.io/edwards25519"
)

// pointsWithFirstByte returns n distinct encodings of points whose first
// byte is b: what an attacker aiming at a shard chosen by the first byte
// would send.
func pointsWithFirstByte(b byte, n int) [][]byte {
	rng := rand.New(rand.NewPCG(uint64(b), 7))
	var out [][]byte
	for len(out) < n {
		enc := make([]byte, 32)
		for i := range enc {
			enc[i] = byte(rng.Uint32())
		}
		enc[0], enc[31] = b, enc[31]&0x7f
		if _, err := new(edwards25519.Point).SetBytes(enc); err == nil && !WeakKey(enc) {
			out = append(out, enc)
		}
	}
	return out
}

// TestShardsAreKeyed sends 512 keys that share their first byte: they
// must spread over the shards (a keyed hash chooses the shard), so that
// none holds much more than its share, and two caches must place them
// differently (the key is per cache, not a constant).
func TestShardsAreKeyed(t *testing.T) {
	keys := pointsWithFirstByte(0x42, 512)
	place := func(c *Cache) [shards]int {
		for _, k := range keys {
			if c.key(k) == nil {
				t.Fatalf("%x is a point and was not kept", k)
			}
		}
		var n [shards]int
		for i := range c.shards {
			n[i] = len(c.shards[i].keys)
		}
		return n
	}
	a := place(New(0))
	// 32 per shard on average; a binomial(512, 1/16) exceeds 64 or
	// falls to 8 with probability below 10⁻⁹.
	for i, n := range a {
		if n < 8 || n > 64 {
			t.Fatalf("shard %d holds %d of 512 keys sharing a first byte: %v", i, n, a)
		}
	}
	if b := place(New(0)); a == b {
		t.Fatalf("two caches placed the keys identically: %v", a)
	}
}
