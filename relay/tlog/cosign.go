package tlog

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
	"time"

	"golang.org/x/mod/sumdb/note"
)

// C2SP tlog-cosignature/v1: a witness signs, with Ed25519,
//
//	cosignature/v1
//	time <unix seconds>
//	<the checkpoint's note text>
//
// and its note signature is the 8-byte big-endian timestamp followed by
// that signature, under a key ID of SHA-256(name ‖ "\n" ‖ 0x04 ‖ public
// key)[:4]. The note framing is golang.org/x/mod/sumdb/note's; these are
// the Signer and Verifier of that algorithm, which it does not know.

const algCosignature = 0x04

// cosignKeyHash is the key ID of a cosignature key.
func cosignKeyHash(name string, pub ed25519.PublicKey) uint32 {
	h := sha256.New()
	h.Write([]byte(name + "\n"))
	h.Write([]byte{algCosignature})
	h.Write(pub)
	return binary.BigEndian.Uint32(h.Sum(nil))
}

// cosignedMessage is what a cosignature at time ts signs over text.
func cosignedMessage(ts uint64, text []byte) []byte {
	return append(fmt.Appendf(nil, "cosignature/v1\ntime %d\n", ts), text...)
}

// cosigner is a note.Signer producing cosignatures.
type cosigner struct {
	name string
	key  ed25519.PrivateKey
	now  func() time.Time
}

func (c *cosigner) Name() string { return c.name }
func (c *cosigner) KeyHash() uint32 {
	return cosignKeyHash(c.name, c.key.Public().(ed25519.PublicKey))
}
func (c *cosigner) Sign(msg []byte) ([]byte, error) {
	ts := uint64(c.now().Unix())
	sig := binary.BigEndian.AppendUint64(nil, ts)
	return append(sig, ed25519.Sign(c.key, cosignedMessage(ts, msg))...), nil
}

// CosignerKey is the verifier key of a cosigner: name+hash+base64(0x04 ‖
// public key).
func CosignerKey(name string, pub ed25519.PublicKey) string {
	return fmt.Sprintf("%s+%08x+%s", name, cosignKeyHash(name, pub), base64.StdEncoding.EncodeToString(append([]byte{algCosignature}, pub...)))
}

// cosignVerifier is a note.Verifier of cosignatures.
type cosignVerifier struct {
	name string
	hash uint32
	pub  ed25519.PublicKey
}

func (v *cosignVerifier) Name() string    { return v.name }
func (v *cosignVerifier) KeyHash() uint32 { return v.hash }
func (v *cosignVerifier) Verify(msg, sig []byte) bool {
	if len(sig) != 8+ed25519.SignatureSize {
		return false
	}
	return ed25519.Verify(v.pub, cosignedMessage(binary.BigEndian.Uint64(sig), msg), sig[8:])
}

// NewCosignVerifier parses a cosigner's verifier key (see CosignerKey).
// It fails on a malformed key or another algorithm.
func NewCosignVerifier(vkey string) (note.Verifier, error) {
	name, rest, ok1 := strings.Cut(vkey, "+")
	hash16, key64, ok2 := strings.Cut(rest, "+")
	hash, err1 := strconv.ParseUint(hash16, 16, 32)
	key, err2 := base64.StdEncoding.DecodeString(key64)
	if !ok1 || !ok2 || len(hash16) != 8 || err1 != nil || err2 != nil || name == "" ||
		len(key) != 1+ed25519.PublicKeySize || key[0] != algCosignature {
		return nil, fmt.Errorf("malformed cosigner key %q", vkey)
	}
	pub := ed25519.PublicKey(key[1:])
	if uint32(hash) != cosignKeyHash(name, pub) {
		return nil, fmt.Errorf("cosigner key %q: wrong key hash", vkey)
	}
	return &cosignVerifier{name: name, hash: uint32(hash), pub: pub}, nil
}
