package tlog

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// Checkpoint is a signed tree head (C2SP tlog-checkpoint): the note text
//
//	<origin>
//	<size>
//	<base64 root hash>
//
// signed as a C2SP signed-note.
type Checkpoint struct {
	Origin string
	Size   int64
	Root   tlog.Hash
	// Note is the signed note (text and signature lines).
	Note []byte
	// At is when it was signed.
	At time.Time
}

// FormatCheckpoint returns the note text of a checkpoint (C2SP
// tlog-checkpoint, no extension lines).
func FormatCheckpoint(origin string, size int64, root tlog.Hash) []byte {
	return fmt.Appendf(nil, "%s\n%d\n%s\n", origin, size, base64.StdEncoding.EncodeToString(root[:]))
}

// ParseCheckpoint parses the text of a checkpoint note (its first three
// lines; extension lines are ignored). It fails on a malformed text.
func ParseCheckpoint(text string) (origin string, size int64, root tlog.Hash, err error) {
	lines := strings.SplitN(text, "\n", 4)
	if len(lines) < 4 || lines[0] == "" {
		return "", 0, root, fmt.Errorf("checkpoint: want origin, size and root lines")
	}
	size, err = strconv.ParseInt(lines[1], 10, 64)
	if err != nil || size < 0 || strconv.FormatInt(size, 10) != lines[1] {
		return "", 0, root, fmt.Errorf("checkpoint: bad size %q", lines[1])
	}
	h, err := base64.StdEncoding.Strict().DecodeString(lines[2])
	if err != nil || len(h) != tlog.HashSize {
		return "", 0, root, fmt.Errorf("checkpoint: bad root %q", lines[2])
	}
	copy(root[:], h)
	return lines[0], size, root, nil
}

// signerFor returns the note signer and the verifier key (name+hash+key)
// of key under name.
func signerFor(name string, key ed25519.PrivateKey) (note.Signer, string, error) {
	vkey, err := note.NewEd25519VerifierKey(name, key.Public().(ed25519.PublicKey))
	if err != nil {
		return nil, "", err
	}
	// vkey is name+hash+base64(0x01 ‖ public key); the signer key is the
	// same with the seed in place of the public key.
	// (base64 may hold '+': the hash is the 8 hex digits after the name).
	hash := strings.TrimPrefix(vkey, name+"+")[:8]
	skey := "PRIVATE+KEY+" + name + "+" + hash + "+" + base64.StdEncoding.EncodeToString(append([]byte{1}, key.Seed()...))
	s, err := note.NewSigner(skey)
	if err != nil {
		return nil, "", err
	}
	return s, vkey, nil
}

// sign returns the checkpoint of (size, root) signed by s.
func sign(s note.Signer, origin string, size int64, root tlog.Hash, at time.Time) (*Checkpoint, error) {
	msg, err := note.Sign(&note.Note{Text: string(FormatCheckpoint(origin, size, root))}, s)
	if err != nil {
		return nil, fmt.Errorf("sign checkpoint: %w", err)
	}
	return &Checkpoint{Origin: origin, Size: size, Root: root, Note: msg, At: at}, nil
}

// OriginOf is the checkpoint origin of a relay whose public base URL is
// base: the URL without its scheme and trailing slash, then "/tlog".
func OriginOf(base string) string {
	if _, rest, ok := strings.Cut(base, "://"); ok {
		base = rest
	}
	base = strings.TrimRight(base, "/")
	if base == "" {
		base = "localhost"
	}
	return base + "/tlog"
}

// idOf returns the id of the event whose stored compact JSON is body
// (protocol.AppendJSON writes the id first).
func idOf(body []byte) ([32]byte, error) {
	var id [32]byte
	const pre = `{"id":"`
	if !bytes.HasPrefix(body, []byte(pre)) || len(body) < len(pre)+64 {
		return id, fmt.Errorf("stored event without a leading id")
	}
	if _, err := hex.Decode(id[:], body[len(pre):len(pre)+64]); err != nil {
		return id, fmt.Errorf("stored event id: %w", err)
	}
	return id, nil
}

// ErrInconsistent: a consistency proof does not show that one tree
// extends the other.
var ErrInconsistent = errors.New("the trees are not consistent")

// CheckConsistencyAnswer checks the body of a GET /tlog/consistency
// answer (SPEC §21.4, its proof in hex): the proof must show that the
// tree of to entries with root toRoot extends the tree of from entries
// with root fromRoot. A malformed body is an error of its own; a proof
// that does not hold wraps ErrInconsistent.
func CheckConsistencyAnswer(body []byte, from int64, fromRoot tlog.Hash, to int64, toRoot tlog.Hash) error {
	var ans struct{ Proof []string }
	if err := json.Unmarshal(body, &ans); err != nil {
		return fmt.Errorf("consistency answer: %w", err)
	}
	p := make(tlog.TreeProof, len(ans.Proof))
	for i, s := range ans.Proof {
		h, err := hex.DecodeString(s)
		if err != nil || len(h) != tlog.HashSize {
			return fmt.Errorf("consistency proof hash %q", s)
		}
		p[i] = tlog.Hash(h)
	}
	if err := tlog.CheckTree(p, to, toRoot, from, fromRoot); err != nil {
		return fmt.Errorf("%w: %v", ErrInconsistent, err)
	}
	return nil
}
