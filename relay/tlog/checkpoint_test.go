package tlog

import (
	"bytes"
	"crypto/ed25519"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// TestSignerForEveryKey signs a checkpoint with many relay keys and opens
// it with the published verifier key: base64 keys holding '+' or '/'
// must work as well as the others.
func TestSignerForEveryKey(t *testing.T) {
	for i := range 300 {
		seed := bytes.Repeat([]byte{byte(i), byte(i >> 8), 7}, 11)[:32]
		key := ed25519.NewKeyFromSeed(seed)
		s, vkey, err := signerFor("relay.example:8080/api/tlog", key)
		if err != nil {
			t.Fatalf("key %d: %v", i, err)
		}
		cp, err := sign(s, "relay.example:8080/api/tlog", int64(i), tlog.RecordHash(seed), time.Now())
		if err != nil {
			t.Fatal(err)
		}
		v, err := note.NewVerifier(vkey)
		if err != nil {
			t.Fatalf("key %d: verifier %q: %v", i, vkey, err)
		}
		n, err := note.Open(cp.Note, note.VerifierList(v))
		if err != nil {
			t.Fatalf("key %d: %v", i, err)
		}
		origin, size, root, err := ParseCheckpoint(n.Text)
		if err != nil || origin != "relay.example:8080/api/tlog" || size != int64(i) || root != tlog.RecordHash(seed) {
			t.Fatalf("key %d: parsed %q %d %x %v", i, origin, size, root, err)
		}
	}
}

func TestOriginOf(t *testing.T) {
	for in, want := range map[string]string{
		"https://relay.example/api/": "relay.example/api/tlog",
		"http://127.0.0.1:8080":      "127.0.0.1:8080/tlog",
		"":                           "localhost/tlog",
	} {
		if got := OriginOf(in); got != want {
			t.Errorf("OriginOf(%q) = %q, want %q", in, got, want)
		}
	}
}

// FuzzParseCheckpoint: ParseCheckpoint never panics, and what it accepts
// formats back to the text's first three lines.
func FuzzParseCheckpoint(f *testing.F) {
	f.Add("example.com/tlog\n0\n47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=\n")
	f.Add("o\n12\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\nextension\n")
	f.Add("o\n-1\nx\n")
	f.Add("o\n01\nAAAA\n")
	f.Fuzz(func(t *testing.T, text string) {
		origin, size, root, err := ParseCheckpoint(text)
		if err != nil {
			return
		}
		if got := string(FormatCheckpoint(origin, size, root)); !strings.HasPrefix(text, got) {
			t.Fatalf("%q parsed to %q", text, got)
		}
	})
}
