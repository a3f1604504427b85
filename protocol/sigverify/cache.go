package sigverify

import (
	"crypto/subtle"
	"hash/maphash"
	"sync"
	"sync/atomic"

	"filippo.io/edwards25519"
	"filippo.io/edwards25519/field"
)

// DefaultBytes is the table memory of Default: 3,276 keys' tables.
const DefaultBytes = 96 << 20

// Default is the cache protocol.Event.CheckSig uses.
var Default = New(DefaultBytes)

const shards = 16

// Cache verifies signatures (Verify) and remembers, per public key, the
// decoded point and, once two of its signatures have verified within a
// sweep window, its table. Tables are limited by memory (SetMaxBytes); when they are
// all in use, a sweep every 4×(table limit) verifications drops the
// tables of keys used fewer than twice since the last sweep, so a steady
// set of busy keys keeps its tables and a passing key does not push them
// out. Keys are limited to 8× the table count (at least 4,096) and evicted
// at random. Keys are spread over shards by a hash keyed with a random
// seed per cache, so that no one can choose keys that all land in one
// shard and push others' keys and tables out of it. A Cache is safe for
// concurrent use.
type Cache struct {
	shards    [shards]shard
	seed      maphash.Seed
	maxTables atomic.Int64
	tables    atomic.Int64
	calls     atomic.Int64
	fast      atomic.Int64
	built     atomic.Int64
}

type shard struct {
	mu   sync.Mutex
	keys map[[32]byte]*key
}

type key struct {
	minusA  edwards25519.Point
	uses    atomic.Int32 // valid signatures since the last sweep
	tab     atomic.Pointer[table]
	evicted atomic.Bool
}

// drop takes e's table away and reports whether it had one.
func (e *key) drop() bool { return e.tab.Swap(nil) != nil }

// New returns a cache whose tables take at most maxBytes (0: decoded keys
// only, no tables).
func New(maxBytes int) *Cache {
	c := &Cache{seed: maphash.MakeSeed()}
	for i := range c.shards {
		c.shards[i].keys = make(map[[32]byte]*key)
	}
	c.SetMaxBytes(maxBytes)
	return c
}

// SetMaxBytes changes the table memory limit; tables over a lowered limit
// are dropped by the next sweep.
func (c *Cache) SetMaxBytes(n int) { c.maxTables.Store(int64(max(n, 0) / tableBytes)) }

// Stats is what a Cache holds and has done.
type Stats struct {
	Keys, Tables  int
	Verifications int64 // calls to Verify
	TableChecks   int64 // of those, computed from tables
	TablesBuilt   int64
}

// Stats returns the cache's counters.
func (c *Cache) Stats() Stats {
	st := Stats{Tables: int(c.tables.Load()), Verifications: c.calls.Load(), TableChecks: c.fast.Load(), TablesBuilt: c.built.Load()}
	for i := range c.shards {
		sh := &c.shards[i]
		sh.mu.Lock()
		st.Keys += len(sh.keys)
		sh.mu.Unlock()
	}
	return st
}

// Verify reports whether sig is pub's Ed25519 signature of msg, by
// libsodium's rules (see the package comment; false, not a panic, for a
// key that is not 32 bytes).
func (c *Cache) Verify(pub, msg, sig []byte) bool {
	var ok [1]bool
	c.VerifyBatch([]Job{{Pub: pub, Msg: msg, Sig: sig}}, ok[:])
	return ok[0]
}

// prepare counts a verification under pub and returns pub's entry (nil
// when pub is not a point) and its table, built now if the key has earned
// one; nil when it has none.
func (c *Cache) prepare(pub []byte) (*key, *table) {
	e := c.key(pub)
	if e == nil {
		return nil, nil
	}
	if n := c.calls.Add(1); n%c.window() == 0 && c.full() {
		c.sweep()
	}
	t := e.tab.Load()
	if t == nil && e.uses.Load() >= 2 {
		t = c.build(e)
	}
	return e, t
}

// full reports whether the tables are at (or over) their limit.
func (c *Cache) full() bool {
	n := c.tables.Load()
	return n > 0 && n >= c.maxTables.Load()
}

func (c *Cache) window() int64 { return max(4*c.maxTables.Load(), 1024) }

// key returns pub's entry, decoding and adding it when absent; nil when
// pub is not the encoding of a point.
func (c *Cache) key(pub []byte) *key {
	id := [32]byte(pub)
	sh := &c.shards[c.shardOf(&id)]
	sh.mu.Lock()
	e := sh.keys[id]
	sh.mu.Unlock()
	if e != nil {
		return e
	}
	a, err := new(edwards25519.Point).SetBytes(pub)
	if err != nil {
		return nil
	}
	e = &key{}
	e.minusA.Negate(a)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if old := sh.keys[id]; old != nil {
		return old
	}
	if len(sh.keys) >= int(max(8*c.maxTables.Load(), 4096))/shards {
		for victim, v := range sh.keys {
			v.evicted.Store(true)
			if v.drop() {
				c.tables.Add(-1)
			}
			delete(sh.keys, victim)
			break
		}
	}
	sh.keys[id] = e
	return e
}

