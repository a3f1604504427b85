package trust

import (
	"crypto/sha256"
	"fmt"
	"hash"
	"math"
	"strconv"
	"unicode/utf8"
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

// str appends s as a JSON string exactly as json.Marshal followed by
// jcs.Transform writes it: ", \ and control characters escaped (\b \t \n
// \f \r, else \u00xx), every other valid character literal (including <, >,
// &, U+2028 and U+2029, which encoding/json escapes and JCS unescapes), and
// each byte of invalid UTF-8 replaced by U+FFFD as encoding/json does.
func (c *canon) str(s string) {
	c.b = append(c.b, '"')
	start := 0
	for i := 0; i < len(s); {
		if plainASCII[s[i]] {
			i++
			continue
		}
		c.b = append(c.b, s[start:i]...)
		if ch := s[i]; ch < utf8.RuneSelf {
			c.escape(ch)
			i++
		} else if r, size := utf8.DecodeRuneInString(s[i:]); r == utf8.RuneError && size == 1 {
			c.b = utf8.AppendRune(c.b, utf8.RuneError)
			i++
		} else {
			c.b = append(c.b, s[i:i+size]...)
			i += size
		}
		start = i
	}
	c.b = append(c.b, s[start:]...)
	c.b = append(c.b, '"')
}

// plainASCII marks the bytes str copies as they are: printable ASCII other
// than " and \.
var plainASCII = func() (t [256]bool) {
	for ch := 0x20; ch < utf8.RuneSelf; ch++ {
		t[ch] = ch != '"' && ch != '\\'
	}
	return t
}()

// escape appends the JCS escape of an ASCII byte that needs one.
func (c *canon) escape(ch byte) {
	switch ch {
	case '"':
		c.b = append(c.b, '\\', '"')
	case '\\':
		c.b = append(c.b, '\\', '\\')
	case '\b':
		c.b = append(c.b, '\\', 'b')
	case '\t':
		c.b = append(c.b, '\\', 't')
	case '\n':
		c.b = append(c.b, '\\', 'n')
	case '\f':
		c.b = append(c.b, '\\', 'f')
	case '\r':
		c.b = append(c.b, '\\', 'r')
	default:
		const hexDigits = "0123456789abcdef"
		c.b = append(c.b, '\\', 'u', '0', '0', hexDigits[ch>>4], hexDigits[ch&0xf])
	}
}

// maxExactInt is 2^53: JCS reads every number as a float64, so integers
// beyond it come out as the nearest float64 in ES6 form.
const maxExactInt = 1 << 53

// int appends n as JCS does: plain digits up to 2^53 in magnitude, the
// float64 form beyond.
func (c *canon) int(n int64) {
	if -maxExactInt <= n && n <= maxExactInt {
		c.b = strconv.AppendInt(c.b, n, 10)
		return
	}
	c.float(float64(n))
}

// float appends f as ES6 Number.prototype.toString does (jcs.NumberToJSON):
// −0 as 0, plain decimals for 1e-6 ≤ |f| < 1e21, exponent form otherwise.
// It panics on NaN or ±Inf, which json.Marshal cannot encode either: digest
// documents hold only finite numbers, so that is a programming error.
func (c *canon) float(f float64) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		panic(fmt.Sprintf("trust: non-finite number %v in digest document", f))
	}
	if f == 0 {
		c.b = append(c.b, '0')
		return
	}
	if abs := math.Abs(f); abs >= 1e-6 && abs < 1e21 {
		c.b = strconv.AppendFloat(c.b, f, 'f', -1, 64)
		return
	}
	start := len(c.b)
	c.b = strconv.AppendFloat(c.b, f, 'e', -1, 64)
	// Go writes at least two exponent digits (1e-07); ES6 writes 1e-7.
	n := len(c.b)
	if n-start >= 4 && c.b[n-4] == 'e' && c.b[n-2] == '0' {
		c.b[n-2] = c.b[n-1]
		c.b = c.b[:n-1]
	}
}

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
