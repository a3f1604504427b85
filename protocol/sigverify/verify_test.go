package sigverify

import (
	"crypto/ed25519"
	"encoding/hex"
	"fmt"
	"math/big"
	"math/rand/v2"
	"sync"
	"testing"

	"filippo.io/edwards25519"
)

func keyOf(i int) ed25519.PrivateKey {
	seed := make([]byte, 32)
	seed[0], seed[1] = byte(i), byte(i>>8)
	return ed25519.NewKeyFromSeed(seed)
}

// nonCanonicalS returns sig with S replaced by S + l, the same scalar
// written at or above l (stdlib rejects it).
func nonCanonicalS(sig []byte) []byte {
	l, _ := new(big.Int).SetString("7237005577332262213973186563042994240857116359379907606001950938285454250989", 10)
	le := func(b []byte) *big.Int {
		r := make([]byte, len(b))
		for i := range b {
			r[len(b)-1-i] = b[i]
		}
		return new(big.Int).SetBytes(r)
	}
	s := new(big.Int).Add(le(sig[32:]), l).FillBytes(make([]byte, 32))
	out := append([]byte(nil), sig[:32]...)
	for i := range s {
		out = append(out, s[31-i])
	}
	return out
}

// variants returns signatures of msg by priv to check: the valid one and
// ways it can be wrong.
func variants(priv ed25519.PrivateKey, msg []byte) map[string][]byte {
	sig := ed25519.Sign(priv, msg)
	flip := func(i int, bit byte) []byte {
		s := append([]byte(nil), sig...)
		s[i] ^= bit
		return s
	}
	return map[string][]byte{
		"valid":          sig,
		"R changed":      flip(3, 0x10),
		"S changed":      flip(40, 0x01),
		"S high bits":    flip(63, 0x80),
		"S not below l":  nonCanonicalS(sig),
		"short":          sig[:63],
		"other message":  ed25519.Sign(priv, append([]byte("x"), msg...)),
		"other key sig":  ed25519.Sign(keyOf(999), msg),
		"all zero":       make([]byte, 64),
		"R=identity S=0": append(append([]byte{1}, make([]byte, 31)...), make([]byte, 32)...),
	}
}

// TestMatchesLibsodium verifies valid and broken signatures three times
// each through one cache (decoded key only, the call that builds the
// table, the table) and requires libsodium's answer (sodiumVerify) every
// time.
func TestMatchesLibsodium(t *testing.T) {
	c := New(DefaultBytes)
	for i := range 12 {
		priv := keyOf(i)
		pub := priv.Public().(ed25519.PublicKey)
		for m := range 6 {
			msg := []byte(fmt.Sprintf("message %d of key %d", m, i))
			for name, sig := range variants(priv, msg) {
				want := sodiumVerify(pub, msg, sig)
				if name == "valid" && !want {
					t.Fatal("the reference rejects a valid signature")
				}
				for round := range 3 {
					if got := c.Verify(pub, msg, sig); got != want {
						t.Fatalf("key %d msg %d %s round %d: got %v, libsodium %v", i, m, name, round, got, want)
					}
				}
			}
		}
	}
	if st := c.Stats(); st.Tables != 12 || st.TableChecks == 0 {
		t.Fatalf("tables not in use: %+v", st)
	}
}

