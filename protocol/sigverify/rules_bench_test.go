package sigverify

import (
	"crypto/ed25519"
	"testing"
)

// BenchmarkRules measures libsodium's extra checks on an ordinary key
// and R, which every verification now pays before its arithmetic.
func BenchmarkRules(b *testing.B) {
	priv := keyOf(7)
	pub := priv.Public().(ed25519.PublicKey)
	sig := ed25519.Sign(priv, []byte("m"))
	n := 0
	for b.Loop() {
		if WeakKey(pub) || smallOrder(sig[:32]) {
			n++
		}
	}
	if n != 0 {
		b.Fatal("an ordinary key refused")
	}
}
