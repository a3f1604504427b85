package client

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/anp2net/relay/protocol"
)

func decodeAuth(t *testing.T, h string) *protocol.Event {
	t.Helper()
	raw, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(h, "ANP2 "))
	if err != nil {
		t.Fatal(err)
	}
	e, err := protocol.DecodeJSON(raw)
	if err != nil {
		t.Fatal(err)
	}
	if err := VerifyEvent(e); err != nil {
		t.Fatal(err)
	}
	return e
}

// Every header is a new event, and a request with a body (even an empty
// one) binds it with a payload tag; a bodiless GET has none.
func TestAuthHeaderFreshAndBound(t *testing.T) {
	id, _ := GenerateIdentity()
	a := decodeAuth(t, AuthHeader(id.PrivateKey(), "GET", "http://r/x", nil, 100))
	b := decodeAuth(t, AuthHeader(id.PrivateKey(), "GET", "http://r/x", nil, 100))
	if a.ID == b.ID {
		t.Fatal("two headers for the same request in the same second are the same event")
	}
	if a.TagValue("payload") != "" {
		t.Fatal("payload tag on a bodiless GET")
	}
	empty := sha256.Sum256(nil)
	p := decodeAuth(t, AuthHeader(id.PrivateKey(), "POST", "http://r/x", []byte{}, 100))
	if p.TagValue("payload") != hex.EncodeToString(empty[:]) || p.TagValue("method") != "POST" || p.TagValue("u") != "http://r/x" {
		t.Fatalf("POST header tags %v", p.Tags)
	}
}
