package client

import (
	"bufio"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"testing"

	"filippo.io/edwards25519"
	"github.com/anp2net/relay/protocol"
)

// dmVector is one line of testdata/vectors/dm.jsonl: a message sealed by
// an independent libsodium-compatible implementation (tweetnacl, ed2curve).
type dmVector struct {
	SenderSeed    string     `json:"sender_seed_hex"`
	SenderID      string     `json:"sender_agent_id"`
	RecipientSeed string     `json:"recipient_seed_hex"`
	RecipientID   string     `json:"recipient_agent_id"`
	Nonce         string     `json:"nonce_hex"`
	Plaintext     string     `json:"plaintext"`
	PaddedLength  int        `json:"padded_length"`
	Content       string     `json:"content"`
	Tags          [][]string `json:"tags"`
}

func loadDMVectors(t testing.TB) []dmVector {
	t.Helper()
	f, err := os.Open("../testdata/vectors/dm.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []dmVector
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var v dmVector
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	if err := sc.Err(); err != nil || len(out) != 12 {
		t.Fatalf("read %d vectors: %v", len(out), err)
	}
	return out
}

func seedKey(t testing.TB, s string) ed25519.PrivateKey {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != ed25519.SeedSize {
		t.Fatalf("seed %q", s)
	}
	return ed25519.NewKeyFromSeed(b)
}

// TestDMVectors: every vector opens to its plaintext for the recipient and
// for the sender; sealing again with the same nonce gives the same content
// byte for byte; the two over the content limit open, but SealDM refuses
// to make them.
func TestDMVectors(t *testing.T) {
	for i, v := range loadDMVectors(t) {
		sender, recipient := seedKey(t, v.SenderSeed), seedKey(t, v.RecipientSeed)
		if protocol.AgentIDOf(sender) != v.SenderID || protocol.AgentIDOf(recipient) != v.RecipientID {
			t.Fatalf("vector %d: seeds do not match agent ids", i)
		}
		e := &protocol.Event{Kind: protocol.KindDM, AgentID: v.SenderID, Content: v.Content, Tags: v.Tags}
		for _, k := range []ed25519.PrivateKey{recipient, sender} {
			got, err := OpenDM(k, e)
			if err != nil || string(got) != v.Plaintext {
				t.Fatalf("vector %d: open gave %d bytes, %v", i, len(got), err)
			}
		}
		var nonce [24]byte
		hex.Decode(nonce[:], []byte(v.Nonce))
		content, err := SealDMContent(sender, v.RecipientID, []byte(v.Plaintext), &nonce)
		if err != nil || content != v.Content {
			t.Fatalf("vector %d: reseal differs (%v)", i, err)
		}
		if n := protocol.DMBucket(len(v.Plaintext)); n != v.PaddedLength {
			t.Fatalf("vector %d: bucket %d, want %d", i, n, v.PaddedLength)
		}
		sealed, err := SealDM(sender, v.RecipientID, []byte(v.Plaintext), &nonce)
		if len(v.Plaintext) > MaxDMPlaintext {
			if !errors.Is(err, ErrDMTooLarge) {
				t.Fatalf("vector %d: %d bytes sealed for publishing: %v", i, len(v.Plaintext), err)
			}
			continue
		}
		if err != nil || sealed.Content != v.Content || !reflect.DeepEqual(sealed.Tags, v.Tags) || sealed.AgentID != v.SenderID {
			t.Fatalf("vector %d: SealDM %+v, %v", i, sealed, err)
		}
		if len(sealed.Content) > protocol.DefaultLimits().MaxContentBytes {
			t.Fatalf("vector %d: publishable content of %d bytes", i, len(sealed.Content))
		}
	}
}

func TestDMOpenFailures(t *testing.T) {
	v := loadDMVectors(t)[1]
	sender, recipient := seedKey(t, v.SenderSeed), seedKey(t, v.RecipientSeed)
	stranger := seedKey(t, v.RecipientSeed[2:]+"00")
	good := func() *protocol.Event {
		return &protocol.Event{Kind: protocol.KindDM, AgentID: v.SenderID, Content: v.Content,
			Tags: [][]string{{"p", v.RecipientID}, {"nonce", v.Nonce}}}
	}
	box, _ := base64.StdEncoding.DecodeString(v.Content)
	flip := func(i int) string {
		b := append([]byte(nil), box...)
		b[i] ^= 1
		return base64.StdEncoding.EncodeToString(b)
	}
	cases := []struct {
		name string
		edit func(e *protocol.Event)
		key  ed25519.PrivateKey
		want error
	}{
		{"tampered tag", func(e *protocol.Event) { e.Content = flip(0) }, recipient, ErrDMUnopenable},
		{"tampered ciphertext", func(e *protocol.Event) { e.Content = flip(len(box) - 1) }, recipient, ErrDMUnopenable},
		{"other nonce", func(e *protocol.Event) { e.Tags[1][1] = "00" + v.Nonce[2:] }, recipient, ErrDMUnopenable},
		{"short nonce", func(e *protocol.Event) { e.Tags[1][1] = v.Nonce[:46] }, recipient, ErrDMUnopenable},
		{"bad base64", func(e *protocol.Event) { e.Content = "!" + v.Content[1:] }, recipient, ErrDMUnopenable},
		{"wrong sender claimed", func(e *protocol.Event) { e.AgentID = protocol.AgentIDOf(stranger) }, recipient, ErrDMUnopenable},
		{"wrong recipient", func(e *protocol.Event) {}, stranger, ErrDMNotForMe},
		{"small-order recipient", func(e *protocol.Event) {
			e.Tags[0][1] = "0100000000000000000000000000000000000000000000000000000000000000"
		}, sender, ErrDMUnopenable},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := good()
			c.edit(e)
			if got, err := OpenDM(c.key, e); !errors.Is(err, c.want) {
				t.Fatalf("opened %q, err %v, want %v", got, err, c.want)
			}
		})
	}
	if _, err := SealDM(sender, "0100000000000000000000000000000000000000000000000000000000000000", []byte("x"), nil); !errors.Is(err, ErrDMBadKey) {
		t.Fatalf("sealed to a small-order key: %v", err)
	}
	// The recipient's point plus a point of order 8: libsodium refuses it.
	a, _ := new(edwards25519.Point).SetBytes(recipient.Public().(ed25519.PublicKey))
	tb, _ := hex.DecodeString("c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a")
	tp, err := new(edwards25519.Point).SetBytes(tb)
	if err != nil {
		t.Fatal(err)
	}
	mixed := hex.EncodeToString(new(edwards25519.Point).Add(a, tp).Bytes())
	if _, err := SealDM(sender, mixed, []byte("x"), nil); !errors.Is(err, ErrDMBadKey) {
		t.Fatalf("sealed to a mixed-order key: %v", err)
	}
}

