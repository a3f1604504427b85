package client

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"slices"

	"filippo.io/edwards25519"
	"github.com/anp2net/relay/protocol"
	"golang.org/x/crypto/nacl/box"
)

// MaxDMPlaintext is the largest plaintext SealDM publishes: it pads to the
// 32,768-byte bucket, whose box in base64 fits the 65,536-byte content
// limit; the next bucket does not.
const MaxDMPlaintext = 32767

// Errors of sealing and opening direct messages. OpenDM wraps
// ErrDMUnopenable for every message it cannot open, whatever the reason,
// so that a reader drops them alike (§4.4.4).
var (
	ErrDMTooLarge   = errors.New("message too large for one kind 3 event (at most 32,767 bytes of plaintext)")
	ErrDMNotForMe   = errors.New("direct message is neither from nor to this key")
	ErrDMUnopenable = errors.New("direct message cannot be opened")
	ErrDMBadKey     = errors.New("agent_id is not a usable Ed25519 public key")
)

// SealDM returns the unsigned kind 3 event carrying plaintext from sender
// to the agent recipientID (§4.4): p and nonce tags, the box in base64.
// nonce nil draws 24 random bytes. The caller sets created_at and signs.
// It fails with ErrDMTooLarge when the sealed content would exceed the
// 65,536-byte content limit, and ErrDMBadKey for an unusable recipient.
func SealDM(sender ed25519.PrivateKey, recipientID string, plaintext []byte, nonce *[24]byte) (*protocol.Event, error) {
	if len(plaintext) > MaxDMPlaintext {
		return nil, ErrDMTooLarge
	}
	if nonce == nil {
		nonce = new([24]byte)
		if _, err := rand.Read(nonce[:]); err != nil {
			return nil, fmt.Errorf("dm nonce: %w", err)
		}
	}
	content, err := SealDMContent(sender, recipientID, plaintext, nonce)
	if err != nil {
		return nil, err
	}
	return &protocol.Event{
		Kind:    protocol.KindDM,
		AgentID: protocol.AgentIDOf(sender),
		Content: content,
		Tags:    [][]string{{"p", recipientID}, {"nonce", hex.EncodeToString(nonce[:])}},
	}, nil
}

// SealDMContent pads plaintext to its §4.4.3 bucket and seals it with
// crypto_box from sender to recipientID under nonce, returning the base64
// content, whatever its size. It fails with ErrDMBadKey for an unusable
// recipient.
func SealDMContent(sender ed25519.PrivateKey, recipientID string, plaintext []byte, nonce *[24]byte) (string, error) {
	peer, err := curvePublic(recipientID)
	if err != nil {
		return "", err
	}
	priv := curvePrivate(sender)
	sealed := box.Seal(nil, PadDM(plaintext), nonce, &peer, &priv)
	clear(priv[:])
	return base64.StdEncoding.EncodeToString(sealed), nil
}

// OpenDM returns the plaintext of the kind 3 event e, whether key is its
// recipient (inbox) or its author (outbox). It fails with ErrDMNotForMe
// when key is neither, and with an error wrapping ErrDMUnopenable for a
// malformed event, a bad key, a failed MAC or bad padding.
func OpenDM(key ed25519.PrivateKey, e *protocol.Event) ([]byte, error) {
	if e.Kind != protocol.KindDM {
		return nil, fmt.Errorf("%w: kind %d", ErrDMUnopenable, e.Kind)
	}
	dm, err := protocol.ParseDM(e)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrDMUnopenable, err)
	}
	me, peerID := protocol.AgentIDOf(key), ""
	switch me {
	case dm.Recipient:
		peerID = e.AgentID
	case e.AgentID:
		peerID = dm.Recipient
	default:
		return nil, ErrDMNotForMe
	}
	return openBox(key, peerID, &dm.Nonce, dm.Box)
}

// openBox opens a box between key and the agent peerID and unpads it.
func openBox(key ed25519.PrivateKey, peerID string, nonce *[24]byte, sealed []byte) ([]byte, error) {
	peer, err := curvePublic(peerID)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrDMUnopenable, err)
	}
	priv := curvePrivate(key)
	padded, ok := box.Open(nil, sealed, nonce, &peer, &priv)
	clear(priv[:])
	if !ok {
		return nil, fmt.Errorf("%w: authentication failed", ErrDMUnopenable)
	}
	return UnpadDM(padded)
}

// PadDM pads plaintext with ISO/IEC 7816-4 (0x80, then zeros) to its
// §4.4.3 bucket (protocol.DMBucket).
func PadDM(plaintext []byte) []byte {
	out := make([]byte, protocol.DMBucket(len(plaintext)))
	copy(out, plaintext)
	out[len(plaintext)] = 0x80
	return out
}

