package discovery

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// TestStopWords: isStopWord holds for exactly the listed words, among
// them, their prefixes and extensions, and random tokens of 1 to 10 bytes.
func TestStopWords(t *testing.T) {
	want := map[string]bool{}
	for _, w := range strings.Fields(stopWordList) {
		want[w] = true
	}
	var tokens []string
	for w := range want {
		tokens = append(tokens, w, w[1:], w[:len(w)-1], w+"s", "x"+w, strings.Repeat(w, 3))
	}
	rng := rand.New(rand.NewPCG(7, 8))
	const letters = "abcdefghijklmnopqrstuvwxyz0123456789é"
	for range 100000 {
		b := make([]byte, 1+rng.IntN(10))
		for i := range b {
			b[i] = letters[rng.IntN(len(letters))]
		}
		tokens = append(tokens, string(b))
	}
	for _, tok := range tokens {
		if got := isStopWord(tok); got != want[tok] {
			t.Fatalf("isStopWord(%q) = %v, want %v", tok, got, want[tok])
		}
	}
}
