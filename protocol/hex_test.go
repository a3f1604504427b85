package protocol

import (
	"crypto/ed25519"
	"encoding/hex"
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

// TestSigPartsShapes checks which agent_id and sig spellings the
// signature check takes apart (any-case hex of the exact lengths, as
// hex.DecodeString and a length check took them) and which it refuses as
// malformed before any verification.
func TestSigPartsShapes(t *testing.T) {
	e := &Event{CreatedAt: 1, Kind: 1, Tags: [][]string{}}
	e.Sign(ed25519.NewKeyFromSeed(make([]byte, 32)))
	for _, tc := range []struct {
		name     string
		edit     func(*Event)
		malforms bool
	}{
		{"as signed", func(*Event) {}, false},
		{"upper-case sig", func(e *Event) { e.Sig = strings.ToUpper(e.Sig) }, false},
		{"upper-case key", func(e *Event) { e.AgentID = strings.ToUpper(e.AgentID) }, false},
		{"short sig", func(e *Event) { e.Sig = e.Sig[:126] }, true},
		{"odd sig", func(e *Event) { e.Sig = e.Sig[:127] }, true},
		{"long sig", func(e *Event) { e.Sig += "00" }, true},
		{"short key", func(e *Event) { e.AgentID = e.AgentID[:62] }, true},
		{"long key", func(e *Event) { e.AgentID += "00" }, true},
		{"non-hex sig", func(e *Event) { e.Sig = "zz" + e.Sig[2:] }, true},
		{"non-hex key", func(e *Event) { e.AgentID = e.AgentID[:63] + "g" }, true},
		{"non-hex id", func(e *Event) { e.ID = e.ID[:63] + "g" }, true},
		{"empty", func(e *Event) { e.Sig, e.AgentID = "", "" }, true},
	} {
		c := *e
		tc.edit(&c)
		pub, sig, id, err := c.sigParts()
		if got := CodeOf(err) == CodeBadSignature; got != tc.malforms {
			t.Errorf("%s: %v", tc.name, err)
		}
		if !tc.malforms && (hex.EncodeToString(pub) != strings.ToLower(c.AgentID) || hex.EncodeToString(sig) != strings.ToLower(c.Sig) || hex.EncodeToString(id) != c.ID) {
			t.Errorf("%s: decoded %x %x %x", tc.name, pub, sig, id)
		}
	}
}
