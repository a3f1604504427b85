package protocol

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"

	"github.com/anp2net/relay/protocol/sigverify"
	"github.com/gowebpki/jcs"
)

// Cosignatures (SPEC §1.8): an agent endorses the content of an event of a
// given kind, and the endorsement travels in that event's tags as
// ["cosign", <agent_id>, <sig>], sig being the agent's Ed25519 signature
// (128 lowercase hex) over CosignDigest(kind, content). The digest is
// domain-separated by a prefix and the kind, and covers the JCS form of the
// content, so a cosignature cannot be moved onto another kind or onto other
// content (another checkpoint, proposal or ban). The two-element
// ["cosign", <agent_id>] tag of moderation overrides (§7.5) is another,
// older thing and is not read here.

// CosignDomain prefixes every cosigned digest.
const CosignDomain = "anp2-cosign-v1"

// CosignDigest returns SHA-256(CosignDomain ‖ 0x00 ‖ kind in decimal ‖ 0x00 ‖
// JCS(content)). content must be JSON.
func CosignDigest(kind int64, content string) ([32]byte, error) {
	canon, err := jcs.Transform([]byte(content))
	if err != nil {
		return [32]byte{}, fmt.Errorf("cosigned content is not JSON: %w", err)
	}
	msg := make([]byte, 0, len(CosignDomain)+24+len(canon))
	msg = append(msg, CosignDomain...)
	msg = append(msg, 0)
	msg = strconv.AppendInt(msg, kind, 10)
	msg = append(msg, 0)
	msg = append(msg, canon...)
	return sha256.Sum256(msg), nil
}

// Cosign returns the cosign tag by key for content of kind.
func Cosign(key ed25519.PrivateKey, kind int64, content string) ([]string, error) {
	d, err := CosignDigest(kind, content)
	if err != nil {
		return nil, err
	}
	return []string{"cosign", AgentIDOf(key), hex.EncodeToString(ed25519.Sign(key, d[:]))}, nil
}

// Cosignature is one cosign tag as judged by Cosignatures.
type Cosignature struct {
	AgentID string `json:"agent_id"`
	Valid   bool   `json:"valid"`
	// Reason says why an invalid one does not count: "malformed",
	// "author" (the author's own signature already endorses the event),
	// "duplicate" (an earlier tag names the same agent), "bad_signature"
	// (libsodium's rules, including weak keys).
	Reason string `json:"reason,omitempty"`
}

// Cosignatures judges every three-element cosign tag of e, in tag order.
// An invalid cosignature never makes e invalid: callers count the valid
// ones and report the others.
func Cosignatures(e *Event) []Cosignature {
	var out []Cosignature
	var digest [32]byte
	var digestErr error
	digested := false
	seen := map[string]bool{}
	for _, t := range e.Tags {
		if len(t) < 3 || t[0] != "cosign" {
			continue
		}
		if !digested {
			digest, digestErr = CosignDigest(e.Kind, e.Content)
			digested = true
		}
		c := Cosignature{AgentID: t[1]}
		switch {
		case !isLowerHex(t[1], 64) || !isLowerHex(t[2], 128) || digestErr != nil:
			c.Reason = "malformed"
		case t[1] == e.AgentID:
			c.Reason = "author"
		case seen[t[1]]:
			c.Reason = "duplicate"
		case !verifyHex(t[1], t[2], digest[:]):
			c.Reason = "bad_signature"
		default:
			c.Valid = true
			seen[t[1]] = true
		}
		out = append(out, c)
	}
	return out
}

// verifyHex checks a signature given as hex (both already well-formed).
func verifyHex(agentID, sigHex string, msg []byte) bool {
	pub, _ := hex.DecodeString(agentID)
	sig, _ := hex.DecodeString(sigHex)
	return sigverify.Default.Verify(pub, msg, sig)
}
