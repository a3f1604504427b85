package client

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/anp2net/relay/protocol"
)

// SealedOutputTag names the tag ["sealed", <48-hex nonce>] of a kind 52
// whose output is sealed to the requester (seed §18.12 Q8, SPEC §10.5).
const SealedOutputTag = "sealed"

// SealTaskOutput seals a kind 52 output for the task's requester the way a
// DM is sealed (SPEC §10.3): it returns the base64 string to put in the
// content's "output" and the ["sealed", nonce] tag to add. nonce nil draws
// 24 random bytes. It fails with ErrDMTooLarge past MaxDMPlaintext and
// ErrDMBadKey for an unusable requester.
func SealTaskOutput(provider ed25519.PrivateKey, requesterID string, output []byte, nonce *[24]byte) (string, []string, error) {
	if len(output) > MaxDMPlaintext {
		return "", nil, ErrDMTooLarge
	}
	if nonce == nil {
		nonce = new([24]byte)
		if _, err := rand.Read(nonce[:]); err != nil {
			return "", nil, fmt.Errorf("output nonce: %w", err)
		}
	}
	sealed, err := SealDMContent(provider, requesterID, output, nonce)
	if err != nil {
		return "", nil, err
	}
	return sealed, []string{SealedOutputTag, hex.EncodeToString(nonce[:])}, nil
}

// OpenTaskOutput opens the sealed output of the kind 52 e with the key of
// its requester (the p tag) or of its provider (the author). It fails with
// ErrDMNotForMe for any other key and with an error wrapping
// ErrDMUnopenable when e has no sealed output or it does not open.
func OpenTaskOutput(key ed25519.PrivateKey, e *protocol.Event) ([]byte, error) {
	nonceHex, requester := e.TagValue(SealedOutputTag), e.TagValue("p")
	var nonce [24]byte
	if e.Kind != protocol.KindTaskResult || len(nonceHex) != 48 || requester == "" {
		return nil, fmt.Errorf("%w: not a kind 52 with a sealed output", ErrDMUnopenable)
	}
	if _, err := hex.Decode(nonce[:], []byte(nonceHex)); err != nil {
		return nil, fmt.Errorf("%w: sealed tag is not hex", ErrDMUnopenable)
	}
	var content struct {
		Output string `json:"output"`
	}
	if err := json.Unmarshal([]byte(e.Content), &content); err != nil {
		return nil, fmt.Errorf("%w: output is not a string", ErrDMUnopenable)
	}
	box, err := protocol.DecodeDMContent(content.Output)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrDMUnopenable, err)
	}
	switch protocol.AgentIDOf(key) {
	case requester:
		return openBox(key, e.AgentID, &nonce, box)
	case e.AgentID:
		return openBox(key, requester, &nonce, box)
	}
	return nil, ErrDMNotForMe
}
