package protocol

import (
	"encoding/base64"
	"encoding/hex"
)

// Codes for the kind 3 (direct message) rules of seed §4.4.
const (
	// CodeDMRecipient: not exactly one p tag, a p value that is not 64
	// lowercase hex, or a p tag naming the author.
	CodeDMRecipient = "invalid_dm_recipient"
	// CodeDMNonce: not exactly one nonce tag, or a value that is not 48
	// lowercase hex characters (24 bytes).
	CodeDMNonce = "invalid_dm_nonce"
	// CodeDMContent: content that is not canonical standard base64, or
	// whose decoded length is not 16 (the Poly1305 tag) plus a padding
	// bucket (DMBucket).
	CodeDMContent = "invalid_dm_content"
)

// DM sizes of seed §4.4: the 24-byte XSalsa20 nonce, the 16-byte Poly1305
// tag that crypto_box puts before the ciphertext, the smallest padding
// bucket and the step beyond the largest power-of-two bucket.
const (
	DMNonceSize = 24
	DMTagSize   = 16
	DMMinBucket = 32
	DMBigBucket = 65536
)

func init() { kindRules[KindDM] = checkDM }

// DM is the relay-visible part of a kind 3 event: who it is for, the
// nonce, and the sealed box (Poly1305 tag then ciphertext). The relay never
// opens it.
type DM struct {
	Recipient string
	Nonce     [DMNonceSize]byte
	Box       []byte
}

// DMBucket returns the padded length of a plaintext of n bytes (§4.4.3):
// the smallest of 32, 64, …, 65536 that holds n+1 bytes (the 0x80 marker),
// else the smallest multiple of 65536 that does.
func DMBucket(n int) int {
	need := n + 1
	b := DMMinBucket
	for b < need && b < DMBigBucket {
		b *= 2
	}
	if b >= need {
		return b
	}
	return (need + DMBigBucket - 1) / DMBigBucket * DMBigBucket
}

// IsDMBucket reports whether n is a padded length of §4.4.3: a power of
// two from 32 to 65536, or a positive multiple of 65536.
func IsDMBucket(n int) bool {
	if n >= DMBigBucket {
		return n%DMBigBucket == 0
	}
	return n >= DMMinBucket && n&(n-1) == 0
}

// ParseDM reads the tags and content of a kind 3 event (§4.4). It returns
// an *Error with code invalid_dm_recipient, invalid_dm_nonce or
// invalid_dm_content for the first rule e breaks.
func ParseDM(e *Event) (DM, error) {
	var dm DM
	ps, nonces := tagValuesStrict(e, "p"), tagValuesStrict(e, "nonce")
	if len(ps) != 1 || !IsHex64(ps[0]) {
		return dm, Errorf(CodeDMRecipient, "kind 3 needs exactly one [\"p\", <agent_id>] tag with 64 lowercase hex characters")
	}
	if ps[0] == e.AgentID {
		return dm, Errorf(CodeDMRecipient, "kind 3 p tag must name another agent than the author")
	}
	dm.Recipient = ps[0]
	if len(nonces) != 1 || !isLowerHex(nonces[0], 2*DMNonceSize) {
		return dm, Errorf(CodeDMNonce, "kind 3 needs exactly one [\"nonce\", <48 lowercase hex characters>] tag")
	}
	hex.Decode(dm.Nonce[:], []byte(nonces[0]))
	box, err := DecodeDMContent(e.Content)
	if err != nil {
		return dm, err
	}
	dm.Box = box
	return dm, nil
}

// DecodeDMContent decodes a kind 3 content: canonical standard base64
// (padded, no line breaks) of 16 + a padding bucket bytes. It returns an
// *Error with code invalid_dm_content otherwise.
func DecodeDMContent(content string) ([]byte, error) {
	n := len(content)
	if n == 0 || n%4 != 0 {
		return nil, Errorf(CodeDMContent, "kind 3 content must be standard base64 of the sealed box")
	}
	size := n / 4 * 3
	for i := n - 1; i >= n-2 && content[i] == '='; i-- {
		size--
	}
	if !IsDMBucket(size - DMTagSize) {
		return nil, Errorf(CodeDMContent, "kind 3 content decodes to %d bytes; it must be 16 plus a padded length (32, 64, …, 65536, or a multiple of 65536)", size)
	}
	box, err := base64.StdEncoding.Strict().DecodeString(content)
	if err != nil || len(box) != size || base64.StdEncoding.EncodeToString(box) != content {
		return nil, Errorf(CodeDMContent, "kind 3 content must be canonical standard base64 of the sealed box")
	}
	return box, nil
}

// tagValuesStrict is TagValues counting a tag with no value too, so that
// ["p"] is a second p tag rather than none.
func tagValuesStrict(e *Event, name string) []string {
	var out []string
	for _, t := range e.Tags {
		if len(t) >= 1 && t[0] == name {
			if len(t) >= 2 {
				out = append(out, t[1])
			} else {
				out = append(out, "")
			}
		}
	}
	return out
}

func checkDM(e *Event) []error {
	if _, err := ParseDM(e); err != nil {
		return []error{err}
	}
	return nil
}
