package sigverify

import (
	"bytes"
	"crypto/ed25519"
	"encoding/hex"
	"fmt"
	"math/big"
	"math/rand/v2"
	"testing"
	"unsafe"

	"filippo.io/edwards25519"
	"filippo.io/edwards25519/field"
)

// randScalar returns a uniformly random scalar from rng.
func randScalar(rng *rand.Rand) *edwards25519.Scalar {
	var b [64]byte
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	s, err := edwards25519.NewScalar().SetUniformBytes(b[:])
	if err != nil {
		panic(err)
	}
	return s
}

// toPoint converts p to an edwards25519.Point, failing t if it is not one.
func toPoint(t *testing.T, p *extended) *edwards25519.Point {
	t.Helper()
	q, err := new(edwards25519.Point).SetExtendedCoordinates(&p.X, &p.Y, &p.Z, &p.T)
	if err != nil {
		t.Fatal("not a point:", err)
	}
	return q
}

// affineOf returns p's affine form, through normalize.
func affineOf(p *edwards25519.Point) *affine {
	out := make([]affine, 1)
	normalize(out, []extended{*toExtended(p)})
	return &out[0]
}

// testPoints returns points of every kind: the identity, the generator,
// small-order points, random multiples of B, and those plus a point of
// order 8 (neither in the prime-order subgroup nor of small order).
func testPoints(t *testing.T, rng *rand.Rand) []*edwards25519.Point {
	pts := []*edwards25519.Point{edwards25519.NewIdentityPoint(), edwards25519.NewGeneratorPoint()}
	for _, hk := range oddKeys {
		b, _ := hex.DecodeString(hk)
		if p, err := new(edwards25519.Point).SetBytes(b); err == nil {
			pts = append(pts, p)
		}
	}
	b, _ := hex.DecodeString("c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a")
	order8, err := new(edwards25519.Point).SetBytes(b)
	if err != nil {
		t.Fatal(err)
	}
	for range 6 {
		p := new(edwards25519.Point).ScalarBaseMult(randScalar(rng))
		pts = append(pts, p, new(edwards25519.Point).Add(p, order8))
	}
	return pts
}

func TestD2(t *testing.T) {
	var n, m, d field.Element
	n.SetBytes(append([]byte{0x41, 0xdb, 0x01}, make([]byte, 29)...)) // 121665
	m.SetBytes(append([]byte{0x42, 0xdb, 0x01}, make([]byte, 29)...)) // 121666
	d.Multiply(&n, m.Invert(&m))
	d.Negate(&d)
	if d.Add(&d, &d).Equal(d2) != 1 {
		t.Fatal("d2 is not 2·(−121665/121666)")
	}
}

// TestPointArithmetic compares the additions and doublings with
// edwards25519.Point's on all pairs of test points, including a point
// with itself, with its negation and with the identity.
func TestPointArithmetic(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	pts := testPoints(t, rng)
	var others []*edwards25519.Point
	for _, p := range pts {
		others = append(others, p, new(edwards25519.Point).Negate(p))
	}
	for i, p := range pts {
		ep := toExtended(p)
		for j, q := range others {
			aq := affineOf(q)
			var cq cached
			cq.fromExtended(toExtended(q))
			sum := new(edwards25519.Point).Add(p, q).Bytes()
			diff := new(edwards25519.Point).Subtract(p, q).Bytes()
			var c completed
			var got extended
			if b := toPoint(t, got.fromCompleted(c.addAffine(ep, aq))).Bytes(); !bytes.Equal(b, sum) {
				t.Errorf("addAffine(p%d, q%d) = %x, want %x", i, j, b, sum)
			}
			if b := toPoint(t, got.fromCompleted(c.subAffine(ep, aq))).Bytes(); !bytes.Equal(b, diff) {
				t.Errorf("subAffine(p%d, q%d) = %x, want %x", i, j, b, diff)
			}
			if b := toPoint(t, got.fromCompleted(c.add(ep, &cq))).Bytes(); !bytes.Equal(b, sum) {
				t.Errorf("add(p%d, q%d) = %x, want %x", i, j, b, sum)
			}
			for d := -1; d <= 1; d++ {
				got = *ep
				got.addDigit([]affine{*aq}, d)
				want := p.Bytes()
				switch d {
				case 1:
					want = sum
				case -1:
					want = diff
				}
				if b := toPoint(t, &got).Bytes(); !bytes.Equal(b, want) {
					t.Errorf("addDigit(p%d, q%d, %d) = %x, want %x", i, j, d, b, want)
				}
			}
		}
		want := new(edwards25519.Point).Set(p)
		for n := 1; n <= 6; n++ {
			want.Add(want, want)
			got := *ep
			if b := toPoint(t, got.doubleN(n)).Bytes(); !bytes.Equal(b, want.Bytes()) {
				t.Errorf("doubleN(p%d, %d) = %x, want %x", i, n, b, want.Bytes())
			}
		}
	}
}

