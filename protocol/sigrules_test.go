package protocol

import (
	"bufio"
	"crypto/ed25519"
	"crypto/sha512"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"testing"

	"filippo.io/edwards25519"
	"github.com/anp2net/relay/protocol/sigverify"
)

// Small-order agent_ids: anyone can sign for them under crypto/ed25519.
const (
	identityKey = "0100000000000000000000000000000000000000000000000000000000000000"
	order2Key   = "ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f"
	order4Key   = "0000000000000000000000000000000000000000000000000000000000000000"
)

// identitySig is R = the identity, S = 0: [0]B − [k]A is the identity
// when [k]A is, so it verifies (by crypto/ed25519) under a small-order A
// whenever k is a multiple of A's order.
var identitySig = hex.EncodeToString(append([]byte{1}, make([]byte, 63)...))

// forge returns e signed in pub's name without its key: identitySig, with
// e's content varied until crypto/ed25519 accepts it.
func forge(t *testing.T, e Event, pub string) *Event {
	t.Helper()
	base := e.Content
	for n := range 256 {
		f := e
		if n > 0 {
			f.Content = fmt.Sprintf("%s %d", base, n)
		}
		f.AgentID, f.Sig = pub, identitySig
		id := f.ComputeID()
		f.ID = hex.EncodeToString(id[:])
		pk, _ := hex.DecodeString(pub)
		sig, _ := hex.DecodeString(identitySig)
		if ed25519.Verify(pk, id[:], sig) {
			return &f
		}
	}
	t.Fatalf("no forgery under %s", pub)
	return nil
}

// smallOrderR returns e signed by priv with R the identity and S = k·a:
// a signature crypto/ed25519 accepts and libsodium refuses (small-order R).
func smallOrderR(t *testing.T, e Event, priv ed25519.PrivateKey) *Event {
	t.Helper()
	e.AgentID = AgentIDOf(priv)
	id := e.ComputeID()
	e.ID = hex.EncodeToString(id[:])
	h := sha512.Sum512(priv.Seed())
	a, _ := edwards25519.NewScalar().SetBytesWithClamping(h[:32])
	r := append([]byte{1}, make([]byte, 31)...)
	kh := sha512.New()
	kh.Write(r)
	kh.Write(priv.Public().(ed25519.PublicKey))
	kh.Write(id[:])
	k, _ := edwards25519.NewScalar().SetUniformBytes(kh.Sum(nil))
	sig := append(r, new(edwards25519.Scalar).Multiply(k, a).Bytes()...)
	if !ed25519.Verify(priv.Public().(ed25519.PublicKey), id[:], sig) {
		t.Fatal("crypto/ed25519 refuses the small-order-R signature")
	}
	e.Sig = hex.EncodeToString(sig)
	return &e
}

// TestEdgeCaseVectorsAtProtocolLevel runs the twelve Ed25519 edge cases
// (each message is 32 bytes, so it can stand as an event id) through
// CheckSig and the cosignature check, and requires libsodium's answer:
// accepted, weak_key for a small-order or non-canonical key, otherwise
// invalid_signature.
func TestEdgeCaseVectorsAtProtocolLevel(t *testing.T) {
	f, err := os.Open("../testdata/vectors/ed25519-edge-cases.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		var c struct {
			Case      int    `json:"case"`
			Message   string `json:"message"`
			PubKey    string `json:"pub_key"`
			Signature string `json:"signature"`
			Libsodium bool   `json:"libsodium"`
			Note      string `json:"note"`
		}
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatal(err)
		}
		n++
		e := &Event{ID: c.Message, AgentID: c.PubKey, Sig: c.Signature}
		pub, _ := hex.DecodeString(c.PubKey)
		want := "" // accepted
		switch {
		case c.Libsodium:
		case sigverify.WeakKey(pub):
			want = CodeWeakKey
		default:
			want = CodeBadSignature
		}
		if got := codeOf(e.CheckSig()); got != want {
			t.Errorf("case %d (%s): CheckSig %s, want %s", c.Case, c.Note, got, want)
		}
		msg, _ := hex.DecodeString(c.Message)
		if got := verifyHex(c.PubKey, c.Signature, msg); got != c.Libsodium {
			t.Errorf("case %d (%s): cosignature check %v, libsodium %v", c.Case, c.Note, got, c.Libsodium)
		}
	}
	if n != 12 {
		t.Fatalf("%d cases, want 12", n)
	}
}

// TestForgedEventsRefused forges posts under three small-order agent_ids
// (crypto/ed25519 accepts each) and signs one with a small-order R:
// CheckFirst, CheckAll (dry-run) and CheckFirstBatch (mirrors), mixed
// with honest events, answer weak_key for the keys and invalid_signature
// for R; a cosignature by a small-order key does not count.
func TestForgedEventsRefused(t *testing.T) {
	c := DefaultChecker()
	now := int64(1790000000)
	post := func(s string) Event {
		return Event{CreatedAt: now, Kind: KindPost, Content: s, Tags: [][]string{}}
	}
	honest := func(i byte) *Event {
		e := post(fmt.Sprint("honest ", i))
		e.Sign(cosignKey(40 + i))
		return &e
	}
	evs := []*Event{honest(0), forge(t, post("forged"), identityKey), honest(1),
		forge(t, post("forged"), order2Key), forge(t, post("forged"), order4Key),
		smallOrderR(t, post("small R"), cosignKey(50)), honest(2)}
	want := []string{"", CodeWeakKey, "", CodeWeakKey, CodeWeakKey, CodeBadSignature, ""}
	errs := make([]error, len(evs))
	c.CheckFirstBatch(evs, now, errs)
	for i, e := range evs {
		if got := codeOf(errs[i]); got != want[i] {
			t.Errorf("event %d: CheckFirstBatch %s, want %s", i, got, want[i])
		}
		if got := codeOf(c.CheckFirst(e, now)); got != want[i] {
			t.Errorf("event %d: CheckFirst %s, want %s", i, got, want[i])
		}
		all := c.CheckAll(e, now)
		if len(all) > 0 {
			if codeOf(all[0]) != want[i] || len(all) != 1 {
				t.Errorf("event %d: CheckAll %v, want [%s]", i, all, want[i])
			}
		} else if want[i] != "" {
			t.Errorf("event %d: CheckAll found nothing, want %s", i, want[i])
		}
	}
	// A cosignature in the identity's name: R = identity, S = 0 verifies
	// for it under crypto/ed25519 whatever the digest.
	content := `{"checkpoint_id":"cp-1","state_hash":"ab","event_count":10,"as_of":1790000000}`
	cp := &Event{Kind: KindCheckpoint, Content: content, CreatedAt: now, Tags: [][]string{{"cosign", identityKey, identitySig}}}
	cp.Sign(cosignKey(60))
	if got := Cosignatures(cp); len(got) != 1 || got[0].Valid || got[0].Reason != "bad_signature" {
		t.Fatalf("cosignature by the identity: %+v", got)
	}
}
