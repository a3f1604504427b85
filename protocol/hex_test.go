package protocol

import (
	"strings"
	"testing"
)

// TestIsLowerHex puts every byte value at the start, middle and end of an
// otherwise valid hex string and compares isLowerHex with the rule
// spelled out.
func TestIsLowerHex(t *testing.T) {
	base := strings.Repeat("0123456789abcdef", 4)
	for c := 0; c < 256; c++ {
		want := c >= '0' && c <= '9' || c >= 'a' && c <= 'f'
		for _, at := range []int{0, 31, 63} {
			b := []byte(base)
			b[at] = byte(c)
			if got := isLowerHex(string(b), 64); got != want {
				t.Errorf("byte %#x at %d: got %v, want %v", c, at, got, want)
			}
		}
	}
	for _, tc := range []struct {
		s    string
		n    int
		want bool
	}{{base, 64, true}, {base, 63, false}, {base[:63], 64, false}, {"", 0, true}, {"", 64, false}} {
		if got := isLowerHex(tc.s, tc.n); got != tc.want {
			t.Errorf("isLowerHex(%q, %d) = %v, want %v", tc.s, tc.n, got, tc.want)
		}
	}
}
