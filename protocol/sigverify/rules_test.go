package sigverify

import (
	"bytes"
	"crypto/ed25519"
	"encoding/hex"
	"math/big"
	"testing"

	"filippo.io/edwards25519"
)

// fieldP and orderL are p = 2^255 − 19 and the group order l.
var (
	fieldP    = new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 255), big.NewInt(19))
	orderL, _ = new(big.Int).SetString("7237005577332262213973186563042994240857116359379907606001950938285454250989", 10)
)

// leInt reads b as a little-endian integer.
func leInt(b []byte) *big.Int {
	r := make([]byte, len(b))
	for i := range b {
		r[len(b)-1-i] = b[i]
	}
	return new(big.Int).SetBytes(r)
}

// refSmallOrder reports whether b decodes (as crypto/ed25519 decodes) to a
// point P with [8]P the identity, computed rather than listed.
func refSmallOrder(b []byte) bool {
	p, err := new(edwards25519.Point).SetBytes(b)
	if err != nil {
		return false
	}
	return new(edwards25519.Point).MultByCofactor(p).Equal(edwards25519.NewIdentityPoint()) == 1
}

// refCanonical reports whether b writes y (the sign bit aside) below p.
func refCanonical(b []byte) bool {
	y := bytes.Clone(b)
	y[31] &= 0x7f
	return leInt(y).Cmp(fieldP) < 0
}

// sodiumVerify is the reference this package must agree with:
// crypto/ed25519's answer and libsodium's extra rejections (small-order
// A or R, y of A at or above p, S ≥ l), each computed independently of
// rules.go.
func sodiumVerify(pub, msg, sig []byte) bool {
	return len(pub) == 32 && len(sig) == 64 && ed25519.Verify(pub, msg, sig) &&
		!refSmallOrder(pub) && !refSmallOrder(sig[:32]) && refCanonical(pub) &&
		leInt(sig[32:]).Cmp(orderL) < 0
}

// torsion returns the eight points of order dividing 8.
func torsion(t *testing.T) []*edwards25519.Point {
	t.Helper()
	// An order-8 point: c7176a70…7a from libsodium's list, checked here.
	b, _ := hex.DecodeString("c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a")
	g, err := new(edwards25519.Point).SetBytes(b)
	if err != nil {
		t.Fatal(err)
	}
	id := edwards25519.NewIdentityPoint()
	pts := []*edwards25519.Point{id}
	for i := 1; i < 8; i++ {
		pts = append(pts, new(edwards25519.Point).Add(pts[i-1], g))
		if pts[i].Equal(id) == 1 {
			t.Fatal("the generator's order is below 8")
		}
	}
	if new(edwards25519.Point).Add(pts[7], g).Equal(id) != 1 {
		t.Fatal("the generator's order is not 8")
	}
	return pts
}

// TestSmallOrderList checks the byte list against arithmetic: every
// encoding of each of the eight small-order points (either sign bit, y
// written above p where it can be) is listed, and for every encoding the
// list and [8]P = identity agree.
func TestSmallOrderList(t *testing.T) {
	encs := map[[32]byte]bool{}
	for _, p := range torsion(t) {
		b := p.Bytes()
		encs[[32]byte(b)], encs[[32]byte(flipSign(b))] = true, true
		if y := leInt(b); y.Cmp(big.NewInt(19)) < 0 { // also writable as y + p
			nc := make([]byte, 32)
			v := new(big.Int).Add(y, fieldP).FillBytes(make([]byte, 32))
			for i := range v {
				nc[i] = v[31-i]
			}
			encs[[32]byte(nc)], encs[[32]byte(flipSign(nc))] = true, true
		}
	}
	// y ∈ {0, 1, p − 1, two of order 8, p, p + 1}, each with either sign.
	if len(encs) != 14 {
		t.Fatalf("%d encodings of small-order points, want 14", len(encs))
	}
	for e := range encs {
		b := e[:]
		if !smallOrder(b) {
			t.Errorf("%x: small order, not listed", b)
		}
		if !WeakKey(b) {
			t.Errorf("%x: small order, not a weak key", b)
		}
	}
	for _, hk := range oddKeys {
		b, _ := hex.DecodeString(hk)
		if smallOrder(b) != refSmallOrder(b) || canonicalY(b) != refCanonical(b) {
			t.Errorf("%s: listed %v, computed %v; canonical %v, computed %v", hk, smallOrder(b), refSmallOrder(b), canonicalY(b), refCanonical(b))
		}
	}
	for i := range 64 {
		pub := keyOf(i).Public().(ed25519.PublicKey)
		if WeakKey(pub) {
			t.Fatalf("key %d (%x) called weak", i, pub)
		}
	}
}

func flipSign(b []byte) []byte {
	c := bytes.Clone(b)
	c[31] ^= 0x80
	return c
}

// TestCanonicalY checks the y ≥ p test at its edges, sign bit either way.
func TestCanonicalY(t *testing.T) {
	for _, tc := range []struct {
		hex  string
		want bool
	}{
		{"ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f", true},  // p − 1
		{"edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f", false}, // p
		{"ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f", false}, // 2^255 − 1
		{"edfffffffffffffffffffffffffffffffffffffffffffffffffffffffffeff7f", true},  // below p
		{"0000000000000000000000000000000000000000000000000000000000000000", true},
	} {
		b, _ := hex.DecodeString(tc.hex)
		for _, e := range [][]byte{b, flipSign(b)} {
			if got := canonicalY(e); got != tc.want || got != refCanonical(e) {
				t.Errorf("%x: canonical %v, want %v", e, got, tc.want)
			}
		}
	}
}