// shardOf returns the shard that holds key id, chosen by the cache's
// keyed hash rather than by any byte of the key.
func (c *Cache) shardOf(id *[32]byte) uint64 {
	return maphash.Bytes(c.seed, id[:]) % shards
}

// build gives e a table if the limit allows; it returns e's table or nil.
func (c *Cache) build(e *key) *table {
	if c.tables.Add(1) > c.maxTables.Load() {
		c.tables.Add(-1)
		return nil
	}
	t := newTable(new(edwards25519.Point).Negate(&e.minusA))
	if !e.tab.CompareAndSwap(nil, t) {
		c.tables.Add(-1)
		return e.tab.Load()
	}
	c.built.Add(1)
	// An entry evicted meanwhile is gone from the map; its table must
	// not stay counted (whichever of evictor and builder drops it counts).
	if e.evicted.Load() && e.drop() {
		c.tables.Add(-1)
	}
	return t
}

// sweep drops the tables of keys used fewer than twice since the last
// sweep (and any over the limit) and starts a new window.
func (c *Cache) sweep() {
	for i := range c.shards {
		sh := &c.shards[i]
		sh.mu.Lock()
		for _, e := range sh.keys {
			used := e.uses.Swap(0)
			if (used < 2 || c.tables.Load() > c.maxTables.Load()) && e.drop() {
				c.tables.Add(-1)
			}
		}
		sh.mu.Unlock()
	}
}

// Job is one signature for VerifyBatch: is Sig Pub's signature of Msg?
type Job struct{ Pub, Msg, Sig []byte }

// VerifyBatch sets ok[i] to whether jobs[i].Sig is jobs[i].Pub's signature
// of jobs[i].Msg, by libsodium's rules (as Verify), for every i (ok is
// at least as long as jobs). Answers computed from tables share one field
// inversion: each such sum R' is brought to affine form with Montgomery's
// trick (three multiplications instead of an inversion of about 265),
// which saves about a sixth of a table check.
func (c *Cache) VerifyBatch(jobs []Job, ok []bool) {
	type pending struct {
		i   int
		e   *key
		sum extended
	}
	sums := make([]pending, 0, len(jobs))
	for i, j := range jobs {
		ok[i] = false
		k, s, good := parse(j.Pub, j.Msg, j.Sig)
		if !good {
			continue
		}
		e, t := c.prepare(j.Pub)
		if e == nil {
			continue // not a point
		}
		// Only signatures that verify earn a key its table (uses): a
		// stream of forgeries under one key costs no more than verifying
		// them.
		if t == nil {
			if ok[i] = verifyChain(&e.minusA, k, s, j.Sig[:32]); ok[i] {
				e.uses.Add(1)
			}
			continue
		}
		c.fast.Add(1)
		sum := tableSum(t, k, s)
		if sum.Z.Equal(new(field.Element)) == 1 {
			// Not a point (impossible: the formulas are complete); the
			// single check answers as the library would.
			if ok[i] = verifyTable(t, &e.minusA, k, s, j.Sig[:32]); ok[i] {
				e.uses.Add(1)
			}
			continue
		}
		sums = append(sums, pending{i: i, e: e, sum: sum})
	}
	if len(sums) == 0 {
		return
	}
	// inv[n] holds Z₀·…·Z_{n−1} until it becomes 1/Zₙ.
	inv := make([]field.Element, len(sums))
	var acc field.Element
	acc.One()
	for n := range sums {
		inv[n] = acc
		acc.Multiply(&acc, &sums[n].sum.Z)
	}
	acc.Invert(&acc)
	for n := len(sums) - 1; n >= 0; n-- {
		inv[n].Multiply(&inv[n], &acc)
		acc.Multiply(&acc, &sums[n].sum.Z)
	}
	for n := range sums {
		p := &sums[n]
		r := jobs[p.i].Sig[:32]
		if ok[p.i] = subtle.ConstantTimeCompare(r, encode(&p.sum, &inv[n])) == 1; ok[p.i] {
			p.e.uses.Add(1)
		}
	}
}

// encode returns p's encoding given zInv = 1/Z, exactly as
// edwards25519.Point.Bytes writes it: y, with x's sign in the top bit.
func encode(p *extended, zInv *field.Element) []byte {
	var x, y field.Element
	x.Multiply(&p.X, zInv)
	y.Multiply(&p.Y, zInv)
	out := y.Bytes()
	out[31] |= byte(x.IsNegative() << 7)
	return out
}