// TestBatchMatchesLibsodium puts the signatures of TestMatchesLibsodium
// and the odd keys' into batches, shuffled, three rounds over one cache
// (so the first rounds verify by the chain, build tables, and later ones
// share inversions), and requires libsodium's answer for each.
func TestBatchMatchesLibsodium(t *testing.T) {
	var jobs []Job
	for i := range 12 {
		priv := keyOf(i)
		pub := priv.Public().(ed25519.PublicKey)
		for m := range 6 {
			msg := []byte(fmt.Sprintf("message %d of key %d", m, i))
			for _, sig := range variants(priv, msg) {
				jobs = append(jobs, Job{Pub: pub, Msg: msg, Sig: sig})
			}
		}
	}
	for _, hk := range oddKeys {
		pub, _ := hex.DecodeString(hk)
		var sb [32]byte
		sb[0] = 5
		s, _ := edwards25519.NewScalar().SetCanonicalBytes(sb[:])
		r := new(edwards25519.Point).ScalarBaseMult(s).Bytes()
		for m := range 4 {
			jobs = append(jobs, Job{Pub: pub, Msg: []byte{byte(m)}, Sig: append(append([]byte(nil), r...), sb[:]...)})
		}
	}
	jobs = append(jobs, Job{Pub: make([]byte, 31), Sig: make([]byte, 64)})
	want := make([]bool, len(jobs))
	valid := 0
	for i, j := range jobs {
		want[i] = sodiumVerify(j.Pub, j.Msg, j.Sig)
		if want[i] {
			valid++
		}
	}
	if valid == 0 || valid == len(jobs) {
		t.Fatalf("%d of %d valid: the test needs both kinds", valid, len(jobs))
	}
	rng := rand.New(rand.NewPCG(1, 2))
	c := New(DefaultBytes)
	got := make([]bool, len(jobs))
	for round := range 3 {
		perm := rng.Perm(len(jobs))
		batch := make([]Job, len(jobs))
		for k, i := range perm {
			batch[k] = jobs[i]
		}
		for lo := 0; lo < len(batch); lo += 37 {
			hi := min(lo+37, len(batch))
			c.VerifyBatch(batch[lo:hi], got[lo:hi])
		}
		for k, i := range perm {
			if got[k] != want[i] {
				t.Fatalf("round %d: job %d (key %x): got %v, libsodium %v", round, i, jobs[i].Pub, got[k], want[i])
			}
		}
	}
	if st := c.Stats(); st.Tables < 12 || st.TableChecks == 0 {
		t.Fatalf("tables not in use: %+v", st)
	}
}

// oddKeys are encodings stdlib or libsodium accept or reject for reasons
// of their own: small-order points, y written at or above p, the sign bit
// on x = 0, and a y that is on no point.
var oddKeys = []string{
	"0100000000000000000000000000000000000000000000000000000000000000", // identity
	"ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f", // order 2
	"0000000000000000000000000000000000000000000000000000000000000000", // order 4
	"0000000000000000000000000000000000000000000000000000000000000080", // order 4, sign bit
	"c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a", // order 8
	"eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f", // y = p+1, the identity
	"0100000000000000000000000000000000000000000000000000000000000080", // identity, sign bit
	"edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f", // y = p
	"0200000000000000000000000000000000000000000000000000000000000000", // not on the curve
	"f0ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f", // y = p+3, a point of large order
}

// TestOddKeysMatchLibsodium checks odd keys against signatures built to
// pass the equation for small-order keys: R = [S]B, which holds for the
// identity whatever the message.
func TestOddKeysMatchLibsodium(t *testing.T) {
	c := New(DefaultBytes)
	for _, hk := range oddKeys {
		pub, _ := hex.DecodeString(hk)
		for m := range 8 {
			msg := []byte{byte(m)}
			var sb [32]byte
			sb[0] = byte(m + 1)
			s, _ := edwards25519.NewScalar().SetCanonicalBytes(sb[:])
			r := new(edwards25519.Point).ScalarBaseMult(s).Bytes()
			sigs := [][]byte{append(append([]byte(nil), r...), sb[:]...), ed25519.Sign(keyOf(m), msg)}
			for _, sig := range sigs {
				want := sodiumVerify(pub, msg, sig)
				for round := range 3 {
					if got := c.Verify(pub, msg, sig); got != want {
						t.Fatalf("key %s msg %d round %d: got %v, libsodium %v", hk, m, round, got, want)
					}
				}
			}
		}
	}
}

func TestWrongKeyLengthIsFalse(t *testing.T) {
	if New(0).Verify(make([]byte, 31), nil, make([]byte, 64)) {
		t.Fatal("31-byte key accepted")
	}
}

// TestTableLimit verifies with more busy keys than the limit allows
// tables: the count stays within it, answers stay right, and the sweeps
// keep the same keys' tables rather than trading them round after round.
func TestTableLimit(t *testing.T) {
	const limit = 3
	c := New(limit * tableBytes)
	type signed struct {
		pub, msg, sig []byte
	}
	var all []signed
	for i := range 10 {
		priv := keyOf(i)
		msg := []byte{byte(i)}
		all = append(all, signed{priv.Public().(ed25519.PublicKey), msg, ed25519.Sign(priv, msg)})
	}
	for round := range 400 {
		for _, s := range all {
			if !c.Verify(s.pub, s.msg, s.sig) {
				t.Fatal("valid signature rejected")
			}
			if n := c.Stats().Tables; n > limit {
				t.Fatalf("round %d: %d tables over a limit of %d", round, n, limit)
			}
		}
	}
	st := c.Stats()
	if st.Tables != limit || st.TablesBuilt > 4*limit {
		t.Fatalf("tables churn: %+v", st)
	}
	c.SetMaxBytes(0)
	for range 2 * 1024 {
		c.Verify(all[0].pub, all[0].msg, all[0].sig)
	}
	if n := c.Stats().Tables; n != 0 {
		t.Fatalf("%d tables left after the limit went to 0", n)
	}
}

