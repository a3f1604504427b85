package client

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// TreeHead is a relay's signed tree head (SPEC §21.2, C2SP
// tlog-checkpoint), verified under the key it was opened with.
type TreeHead struct {
	Origin string    // the relay's public base URL without its scheme, + "/tlog"
	Size   int64     // entries in the tree
	Root   tlog.Hash // the tree's RFC 6962 root
	Note   []byte    // the signed note as served
}

// Inclusion is a verified proof that an event is in a relay's log.
type Inclusion struct {
	Index      int64     // the event's entry: its seq minus one
	Checkpoint *TreeHead // the signed tree head it is proved against
}

// ErrNotIncluded: a relay's proof does not show the event in the tree its
// own signed checkpoint names. The relay served a proof it cannot back.
var ErrNotIncluded = errors.New("the proof does not show the event in the signed tree")

// TlogKey fetches the relay's checkpoint verifier key (GET /tlog/key,
// `<origin>+<hash>+<key>`). Fetching it from the relay itself trusts it
// on first use: pin the key you got once (or from the relay's operator)
// and pass it to ProveInclusion afterwards.
func (c *Client) TlogKey(ctx context.Context) (string, error) {
	b, err := c.getText(ctx, "/tlog/key")
	if err != nil {
		return "", fmt.Errorf("tlog key: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// OpenCheckpoint verifies a signed checkpoint under verifierKey (a note
// verifier key, as TlogKey returns) and parses its body. It fails when the
// signature does not verify or the body is not a C2SP checkpoint.
func OpenCheckpoint(signed []byte, verifierKey string) (*TreeHead, error) {
	v, err := note.NewVerifier(verifierKey)
	if err != nil {
		return nil, fmt.Errorf("verifier key: %w", err)
	}
	n, err := note.Open(signed, note.VerifierList(v))
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	lines := strings.SplitN(n.Text, "\n", 4)
	if len(lines) < 4 {
		return nil, errors.New("checkpoint: fewer than three lines")
	}
	size, err := strconv.ParseInt(lines[1], 10, 64)
	if err != nil || size < 0 {
		return nil, fmt.Errorf("checkpoint: size %q", lines[1])
	}
	raw, err := base64.StdEncoding.DecodeString(lines[2])
	if err != nil || len(raw) != tlog.HashSize {
		return nil, fmt.Errorf("checkpoint: root %q", lines[2])
	}
	return &TreeHead{Origin: lines[0], Size: size, Root: tlog.Hash(raw), Note: signed}, nil
}

// ProveInclusion asks the relay for the proof that event id is in its log
// (GET /tlog/proof) and checks it: the checkpoint's signature under
// verifierKey, and the RFC 9162 inclusion proof of the entry (the id's 32
// bytes) up to the checkpoint's root. It returns ErrNotIncluded when the
// proof does not lead to that root, and the relay's *Error when it has no
// proof (404 for an unknown event, 503 tlog_pending for one committed an
// instant ago: ask again).
func (c *Client) ProveInclusion(ctx context.Context, id, verifierKey string) (*Inclusion, error) {
	entry, err := hex.DecodeString(id)
	if err != nil || len(entry) != 32 {
		return nil, fmt.Errorf("event id %q: not 64 hex digits", id)
	}
	var ans struct {
		Index      int64    `json:"index"`
		Size       int64    `json:"size"`
		Root       string   `json:"root"`
		Proof      []string `json:"proof"`
		Checkpoint string   `json:"checkpoint"`
	}
	if err := c.GetJSON(ctx, "/tlog/proof", url.Values{"id": {id}}, &ans); err != nil {
		return nil, fmt.Errorf("tlog proof: %w", err)
	}
	cp, err := OpenCheckpoint([]byte(ans.Checkpoint), verifierKey)
	if err != nil {
		return nil, err
	}
	if ans.Size != cp.Size {
		return nil, fmt.Errorf("tlog proof: for a tree of %d entries, the checkpoint signs %d", ans.Size, cp.Size)
	}
	proof := make(tlog.RecordProof, len(ans.Proof))
	for i, h := range ans.Proof {
		b, err := hex.DecodeString(h)
		if err != nil || len(b) != tlog.HashSize {
			return nil, fmt.Errorf("tlog proof: hash %d is not 64 hex digits", i)
		}
		proof[i] = tlog.Hash(b)
	}
	if err := tlog.CheckRecord(proof, cp.Size, cp.Root, ans.Index, tlog.RecordHash(entry)); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNotIncluded, err)
	}
	return &Inclusion{Index: ans.Index, Checkpoint: cp}, nil
}

// getText fetches path and returns a 200 body as it is.
func (c *Client) getText(ctx context.Context, path string) ([]byte, error) {
	var raw []byte
	if err := c.do(ctx, "GET", path, "", nil, &raw); err != nil {
		return nil, err
	}
	return raw, nil
}
