// Package sigverify checks Ed25519 signatures with exactly the rules of
// crypto/ed25519.Verify, faster for keys it has seen before.
//
// Verification computes R' = [S]B - [k]A and compares its encoding with
// the signature's R. The standard library does that with one joint
// double-and-add chain (253 doublings). For a key seen again, a Cache
// keeps multiples of A by powers of 256 (a 40 KiB table, built once at
// the cost of about two verifications), and the basepoint has the same
// table, so R' is a sum of 64 table entries, 4 doublings and 64 more
// entries: about 1.8 times as fast. The group law is exact, so the point
// compared, and hence the answer, is the standard library's; the tests
// and the fuzz target compare the two on valid, tampered, non-canonical
// and small-order inputs.
package sigverify

import (
	"crypto/sha512"
	"crypto/subtle"

	"filippo.io/edwards25519"
)

// table holds j·256^i·P for i in 0..31 and j in 1..8.
type table [32][8]edwards25519.Point

// tableBytes is what one table takes in memory.
const tableBytes = 32 * 8 * 160

func newTable(p *edwards25519.Point) *table {
	t := new(table)
	base := new(edwards25519.Point).Set(p)
	for i := range t {
		t[i][0].Set(base)
		for j := 1; j < 8; j++ {
			t[i][j].Add(&t[i][j-1], base)
		}
		if i < len(t)-1 {
			// 256·base = 2·(8·base), doubled four more times.
			base.Add(&t[i][7], &t[i][7])
			for range 4 {
				base.Add(base, base)
			}
		}
	}
	return t
}

var basepoint = newTable(edwards25519.NewGeneratorPoint())

// digits writes the 32-byte little-endian scalar s (below 2^253) in signed
// radix 16: s = Σ d[i]·16^i with every d[i] in [-8, 8].
func digits(s []byte) (d [64]int8) {
	for i := range 32 {
		d[2*i] = int8(s[i] & 15)
		d[2*i+1] = int8(s[i] >> 4)
	}
	var carry int8
	for i := range 63 {
		d[i] += carry
		carry = (d[i] + 8) >> 4
		d[i] -= carry << 4
	}
	d[63] += carry
	return d
}

// add sets acc to acc + sign·d·(the table's point at position i).
func (t *table) add(acc *edwards25519.Point, i int, d int8, sign int8) {
	switch d *= sign; {
	case d > 0:
		acc.Add(acc, &t[i][d-1])
	case d < 0:
		acc.Subtract(acc, &t[i][-d-1])
	}
}

// parse does the checks and hashing every path shares: the signature's
// length and top bits, k = SHA-512(R || pub || msg) mod l, and S below l.
func parse(pub, msg, sig []byte) (k, s *edwards25519.Scalar, ok bool) {
	if len(pub) != 32 || len(sig) != 64 || sig[63]&224 != 0 {
		return nil, nil, false
	}
	h := sha512.New()
	h.Write(sig[:32])
	h.Write(pub)
	h.Write(msg)
	var sum [64]byte
	k, err := edwards25519.NewScalar().SetUniformBytes(h.Sum(sum[:0]))
	if err != nil {
		return nil, nil, false
	}
	if s, err = edwards25519.NewScalar().SetCanonicalBytes(sig[32:]); err != nil {
		return nil, nil, false
	}
	return k, s, true
}

// verifyChain is the standard library's computation, with -A given.
func verifyChain(minusA *edwards25519.Point, k, s *edwards25519.Scalar, r []byte) bool {
	p := new(edwards25519.Point).VarTimeDoubleScalarBaseMult(k, minusA, s)
	return subtle.ConstantTimeCompare(r, p.Bytes()) == 1
}

// verifyTable computes [S]B - [k]A from the basepoint's table and A's:
// the odd digits first, times 16, then the even ones.
func verifyTable(a *table, k, s *edwards25519.Scalar, r []byte) bool {
	dk, ds := digits(k.Bytes()), digits(s.Bytes())
	acc := edwards25519.NewIdentityPoint()
	for i := range 32 {
		a.add(acc, i, dk[2*i+1], -1)
		basepoint.add(acc, i, ds[2*i+1], 1)
	}
	for range 4 {
		acc.Add(acc, acc)
	}
	for i := range 32 {
		a.add(acc, i, dk[2*i], -1)
		basepoint.add(acc, i, ds[2*i], 1)
	}
	return subtle.ConstantTimeCompare(r, acc.Bytes()) == 1
}