// TestKeyEviction verifies with more keys than the cache holds.
func TestKeyEviction(t *testing.T) {
	c := New(0)
	priv := keyOf(1)
	msg := []byte("m")
	sig := ed25519.Sign(priv, msg)
	pub := priv.Public().(ed25519.PublicKey)
	for i := range 6000 {
		other := make([]byte, 32)
		copy(other, pub)
		other[31] ^= byte(i) // mostly not points, some are
		other[30] ^= byte(i >> 8)
		if c.Verify(other, msg, sig) != sodiumVerify(other, msg, sig) {
			t.Fatalf("key %x", other)
		}
	}
	if n := c.Stats().Keys; n > 4096 {
		t.Fatalf("%d keys held, limit 4096", n)
	}
}

// TestConcurrent verifies from several goroutines with a small table
// limit, so builds, sweeps and evictions race (run with -race).
func TestConcurrent(t *testing.T) {
	c := New(2 * tableBytes)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 600 {
				priv := keyOf((i + g) % 7)
				msg := []byte{byte(i)}
				sig := ed25519.Sign(priv, msg)
				if i%5 == 0 {
					sig[10] ^= 1
				}
				if c.Verify(priv.Public().(ed25519.PublicKey), msg, sig) != (i%5 != 0) {
					t.Error("wrong answer", g, i)
					return
				}
			}
		}()
	}
	wg.Wait()
	if n := c.Stats().Tables; n > 2 {
		t.Fatalf("%d tables, limit 2", n)
	}
}

// FuzzMatchesLibsodium signs msg with a key from seed (or, when odd is
// not 0, takes one of oddKeys and a signature R = [S]B, S = odd, which
// verifies under crypto/ed25519 for the identity), then lets the fuzzer
// change key and signature bytes; three calls through a shared cache must
// each give libsodium's answer (sodiumVerify), and so must a batch.
func FuzzMatchesLibsodium(f *testing.F) {
	f.Add([]byte{1}, []byte("hello"), []byte{}, []byte{}, uint8(0))
	f.Add([]byte{2}, []byte(""), []byte{0, 1}, []byte{63, 0x80}, uint8(0))
	f.Add([]byte{3}, []byte("x"), []byte{31, 0x80}, []byte{32, 0xff}, uint8(0))
	f.Add([]byte{4}, []byte("forged"), []byte{}, []byte{}, uint8(1))
	f.Add([]byte{5}, []byte("forged"), []byte{31, 0x80}, []byte{}, uint8(2))
	f.Add([]byte{6}, []byte("forged"), []byte{}, []byte{0, 0x01}, uint8(10))
	c := New(4 * tableBytes)
	f.Fuzz(func(t *testing.T, seed, msg, pubEdit, sigEdit []byte, odd uint8) {
		s := make([]byte, 32)
		copy(s, seed)
		priv := ed25519.NewKeyFromSeed(s)
		pub := append([]byte(nil), priv.Public().(ed25519.PublicKey)...)
		sig := ed25519.Sign(priv, msg)
		if odd != 0 {
			pub, _ = hex.DecodeString(oddKeys[int(odd)%len(oddKeys)])
			var sb [32]byte
			sb[0] = odd
			sc, _ := edwards25519.NewScalar().SetCanonicalBytes(sb[:])
			sig = append(new(edwards25519.Point).ScalarBaseMult(sc).Bytes(), sb[:]...)
		}
		edit := func(b, e []byte) {
			for i := 0; i+1 < len(e); i += 2 {
				b[int(e[i])%len(b)] ^= e[i+1]
			}
		}
		edit(pub, pubEdit)
		edit(sig, sigEdit)
		want := sodiumVerify(pub, msg, sig)
		for round := range 3 {
			if got := c.Verify(pub, msg, sig); got != want {
				t.Fatalf("round %d: got %v, libsodium %v", round, got, want)
			}
		}
		// The same, in a batch beside a valid signature of the seed's key.
		other := append([]byte("other "), msg...)
		batch := []Job{{Pub: pub, Msg: msg, Sig: sig}, {Pub: priv.Public().(ed25519.PublicKey), Msg: other, Sig: ed25519.Sign(priv, other)}}
		got := make([]bool, 2)
		c.VerifyBatch(batch, got)
		if got[0] != want || !got[1] {
			t.Fatalf("batch: got %v, libsodium %v and true", got, want)
		}
	})
}