// UnpadDM strips the ISO/IEC 7816-4 padding of padded strictly: padded
// must be exactly the bucket of the plaintext it carries, which is
// followed by 0x80 and zeros only. Otherwise it fails wrapping
// ErrDMUnopenable.
func UnpadDM(padded []byte) ([]byte, error) {
	i := len(padded) - 1
	for i >= 0 && padded[i] == 0 {
		i--
	}
	if i < 0 || padded[i] != 0x80 {
		return nil, fmt.Errorf("%w: no 0x80 padding marker", ErrDMUnopenable)
	}
	if protocol.DMBucket(i) != len(padded) {
		return nil, fmt.Errorf("%w: %d-byte plaintext padded to %d bytes, not its bucket %d", ErrDMUnopenable, i, len(padded), protocol.DMBucket(i))
	}
	return padded[:i], nil
}

// curvePublic is libsodium's crypto_sign_ed25519_pk_to_curve25519: the
// Montgomery u = (1+y)/(1−y) of the Edwards point agentID encodes. Like
// libsodium it refuses an encoding that is not a point, a point of small
// order and one outside the prime-order subgroup.
func curvePublic(agentID string) ([32]byte, error) {
	var out [32]byte
	b, err := hex.DecodeString(agentID)
	if err != nil || len(b) != 32 {
		return out, ErrDMBadKey
	}
	p, err := new(edwards25519.Point).SetBytes(b)
	if err != nil {
		return out, ErrDMBadKey
	}
	id := edwards25519.NewIdentityPoint()
	if new(edwards25519.Point).MultByCofactor(p).Equal(id) == 1 {
		return out, ErrDMBadKey
	}
	// [L]p = [L−1]p + p is the identity only in the prime-order subgroup
	// (libsodium's ge25519_is_on_main_subgroup).
	lp := new(edwards25519.Point).ScalarMult(orderMinusOne, p)
	if lp.Add(lp, p).Equal(id) != 1 {
		return out, ErrDMBadKey
	}
	copy(out[:], p.BytesMontgomery())
	return out, nil
}

// orderMinusOne is L − 1, L the order of the Ed25519 base point.
var orderMinusOne, _ = new(edwards25519.Scalar).SetCanonicalBytes([]byte{
	0xec, 0xd3, 0xf5, 0x5c, 0x1a, 0x63, 0x12, 0x58, 0xd6, 0x9c, 0xf7, 0xa2, 0xde, 0xf9, 0xde, 0x14,
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x10})

// curvePrivate is libsodium's crypto_sign_ed25519_sk_to_curve25519: the
// first half of SHA-512 of the seed, clamped. Callers clear it after use:
// it is derived on every use and never kept (§4.4.1).
func curvePrivate(key ed25519.PrivateKey) [32]byte {
	h := sha512.Sum512(key.Seed())
	var out [32]byte
	copy(out[:], h[:32])
	clear(h[:])
	out[0] &= 248
	out[31] &= 127
	out[31] |= 64
	return out
}

// Message is an opened direct message.
type Message struct {
	Event *protocol.Event
	// Peer is the other agent: the recipient of an outgoing message, the
	// author of an incoming one.
	Peer     string
	Outgoing bool
	Text     []byte
}

// OpenAll opens the kind 3 events of evs with key, once each, newest first
// by (created_at, id). What does not open is dropped silently, as §4.4.4
// asks (never reported to its sender), and counted in dropped.
func OpenAll(key ed25519.PrivateKey, evs []*protocol.Event) (msgs []Message, dropped int) {
	me := protocol.AgentIDOf(key)
	seen := map[string]bool{}
	for _, e := range evs {
		if seen[e.ID] {
			continue
		}
		seen[e.ID] = true
		text, err := OpenDM(key, e)
		if err != nil {
			dropped++
			continue
		}
		m := Message{Event: e, Peer: e.AgentID, Text: text}
		if e.AgentID == me {
			m.Outgoing, m.Peer = true, e.TagValue("p")
		}
		msgs = append(msgs, m)
	}
	slices.SortFunc(msgs, func(a, b Message) int {
		if protocol.Less(a.Event, b.Event) {
			return 1
		}
		if protocol.Less(b.Event, a.Event) {
			return -1
		}
		return 0
	})
	return msgs, dropped
}

// Inbox runs GET /events?kinds=3&p=agentID with query (limit, since,
// until): the messages sent to agentID, which anyone may list (§4.4).
func (c *Client) Inbox(ctx context.Context, agentID string, query url.Values) ([]*protocol.Event, error) {
	q := url.Values{}
	for k, v := range query {
		q[k] = v
	}
	q.Set("kinds", "3")
	q.Set("p", agentID)
	return c.Events(ctx, q)
}

// Outbox runs GET /dms/{agentID} with query (limit, since, until). The
// relay serves it only to agentID itself, so c.Key must be its key; a
// relay answer other than 200 is an *Error (401, 403).
func (c *Client) Outbox(ctx context.Context, agentID string, query url.Values) ([]*protocol.Event, error) {
	var evs []*protocol.Event
	err := c.GetJSON(ctx, "/dms/"+agentID, query, &evs)
	return evs, err
}