// checkMultiples checks that out holds j·256^i·p at [n·i + j − 1], each
// computed with edwards25519.Point additions.
func checkMultiples(t *testing.T, out []affine, p *edwards25519.Point, n int) {
	t.Helper()
	base := new(edwards25519.Point).Set(p)
	for i := 0; i < len(out)/n; i++ {
		want := new(edwards25519.Point).Set(base)
		for j := 1; j <= n; j++ {
			var got extended
			got.identity().addDigit(out[n*i:n*i+n], j)
			if !bytes.Equal(toPoint(t, &got).Bytes(), want.Bytes()) {
				t.Fatalf("entry %d·256^%d wrong", j, i)
			}
			if j < n {
				want.Add(want, base)
			}
		}
		for range 8 {
			base.Add(base, base)
		}
	}
}

func TestTables(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for k, p := range testPoints(t, rng) {
		if k%3 == 0 {
			checkMultiples(t, newTable(p)[:], p, 8)
		}
	}
	checkMultiples(t, basepoint()[:], edwards25519.NewGeneratorPoint(), 128)
}

// TestTableSum compares tableSum with VarTimeDoubleScalarBaseMult (the
// standard library's computation) for random and extreme scalars and
// points of every kind.
func TestTableSum(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	lMinus1, _ := edwards25519.NewScalar().SetCanonicalBytes([]byte{
		0xec, 0xd3, 0xf5, 0x5c, 0x1a, 0x63, 0x12, 0x58, 0xd6, 0x9c, 0xf7, 0xa2, 0xde, 0xf9, 0xde, 0x14,
		0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x10})
	one, _ := edwards25519.NewScalar().SetCanonicalBytes(append([]byte{1}, make([]byte, 31)...))
	// Scalars with many radix-16 digits of ±8 or radix-256 digits near ±128.
	var b88, b80 [32]byte
	for i := range b88 {
		b88[i], b80[i] = 0x88, 0x80
	}
	b88[31], b80[31] = 0x08, 0x08
	s88, _ := edwards25519.NewScalar().SetCanonicalBytes(b88[:])
	s80, _ := edwards25519.NewScalar().SetCanonicalBytes(b80[:])
	fixed := []*edwards25519.Scalar{edwards25519.NewScalar(), one, lMinus1, s88, s80}
	for i, a := range testPoints(t, rng) {
		tab := newTable(a)
		minusA := new(edwards25519.Point).Negate(a)
		check := func(k, s *edwards25519.Scalar) {
			t.Helper()
			sum := tableSum(tab, k, s)
			want := new(edwards25519.Point).VarTimeDoubleScalarBaseMult(k, minusA, s)
			if got := toPoint(t, &sum); !bytes.Equal(got.Bytes(), want.Bytes()) {
				t.Fatalf("point %d, k %x, s %x: %x, want %x", i, k.Bytes(), s.Bytes(), got.Bytes(), want.Bytes())
			}
		}
		for _, k := range fixed {
			for _, s := range fixed {
				check(k, s)
			}
			check(k, randScalar(rng))
			check(randScalar(rng), k)
			check(k, k) // the sum is the identity when A = B
		}
		for range 20 {
			check(randScalar(rng), randScalar(rng))
		}
	}
}

func TestDigits(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	le := func(b []byte) *big.Int {
		r := make([]byte, len(b))
		for i := range b {
			r[len(b)-1-i] = b[i]
		}
		return new(big.Int).SetBytes(r)
	}
	for n := range 2000 {
		var s [32]byte
		for i := range s {
			s[i] = byte(rng.Uint32())
		}
		switch n {
		case 0:
			s = [32]byte{}
		case 1:
			for i := range s {
				s[i] = 0xff
			}
		}
		s[31] &= 0x1f // below 2^253
		want := le(s[:])
		sum := new(big.Int)
		for i, d := range digits(s[:]) {
			if d < -8 || d > 8 {
				t.Fatalf("radix-16 digit %d", d)
			}
			sum.Add(sum, new(big.Int).Lsh(big.NewInt(int64(d)), uint(4*i)))
		}
		if sum.Cmp(want) != 0 {
			t.Fatalf("digits(%x) sum to %x", s, sum)
		}
		sum.SetInt64(0)
		for i, d := range digits256(s[:]) {
			sum.Add(sum, new(big.Int).Lsh(big.NewInt(int64(d)), uint(8*i)))
		}
		if sum.Cmp(want) != 0 {
			t.Fatalf("digits256(%x) sum to %x", s, sum)
		}
	}
}

