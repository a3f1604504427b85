package discovery

import (
	"math/bits"
	"math/rand/v2"
)

// u32map maps uint32 keys to non-zero uint32 values: an open-addressing
// table (linear probing, at most half full) whose deletions shift the
// following entries back instead of leaving tombstones, so keys that come
// and go — a post's rare buckets entering and leaving an agent's window —
// never lengthen a probe or force a rehash, as they did in a Go map. The
// zero value is an empty map. Iteration (slots) is in no meaningful order.
type u32map struct {
	slots []u32slot // a power of two long, or nil
	shift uint8     // 32 − log2(len(slots))
	n     int
}

// u32slot is one entry; v == 0 marks an empty slot.
type u32slot struct{ k, v uint32 }

// home is k's first slot: the top bits of k mixed with the process's
// seed (murmur3's finaliser), so the buckets of an agent's posts, which it
// picks through its words, cannot be chosen to fall in one probe run.
func (m *u32map) home(k uint32) int {
	k ^= hashSeed
	k ^= k >> 16
	k *= 0x85ebca6b
	k ^= k >> 13
	k *= 0xc2b2ae35
	k ^= k >> 16
	return int(k >> m.shift)
}

var hashSeed = rand.Uint32()

// len is the number of entries.
func (m *u32map) len() int { return m.n }

// get returns k's value, or 0.
func (m *u32map) get(k uint32) uint32 {
	if m.n == 0 {
		return 0
	}
	mask := len(m.slots) - 1
	for i := m.home(k); ; i = (i + 1) & mask {
		switch s := m.slots[i]; {
		case s.v == 0:
			return 0
		case s.k == k:
			return s.v
		}
	}
}

// set sets k's value to v; v == 0 deletes k.
func (m *u32map) set(k, v uint32) {
	if v == 0 {
		m.del(k)
		return
	}
	if 2*(m.n+1) > len(m.slots) {
		m.resize(max(2, 2*len(m.slots)))
	}
	mask := len(m.slots) - 1
	for i := m.home(k); ; i = (i + 1) & mask {
		switch s := &m.slots[i]; {
		case s.v == 0:
			*s = u32slot{k, v}
			m.n++
			return
		case s.k == k:
			s.v = v
			return
		}
	}
}

// add adds delta to k's value (absent: 0) in one probe and returns the
// value before and after; a result of 0 deletes k.
func (m *u32map) add(k uint32, delta int64) (old, now uint32) {
	if m.n > 0 {
		mask := len(m.slots) - 1
		for i := m.home(k); m.slots[i].v != 0; i = (i + 1) & mask {
			if s := &m.slots[i]; s.k == k {
				old, now = s.v, uint32(int64(s.v)+delta)
				if now == 0 {
					m.delAt(i)
				} else {
					s.v = now
				}
				return old, now
			}
		}
	}
	now = uint32(delta)
	m.set(k, now)
	return 0, now
}

func (m *u32map) del(k uint32) {
	if m.n == 0 {
		return
	}
	mask := len(m.slots) - 1
	i := m.home(k)
	for ; m.slots[i].k != k || m.slots[i].v == 0; i = (i + 1) & mask {
		if m.slots[i].v == 0 {
			return
		}
	}
	m.delAt(i)
}

// delAt empties slot i.
func (m *u32map) delAt(i int) {
	mask := len(m.slots) - 1
	// Shift back each following entry of the run that may move into the
	// hole: one whose home is not cyclically within (i, j].
	for j := (i + 1) & mask; m.slots[j].v != 0; j = (j + 1) & mask {
		if h := m.home(m.slots[j].k); (j-h)&mask >= (j-i)&mask {
			m.slots[i] = m.slots[j]
			i = j
		}
	}
	m.slots[i] = u32slot{}
	m.n--
	if len(m.slots) > 8 && 8*m.n < len(m.slots) {
		m.resize(len(m.slots) / 2)
	}
}

func (m *u32map) resize(size int) {
	old := m.slots
	m.slots = make([]u32slot, size)
	m.shift = uint8(32 - bits.TrailingZeros(uint(size)))
	m.n = 0
	for _, s := range old {
		if s.v != 0 {
			m.set(s.k, s.v)
		}
	}
}
