// Package sigverify checks Ed25519 signatures by libsodium's rules
// (crypto_sign_verify_detached, which the reference relay uses), faster
// for keys it has seen before.
//
// Those rules are crypto/ed25519.Verify's cofactorless RFC 8032 check
// plus libsodium's rejections (rules.go): a public key that encodes a
// point of small order or writes y at or above p, an R that encodes a
// point of small order, and S ≥ l (which the standard library rejects
// too). Every other signature gets crypto/ed25519's answer.
//
// Verification computes R' = [S]B - [k]A and compares its encoding with
// the signature's R. The standard library does that with one joint
// double-and-add chain (253 doublings). For a key seen again, a Cache
// keeps multiples of A by powers of 256 (a 30 KiB table, built once at
// the cost of about two verifications), and the basepoint has a wider
// table shared by all keys (480 KiB, built on first use), so R' is a sum
// of 32 table entries, 4 doublings and 64 more entries: about 2.7 times
// as fast. Table entries are stored in affine form and added with this
// package's own field arithmetic (point.go). The group law is exact, so
// the point compared is the standard library's; the tests and the fuzz
// target compare the answers with crypto/ed25519's and libsodium's
// extra rejections on valid, tampered, non-canonical and small-order
// inputs, and the arithmetic with edwards25519.Point's.
package sigverify

import (
	"crypto/sha512"
	"crypto/subtle"
	"sync"

	"filippo.io/edwards25519"
)

// table holds j·256^i·A for i in 0..31 and j in 1..8, at [8i + j − 1],
// in affine form.
type table [32 * 8]affine

// tableBytes is what one table takes in memory.
const tableBytes = 32 * 8 * 120

// newTable returns p's table.
func newTable(p *edwards25519.Point) *table {
	t := new(table)
	// 40 KiB of scratch on the stack: as garbage on the heap it made
	// building half again as slow.
	var pts [len(t)]extended
	multiples(t[:], pts[:], toExtended(p), 8)
	return t
}

// toExtended returns p's coordinates.
func toExtended(p *edwards25519.Point) *extended {
	X, Y, Z, T := p.ExtendedCoordinates()
	return &extended{*X, *Y, *Z, *T}
}

// baseTable holds j·256^i·B for i in 0..31 and j in 1..128, at
// [128i + j − 1]: 480 KiB, one for all keys, so that S takes 32 additions
// (radix-256 digits) rather than 64.
type baseTable [32 * 128]affine

// basepoint returns B's table, built (in about a millisecond) on first use.
var basepoint = sync.OnceValue(func() *baseTable {
	t := new(baseTable)
	multiples(t[:], make([]extended, len(t)), toExtended(edwards25519.NewGeneratorPoint()), 128)
	return t
})

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

// digits256 writes the 32-byte little-endian scalar s (below 2^254) in
// signed radix 256: s = Σ d[i]·256^i with every d[i] in [-128, 127].
func digits256(s []byte) (d [32]int8) {
	carry := 0
	for i := range 32 {
		v := int(s[i]) + carry // 0..256
		carry = (v + 128) >> 8
		d[i] = int8(v - carry<<8)
	}
	return d
}

// parse does the checks and hashing every path shares: the lengths,
// libsodium's rejections of a weak key (WeakKey) and a small-order R,
// k = SHA-512(R || pub || msg) mod l, and S below l.
func parse(pub, msg, sig []byte) (k, s *edwards25519.Scalar, ok bool) {
	if len(pub) != 32 || len(sig) != 64 || sig[63]&224 != 0 || WeakKey(pub) || smallOrder(sig[:32]) {
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

// verifyTable computes R' = [S]B - [k]A from the basepoint's table and
// A's, and compares its encoding (the library's, through
// edwards25519.Point) with r. minusA is only for the impossible case of a
// sum that is not a point, where it answers with verifyChain.
func verifyTable(a *table, minusA *edwards25519.Point, k, s *edwards25519.Scalar, r []byte) bool {
	sum := tableSum(a, k, s)
	var p edwards25519.Point
	if _, err := p.SetExtendedCoordinates(&sum.X, &sum.Y, &sum.Z, &sum.T); err != nil {
		return verifyChain(minusA, k, s, r)
	}
	return subtle.ConstantTimeCompare(r, p.Bytes()) == 1
}

// tableSum returns [S]B - [k]A: k's odd radix-16 digits from A's table
// first, times 16, then k's even digits and S's radix-256 digits from
// B's table.
func tableSum(a *table, k, s *edwards25519.Scalar) extended {
	dk, ds := digits(k.Bytes()), digits256(s.Bytes())
	b := basepoint()
	var acc extended
	acc.identity()
	for i := range 32 {
		acc.addDigit(a[8*i:8*i+8], -int(dk[2*i+1]))
	}
	acc.doubleN(4)
	for i := range 32 {
		acc.addDigit(a[8*i:8*i+8], -int(dk[2*i]))
		acc.addDigit(b[128*i:128*i+128], int(ds[i]))
	}
	return acc
}
