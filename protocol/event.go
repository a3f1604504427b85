package protocol

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"

	"github.com/anp2net/relay/protocol/sigverify"
)

// Event is the signed ANP2 envelope (seed §3).
type Event struct {
	ID        string     `json:"id"`
	AgentID   string     `json:"agent_id"`
	CreatedAt int64      `json:"created_at"`
	Kind      int64      `json:"kind"`
	Tags      [][]string `json:"tags"`
	Content   string     `json:"content"`
	Sig       string     `json:"sig"`
}

// MaxSafeInteger is the largest integer JSON, JCS and the CBOR mapping all
// represent exactly (2^53-1); created_at and kind must not exceed it.
const MaxSafeInteger = 1<<53 - 1

// CanonicalPayload returns the RFC 8785 (JCS) bytes of
// [agent_id, created_at, kind, tags, content], the preimage of the event id.
func (e *Event) CanonicalPayload() []byte {
	return AppendCanonicalPayload(make([]byte, 0, 128+len(e.Content)+32*len(e.Tags)), e)
}

// AppendCanonicalPayload appends the JCS id preimage of e to dst.
func AppendCanonicalPayload(dst []byte, e *Event) []byte {
	dst = append(dst, '[')
	dst = appendJCSString(dst, e.AgentID)
	dst = append(dst, ',')
	dst = appendInt(dst, e.CreatedAt)
	dst = append(dst, ',')
	dst = appendInt(dst, e.Kind)
	dst = append(dst, ',')
	dst = appendTags(dst, e.Tags)
	dst = append(dst, ',')
	dst = appendJCSString(dst, e.Content)
	return append(dst, ']')
}

// ComputeID returns SHA-256 of the canonical payload. The payload of a
// usual event is built on the stack: only a larger one allocates.
func (e *Event) ComputeID() [32]byte {
	var buf [1024]byte
	return sha256.Sum256(AppendCanonicalPayload(buf[:0], e))
}

// IDBytes decodes e.ID; ok is false when it is not 64 hex characters.
func (e *Event) IDBytes() (id [32]byte, ok bool) {
	if len(e.ID) != 64 {
		return id, false
	}
	_, err := hex.Decode(id[:], []byte(e.ID))
	return id, err == nil
}

// CheckID reports an id_mismatch *Error when e.ID is not the hash of its payload.
func (e *Event) CheckID() error {
	want := e.ComputeID()
	if got, ok := e.IDBytes(); !ok || got != want {
		return Errorf(CodeIDMismatch, "id does not match sha256(jcs([agent_id, created_at, kind, tags, content])): expected %x", want)
	}
	return nil
}

// CheckSig reports an invalid_signature *Error unless e.Sig is a valid Ed25519
// signature by e.AgentID over the raw id bytes, by libsodium's rules (D14;
// checked through sigverify.Default, which is faster for agents seen
// before), and a weak_key *Error when e.AgentID is a key no signature is
// valid under by those rules (small-order or non-canonical).
func (e *Event) CheckSig() error {
	pub, sig, id, err := e.sigParts()
	if err != nil {
		return err
	}
	if !sigverify.Default.Verify(pub, id, sig) {
		return errBadSig()
	}
	return nil
}

// sigParts decodes what the signature check reads: the key, the
// signature and the id. It reports a weak_key *Error for a key libsodium
// refuses whatever the signature.
// The three are decoded into one allocation.
func (e *Event) sigParts() (pub, sig, id []byte, err error) {
	var ok bool
	b := new(struct {
		pub [ed25519.PublicKeySize]byte
		sig [ed25519.SignatureSize]byte
		id  [32]byte
	})
	b.id, ok = e.IDBytes()
	if !ok || !decodeHex(b.pub[:], e.AgentID) || !decodeHex(b.sig[:], e.Sig) {
		return nil, nil, nil, Errorf(CodeBadSignature, "signature or key is not well-formed hex")
	}
	if sigverify.WeakKey(b.pub[:]) {
		return nil, nil, nil, Errorf(CodeWeakKey, "agent_id is a small-order or non-canonical Ed25519 key, under which anyone can sign")
	}
	return b.pub[:], b.sig[:], b.id[:], nil
}

// decodeHex decodes s, which must be exactly 2*len(dst) hex characters
// (either case, as hex.DecodeString takes them), into dst.
func decodeHex(dst []byte, s string) bool {
	if len(s) != 2*len(dst) {
		return false
	}
	_, err := hex.Decode(dst, []byte(s))
	return err == nil
}

func errBadSig() error {
	return Errorf(CodeBadSignature, "signature does not verify against agent_id")
}

// AgentIDOf returns the agent_id (hex public key) of priv.
func AgentIDOf(priv ed25519.PrivateKey) string {
	return hex.EncodeToString(priv.Public().(ed25519.PublicKey))
}

// Sign fills AgentID, ID and Sig of e from priv. Fields other than those three
// must be final (mine PoW first, with AgentID already set, see Mine).
func (e *Event) Sign(priv ed25519.PrivateKey) {
	e.AgentID = AgentIDOf(priv)
	id := e.ComputeID()
	e.ID = hex.EncodeToString(id[:])
	e.Sig = hex.EncodeToString(ed25519.Sign(priv, id[:]))
}

// TagValue returns the second element of the first tag named name, or "".
func (e *Event) TagValue(name string) string {
	for _, t := range e.Tags {
		if len(t) >= 2 && t[0] == name {
			return t[1]
		}
	}
	return ""
}

// TagValues returns the second element of every tag named name.
func (e *Event) TagValues(name string) []string {
	var out []string
	for _, t := range e.Tags {
		if len(t) >= 2 && t[0] == name {
			out = append(out, t[1])
		}
	}
	return out
}

// Less orders events by (created_at, id), the protocol's global order (§10.1).
func Less(a, b *Event) bool {
	if a.CreatedAt != b.CreatedAt {
		return a.CreatedAt < b.CreatedAt
	}
	return a.ID < b.ID
}

// IsHex64 reports whether s is 64 lowercase hex characters.
func IsHex64(s string) bool { return isLowerHex(s, 64) }

// isLowerHex reports whether s is n lowercase hex characters. It looks
// every byte up without branching on it: the two ranges of a comparison
// chain mispredict on random hex, which made it most of the decoder's time.
func isLowerHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	var bad byte
	for i := 0; i < len(s); i++ {
		bad |= notLowerHex[s[i]]
	}
	return bad == 0
}

// notLowerHex is 1 for every byte but 0-9 and a-f.
var notLowerHex = func() (t [256]byte) {
	for i := range t {
		t[i] = 1
	}
	for _, c := range "0123456789abcdef" {
		t[c] = 0
	}
	return t
}()