// TestTablePathMatchesLibsodium gives 200 random keys tables, then checks
// valid and broken signatures under them through the tables against
// libsodium's answers (sodiumVerify).
func TestTablePathMatchesLibsodium(t *testing.T) {
	const nKeys, nMsgs = 200, 5
	rng := rand.New(rand.NewPCG(9, 10))
	c := New(DefaultBytes)
	privs := make([]ed25519.PrivateKey, nKeys)
	for i := range privs {
		seed := make([]byte, 32)
		for j := range seed {
			seed[j] = byte(rng.Uint32())
		}
		privs[i] = ed25519.NewKeyFromSeed(seed)
		pub := privs[i].Public().(ed25519.PublicKey)
		for m := range 2 {
			msg := []byte{byte(m)}
			if !c.Verify(pub, msg, ed25519.Sign(privs[i], msg)) {
				t.Fatal("valid signature rejected")
			}
		}
	}
	before := c.Stats()
	calls, accepted := 0, 0
	for i, priv := range privs {
		pub := priv.Public().(ed25519.PublicKey)
		other := privs[(i+1)%nKeys]
		for m := range nMsgs {
			msg := []byte(fmt.Sprintf("message %d of key %d: %d", m, i, rng.Uint64()))
			sig := ed25519.Sign(priv, msg)
			tamperR := append([]byte(nil), sig...)
			tamperR[rng.IntN(32)] ^= byte(1 + rng.IntN(255))
			tamperS := append([]byte(nil), sig...)
			s, _ := edwards25519.NewScalar().SetCanonicalBytes(sig[32:])
			copy(tamperS[32:], s.Add(s, randScalar(rng)).Bytes())
			random := make([]byte, 64)
			for j := range random {
				random[j] = byte(rng.Uint32())
			}
			copy(random[32:], randScalar(rng).Bytes())
			wrongMsg := append([]byte(nil), msg...)
			wrongMsg[rng.IntN(len(wrongMsg))] ^= byte(1 + rng.IntN(255))
			cases := []struct {
				name          string
				pub, msg, sig []byte
			}{
				{"valid", pub, msg, sig},
				{"tampered R", pub, msg, tamperR},
				{"tampered S", pub, msg, tamperS},
				{"random R and S", pub, msg, random},
				{"wrong message", pub, wrongMsg, sig},
				{"other key's signature", pub, msg, ed25519.Sign(other, msg)},
				{"wrong key", other.Public().(ed25519.PublicKey), msg, sig},
			}
			for _, tc := range cases {
				want := sodiumVerify(tc.pub, tc.msg, tc.sig)
				if tc.name == "valid" && !want {
					t.Fatal("the reference rejects a valid signature")
				}
				calls++
				got := c.Verify(tc.pub, tc.msg, tc.sig)
				if got {
					accepted++
				}
				if got != want {
					t.Fatalf("key %d msg %d %s: got %v, libsodium %v", i, m, tc.name, got, want)
				}
			}
		}
	}
	after := c.Stats()
	if after.Tables != nKeys || after.TablesBuilt != nKeys {
		t.Fatalf("want %d tables: %+v", nKeys, after)
	}
	if n := after.TableChecks - before.TableChecks; n != int64(calls) {
		t.Fatalf("%d of %d checks through tables", n, calls)
	}
	if accepted != nKeys*nMsgs {
		t.Fatalf("%d accepted, want %d", accepted, nKeys*nMsgs)
	}
}

func TestTableBytes(t *testing.T) {
	if n := unsafe.Sizeof(table{}); n != tableBytes {
		t.Fatalf("a table takes %d bytes, tableBytes says %d", n, tableBytes)
	}
}

func BenchmarkBasepointTable(b *testing.B) {
	for b.Loop() {
		t := new(baseTable)
		multiples(t[:], make([]extended, len(t)), toExtended(edwards25519.NewGeneratorPoint()), 128)
	}
}
