package reconcile

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"math"
	"math/bits"
)

// Item is one event as reconciliation sees it. Items are ordered by
// CreatedAt, then by ID bytewise. CreatedAt must not be negative.
type Item struct {
	CreatedAt int64
	ID        [32]byte
}

// Compare returns -1, 0 or +1 as a sorts before, equal to or after b.
// The ids' first 8 bytes compare as one big-endian number, which decides
// between random ids without a call to bytes.Compare (a publish's
// searches compare items tied on created_at about thirty times).
func (a Item) Compare(b Item) int {
	if c := cmp.Compare(a.CreatedAt, b.CreatedAt); c != 0 {
		return c
	}
	if c := cmp.Compare(binary.BigEndian.Uint64(a.ID[:8]), binary.BigEndian.Uint64(b.ID[:8])); c != 0 {
		return c
	}
	return bytes.Compare(a.ID[8:], b.ID[8:])
}

// Bound is a point in the item order: the range [lower, upper) holds the
// items it with lower <= it < upper. Timestamp is an item's CreatedAt as an
// unsigned number; ID is an id prefix padded with zero bytes. Infinity, the
// bound above every item, has Timestamp math.MaxUint64.
type Bound struct {
	Timestamp uint64
	ID        [32]byte
}

// Infinity is the bound that sorts after every item.
var Infinity = Bound{Timestamp: math.MaxUint64}

// BoundOf returns the bound equal to it: the first bound that does not sort
// below it.
func BoundOf(it Item) Bound { return Bound{Timestamp: uint64(it.CreatedAt), ID: it.ID} }

// IsInfinity reports whether b is Infinity.
func (b Bound) IsInfinity() bool { return b.Timestamp == math.MaxUint64 }

// Compare returns -1, 0 or +1 as b sorts before, equal to or after c.
func (b Bound) Compare(c Bound) int {
	if x := cmp.Compare(b.Timestamp, c.Timestamp); x != 0 {
		return x
	}
	if b.IsInfinity() {
		return 0 // the id of infinity carries no meaning
	}
	return bytes.Compare(b.ID[:], c.ID[:])
}

// cmpItem compares b with the bound equal to it.
func (b Bound) cmpItem(it Item) int {
	if x := cmp.Compare(b.Timestamp, uint64(it.CreatedAt)); x != 0 {
		return x
	}
	return bytes.Compare(b.ID[:], it.ID[:])
}

// prefixLen is the number of id bytes a bound needs on the wire: the id
// without its trailing zero bytes (none for Infinity).
func (b Bound) prefixLen() int {
	if b.IsInfinity() {
		return 0
	}
	n := len(b.ID)
	for n > 0 && b.ID[n-1] == 0 {
		n--
	}
	return n
}

// minimalBound returns the shortest bound b with prev < b <= next, for
// adjacent items prev < next: next's timestamp alone when the timestamps
// differ, otherwise next's id cut one byte past the prefix it shares with
// prev.
func minimalBound(prev, next Item) Bound {
	b := Bound{Timestamp: uint64(next.CreatedAt)}
	if prev.CreatedAt != next.CreatedAt {
		return b
	}
	i := 0
	for i < len(next.ID) && next.ID[i] == prev.ID[i] {
		i++
	}
	copy(b.ID[:], next.ID[:min(i+1, len(next.ID))])
	return b
}

// Fingerprint is the 16-byte digest of a set of ids.
type Fingerprint [16]byte

// accumulator is the sum of ids read as 256-bit little-endian integers,
// mod 2^256, as four little-endian 64-bit words.
type accumulator [4]uint64

func (a *accumulator) addID(id *[32]byte) {
	var c uint64
	a[0], c = bits.Add64(a[0], binary.LittleEndian.Uint64(id[0:]), 0)
	a[1], c = bits.Add64(a[1], binary.LittleEndian.Uint64(id[8:]), c)
	a[2], c = bits.Add64(a[2], binary.LittleEndian.Uint64(id[16:]), c)
	a[3], _ = bits.Add64(a[3], binary.LittleEndian.Uint64(id[24:]), c)
}

func (a *accumulator) subID(id *[32]byte) {
	var c uint64
	a[0], c = bits.Sub64(a[0], binary.LittleEndian.Uint64(id[0:]), 0)
	a[1], c = bits.Sub64(a[1], binary.LittleEndian.Uint64(id[8:]), c)
	a[2], c = bits.Sub64(a[2], binary.LittleEndian.Uint64(id[16:]), c)
	a[3], _ = bits.Sub64(a[3], binary.LittleEndian.Uint64(id[24:]), c)
}

func (a *accumulator) add(b *accumulator) {
	var c uint64
	a[0], c = bits.Add64(a[0], b[0], 0)
	a[1], c = bits.Add64(a[1], b[1], c)
	a[2], c = bits.Add64(a[2], b[2], c)
	a[3], _ = bits.Add64(a[3], b[3], c)
}

func (a *accumulator) sub(b *accumulator) {
	var c uint64
	a[0], c = bits.Sub64(a[0], b[0], 0)
	a[1], c = bits.Sub64(a[1], b[1], c)
	a[2], c = bits.Sub64(a[2], b[2], c)
	a[3], _ = bits.Sub64(a[3], b[3], c)
}

// fingerprint is SHA-256(sum || varint(count)) cut to 16 bytes.
func (a *accumulator) fingerprint(count int) Fingerprint {
	buf := make([]byte, 32, 32+maxVarintLen)
	for i, w := range a {
		binary.LittleEndian.PutUint64(buf[8*i:], w)
	}
	buf = appendVarint(buf, uint64(count))
	sum := sha256.Sum256(buf)
	var fp Fingerprint
	copy(fp[:], sum[:])
	return fp
}

// FingerprintOf returns the fingerprint of a set of distinct ids.
func FingerprintOf(ids [][32]byte) Fingerprint {
	var a accumulator
	for i := range ids {
		a.addID(&ids[i])
	}
	return a.fingerprint(len(ids))
}
