package governance

import (
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	"github.com/anp2net/relay/protocol"
	"github.com/cloudflare/circl/sign/mldsa/mldsa65"
)

// Post-quantum dual signatures (seed §15.1, phase 3+).
const (
	// SchemeDual is the scheme tag value of an act with ML-DSA-65
	// signatures beside its Ed25519 ones.
	SchemeDual = "ed25519+mldsa65"
	// SchemeSeed is the seed's own name for the same dual scheme (seed
	// §15.2, ["scheme", "ed25519+dilithium"]): CRYSTALS-Dilithium as
	// standardised, FIPS 204 ML-DSA-65. Either value marks a dual act.
	SchemeSeed = "ed25519+dilithium"
	// pqContext is the ML-DSA context string (FIPS 204 ctx).
	pqContext = "anp2-pq-v1"
)

// Reasons a key's post-quantum part does not verify (PQCheck.Reason).
const (
	PQNoScheme     = "scheme_missing" // no ["scheme", "ed25519+mldsa65"] tag
	PQMissing      = "pq_sig_missing" // no pq_sig tag for the key
	PQMalformed    = "pq_sig_malformed"
	PQBadSignature = "pq_bad_signature"
)

// PQCheck is the post-quantum verdict on one signer whose key has a
// post-quantum part.
type PQCheck struct {
	AgentID string `json:"agent_id"`
	Valid   bool   `json:"valid"`
	Reason  string `json:"reason,omitempty"`
}

// pqChunk is the most hex characters one pq_sig tag element carries (a
// tag element may hold 1024 bytes; a signature is 6618 hex characters).
const pqChunk = 1024

// PQSign returns the ["pq_sig", agentID, <hex chunk>…] tag: sk's ML-DSA-65
// signature (context "anp2-pq-v1") over the cosign digest of kind and
// content (§1.8), the message the Ed25519 cosignatures sign, in lowercase
// hex split into elements of at most 1024 characters.
func PQSign(sk *mldsa65.PrivateKey, agentID string, kind int64, content string) ([]string, error) {
	d, err := protocol.CosignDigest(kind, content)
	if err != nil {
		return nil, err
	}
	sig := make([]byte, mldsa65.SignatureSize)
	if err := mldsa65.SignTo(sk, d[:], []byte(pqContext), false, sig); err != nil {
		return nil, err
	}
	tag := []string{"pq_sig", agentID}
	for h := hex.EncodeToString(sig); h != ""; {
		n := min(pqChunk, len(h))
		tag, h = append(tag, h[:n]), h[n:]
	}
	return tag, nil
}

// parsePQKeys decodes the configured post-quantum public keys; each must
// belong to a configured seed or sovereign key.
func (o *Options) parsePQKeys() error {
	o.pqPub = map[string]*mldsa65.PublicKey{}
	for id, raw := range o.PQKeys {
		if !slices.Contains(o.SeedKeys, id) && !slices.Contains(o.SovereignKeys, id) {
			return fmt.Errorf("post-quantum key for %s, which is neither a seed nor a sovereign key", id)
		}
		var pk mldsa65.PublicKey
		if err := pk.UnmarshalBinary(raw); err != nil {
			return fmt.Errorf("post-quantum key for %s: %w", id, err)
		}
		o.pqPub[id] = &pk
	}
	return nil
}

// pqVerify checks the post-quantum part of every signer in who whose key
// has one, and returns the verdicts.
func (o *Options) pqVerify(e *protocol.Event, who []string) []PQCheck {
	out := []PQCheck{}
	var digest [32]byte
	digested := false
	dual := slices.ContainsFunc(e.Tags, func(t []string) bool {
		return len(t) >= 2 && t[0] == "scheme" && (t[1] == SchemeDual || t[1] == SchemeSeed)
	})
	for _, w := range who {
		pk, ok := o.pqPub[w]
		if !ok {
			continue
		}
		c := PQCheck{AgentID: w}
		if !dual {
			c.Reason = PQNoScheme
			out = append(out, c)
			continue
		}
		if !digested {
			digest, _ = protocol.CosignDigest(e.Kind, e.Content)
			digested = true
		}
		c.Reason = PQMissing
		if hexSig, ok := pqSigOf(e, w); ok {
			sig, err := hex.DecodeString(hexSig)
			switch {
			case err != nil || len(sig) != mldsa65.SignatureSize:
				c.Reason = PQMalformed
			case mldsa65.Verify(pk, digest[:], []byte(pqContext), sig):
				c.Valid, c.Reason = true, ""
			default:
				c.Reason = PQBadSignature
			}
		}
		out = append(out, c)
	}
	return out
}

// pqSigOf returns the hex of w's post-quantum signature on e, from the
// first tag that carries one: ours, ["pq_sig", w, <hex chunk>…], or, for
// e's author only, the seed's §15.2 form ["pq_sig", <hex chunk>…] (no
// agent id: the signature is the author's). A tag whose second element
// is a 64-hex agent id is always read as ours.
func pqSigOf(e *protocol.Event, w string) (string, bool) {
	for _, t := range e.Tags {
		if len(t) < 2 || t[0] != "pq_sig" {
			continue
		}
		if protocol.IsHex64(t[1]) {
			if len(t) >= 3 && t[1] == w {
				return strings.Join(t[2:], ""), true
			}
			continue
		}
		if w == e.AgentID {
			return strings.Join(t[1:], ""), true
		}
	}
	return "", false
}