func TestDMPadding(t *testing.T) {
	for _, n := range []int{0, 1, 31, 32, 100, 32767, 32768} {
		pt := make([]byte, n)
		for i := range pt {
			pt[i] = byte(i) | 0x80
		}
		p := PadDM(pt)
		if len(p) != protocol.DMBucket(n) {
			t.Fatalf("%d: padded to %d", n, len(p))
		}
		got, err := UnpadDM(p)
		if err != nil || !reflect.DeepEqual(got, pt) {
			t.Fatalf("%d: unpad %v", n, err)
		}
	}
	bad := map[string][]byte{
		"empty":         {},
		"all zeros":     make([]byte, 32),
		"no marker":     append(make([]byte, 31), 1),
		"over-padded":   append([]byte{'h', 'i', 0x80}, make([]byte, 61)...),
		"not a bucket":  append([]byte{'h', 'i', 0x80}, make([]byte, 30+3)...),
		"marker at end": append(make([]byte, 30), 0x81, 0x80),
	}
	for name, p := range bad {
		if name == "marker at end" {
			// 31 bytes of plaintext fit the 32 bucket: valid.
			if _, err := UnpadDM(p); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			continue
		}
		if _, err := UnpadDM(p); !errors.Is(err, ErrDMUnopenable) {
			t.Fatalf("%s: unpadded", name)
		}
	}
}

// FuzzUnpadDM: unpadding never panics, and whatever it accepts pads back
// to the same bytes.
func FuzzUnpadDM(f *testing.F) {
	f.Add(PadDM([]byte("hi")))
	f.Add(make([]byte, 32))
	f.Add(append([]byte{0x80}, make([]byte, 63)...))
	f.Fuzz(func(t *testing.T, padded []byte) {
		pt, err := UnpadDM(padded)
		if err == nil && !reflect.DeepEqual(PadDM(pt), padded) {
			t.Fatalf("%x unpads to %x, which pads differently", padded, pt)
		}
	})
}

// FuzzOpenDM: opening arbitrary content, nonce and p never panics and
// never yields a plaintext except for the sealed original.
func FuzzOpenDM(f *testing.F) {
	v := dmVector{}
	if vs := loadDMVectors(f); len(vs) > 1 {
		v = vs[1]
	}
	f.Add(v.Content, v.Nonce, v.RecipientID)
	f.Add("AAAA", "zz", v.SenderID)
	f.Add(base64.StdEncoding.EncodeToString(make([]byte, 48)), v.Nonce, v.RecipientID)
	recipient := seedKey(f, v.RecipientSeed)
	f.Fuzz(func(t *testing.T, content, nonce, p string) {
		e := &protocol.Event{Kind: protocol.KindDM, AgentID: v.SenderID, Content: content,
			Tags: [][]string{{"p", p}, {"nonce", nonce}}}
		pt, err := OpenDM(recipient, e)
		if err == nil && (content != v.Content || nonce != v.Nonce || string(pt) != v.Plaintext) {
			t.Fatalf("opened a forgery: %q", pt)
		}
	})
}
