package trust

import (
	"crypto/sha256"
	"hash"
	"strconv"

	"github.com/anp2net/relay/protocol/canonjson"
)

// The digests hash the RFC 8785 (JCS) form of a JSON document. Building the
// document as Go values and running json.Marshal + jcs.Transform over it
// takes over a second at 100k votes, so the documents are written in
// canonical form directly: keys in sorted order (all keys are ASCII, so
// bytewise), omitempty as in the JSON tags, strings as encoding/json then
// JCS would leave them, numbers in ES6 form. digest_test.go keeps the old
// path as the oracle and checks the bytes are identical.

// flushAt is the buffer size past which a hashing canon hands its bytes to
// the hash, so a digest never holds the whole document in memory.
const flushAt = 32 << 10

// canon appends canonical JSON to b. When h is set, flush moves the bytes
// written so far into h; with h nil, b accumulates the whole document.
type canon struct {
	b []byte
	h hash.Hash
}

// canonicalDigest returns SHA-256 over the document write produces.
func canonicalDigest(write func(*canon)) [32]byte {
	c := canon{b: make([]byte, 0, 2*flushAt), h: sha256.New()}
	write(&c)
	c.h.Write(c.b)
	var out [32]byte
	c.h.Sum(out[:0])
	return out
}

// flush hashes and drops the buffered bytes once there are enough of them.
// Call it only between complete values.
func (c *canon) flush() {
	if c.h != nil && len(c.b) >= flushAt {
		c.h.Write(c.b)
		c.b = c.b[:0]
	}
}

// raw appends s verbatim (punctuation and pre-quoted keys).
func (c *canon) raw(s string) { c.b = append(c.b, s...) }

// str appends s as a JSON string as json.Marshal + jcs.Transform would.
func (c *canon) str(s string) { c.b = canonjson.AppendString(c.b, s) }

// int appends n as JCS does (the float64 form beyond 2^53).
func (c *canon) int(n int64) { c.b = canonjson.AppendInt(c.b, n) }

// float appends f in ES6 form; it panics on NaN or ±Inf.
func (c *canon) float(f float64) { c.b = canonjson.AppendFloat(c.b, f) }

// bool appends true or false.
func (c *canon) bool(v bool) { c.b = strconv.AppendBool(c.b, v) }

// strings appends a string array; a nil slice is null, as json.Marshal
// writes it.
func (c *canon) strings(list []string) {
	if list == nil {
		c.raw("null")
		return
	}
	c.b = append(c.b, '[')
	for i, s := range list {
		if i > 0 {
			c.b = append(c.b, ',')
		}
		c.str(s)
	}
	c.b = append(c.b, ']')
}