// BenchmarkVerify compares the standard library with a key's first
// verification (decoded key, no table) and a key with a table.
func BenchmarkVerify(b *testing.B) {
	priv := keyOf(7)
	pub := priv.Public().(ed25519.PublicKey)
	msgs := make([][]byte, 64)
	sigs := make([][]byte, 64)
	for i := range msgs {
		msgs[i] = []byte(fmt.Sprint("message ", i))
		sigs[i] = ed25519.Sign(priv, msgs[i])
	}
	b.Run("stdlib", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			if !ed25519.Verify(pub, msgs[i%64], sigs[i%64]) {
				b.Fatal("rejected")
			}
		}
	})
	b.Run("decoded-key", func(b *testing.B) {
		c := New(0)
		for i := 0; b.Loop(); i++ {
			if !c.Verify(pub, msgs[i%64], sigs[i%64]) {
				b.Fatal("rejected")
			}
		}
	})
	b.Run("table", func(b *testing.B) {
		c := New(DefaultBytes)
		for i := 0; b.Loop(); i++ {
			if !c.Verify(pub, msgs[i%64], sigs[i%64]) {
				b.Fatal("rejected")
			}
		}
	})
	b.Run("table-batch64", func(b *testing.B) {
		c := New(DefaultBytes)
		jobs := make([]Job, 64)
		for i := range jobs {
			jobs[i] = Job{Pub: pub, Msg: msgs[i], Sig: sigs[i]}
		}
		ok := make([]bool, 64)
		c.VerifyBatch(jobs, ok)
		c.VerifyBatch(jobs, ok)
		for b.Loop() {
			c.VerifyBatch(jobs, ok)
			if !ok[63] {
				b.Fatal("rejected")
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(64*b.N), "ns/sig")
	})
	b.Run("2000-keys-batch64", func(b *testing.B) {
		// A mirror's pattern: 2,000 keys' tables (more than the
		// processor's caches hold), eight signatures per key in a row.
		const keys, per = 2000, 8
		jobs := make([]Job, 0, keys*per)
		for k := range keys {
			priv := keyOf(1000 + k)
			for m := range per {
				msg := []byte(fmt.Sprint("message ", m))
				jobs = append(jobs, Job{Pub: priv.Public().(ed25519.PublicKey), Msg: msg, Sig: ed25519.Sign(priv, msg)})
			}
		}
		c := New(DefaultBytes)
		ok := make([]bool, 64)
		for range 3 { // build every table
			for lo := 0; lo < len(jobs); lo += 64 {
				c.VerifyBatch(jobs[lo:lo+64], ok)
			}
		}
		n := 0
		for b.Loop() {
			lo := n % len(jobs)
			c.VerifyBatch(jobs[lo:lo+64], ok)
			if !ok[0] {
				b.Fatal("rejected")
			}
			n += 64
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(64*b.N), "ns/sig")
	})
	b.Run("build-table", func(b *testing.B) {
		a, _ := new(edwards25519.Point).SetBytes(pub)
		for b.Loop() {
			newTable(a)
		}
	})
}

// TestForgeriesBuildNoTable sends many forged signatures under one key:
// they are all rejected and the key gets no table; two valid ones later
// give it one.
func TestForgeriesBuildNoTable(t *testing.T) {
	c := New(DefaultBytes)
	priv := keyOf(42)
	pub := priv.Public().(ed25519.PublicKey)
	for i := range 50 {
		msg := []byte{byte(i)}
		forged := ed25519.Sign(keyOf(43), msg)
		if c.Verify(pub, msg, forged) {
			t.Fatal("forgery accepted")
		}
	}
	if st := c.Stats(); st.TablesBuilt != 0 {
		t.Fatalf("forgeries built a table: %+v", st)
	}
	for i := range 3 {
		msg := []byte{byte(i)}
		if !c.Verify(pub, msg, ed25519.Sign(priv, msg)) {
			t.Fatal("valid signature rejected")
		}
	}
	if st := c.Stats(); st.TablesBuilt != 1 || st.TableChecks != 1 {
		t.Fatalf("want one table used once after two valid signatures: %+v", st)
	}
}
