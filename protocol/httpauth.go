package protocol

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
)

// HTTPAuth returns the value of an "Authorization: ANP2 …" header (D4)
// proving priv's identity for one request: a signed kind 27235 event with
// empty content, tags ["u", url] and ["method", method], and ["payload",
// sha256 hex] when body is non-empty, created at now. A random ["nonce",
// 32 hex] tag makes every header distinct: a relay takes each header for
// one request only, and two requests alike in the same second would
// otherwise sign the same event.
func HTTPAuth(priv ed25519.PrivateKey, method, url string, body []byte, now int64) string {
	var nonce [16]byte
	_, _ = rand.Read(nonce[:])
	e := &Event{CreatedAt: now, Kind: KindHTTPAuth, Tags: [][]string{{"u", url}, {"method", method}, {"nonce", hex.EncodeToString(nonce[:])}}}
	if len(body) > 0 {
		sum := sha256.Sum256(body)
		e.Tags = append(e.Tags, []string{"payload", hex.EncodeToString(sum[:])})
	}
	e.Sign(priv)
	return "ANP2 " + base64.StdEncoding.EncodeToString(AppendJSON(nil, e))
}
