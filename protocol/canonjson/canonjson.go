// Package canonjson appends JSON scalars exactly as json.Marshal followed by
// RFC 8785 (JCS) canonicalization leaves them. The relay writes its
// canonical documents (the event id preimage, the view digests) by hand for
// speed; this is the one place their strings and numbers are encoded.
package canonjson

import (
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"
)

// plain marks the bytes AppendString copies as they are: printable ASCII
// other than " and \.
var plain = func() (t [256]bool) {
	for ch := 0x20; ch < utf8.RuneSelf; ch++ {
		t[ch] = ch != '"' && ch != '\\'
	}
	return t
}()

// AppendString appends s as a JSON string: ", \ and control characters
// escaped (\b \t \n \f \r, else \u00xx), every other valid character
// literal (including <, >, &, U+2028 and U+2029, which encoding/json escapes
// and JCS unescapes), and each byte of invalid UTF-8 replaced by U+FFFD as
// encoding/json does.
func AppendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if plain[s[i]] {
			i++
			continue
		}
		dst = append(dst, s[start:i]...)
		if ch := s[i]; ch < utf8.RuneSelf {
			dst = appendEscape(dst, ch)
			i++
		} else if r, size := utf8.DecodeRuneInString(s[i:]); r == utf8.RuneError && size == 1 {
			dst = utf8.AppendRune(dst, utf8.RuneError)
			i++
		} else {
			dst = append(dst, s[i:i+size]...)
			i += size
		}
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// appendEscape appends the escape of an ASCII byte that needs one.
func appendEscape(dst []byte, ch byte) []byte {
	switch ch {
	case '"':
		return append(dst, '\\', '"')
	case '\\':
		return append(dst, '\\', '\\')
	case '\b':
		return append(dst, '\\', 'b')
	case '\t':
		return append(dst, '\\', 't')
	case '\n':
		return append(dst, '\\', 'n')
	case '\f':
		return append(dst, '\\', 'f')
	case '\r':
		return append(dst, '\\', 'r')
	}
	const hexDigits = "0123456789abcdef"
	return append(dst, '\\', 'u', '0', '0', hexDigits[ch>>4], hexDigits[ch&0xf])
}

// maxExactInt is 2^53: JCS reads every number as a float64, so integers
// beyond it come out as the nearest float64 in ES6 form.
const maxExactInt = 1 << 53

// AppendInt appends n as JCS does: plain digits up to 2^53 in magnitude,
// the float64 form beyond.
func AppendInt(dst []byte, n int64) []byte {
	if -maxExactInt <= n && n <= maxExactInt {
		return strconv.AppendInt(dst, n, 10)
	}
	return AppendFloat(dst, float64(n))
}

// AppendFloat appends f as ES6 Number.prototype.toString does
// (jcs.NumberToJSON): −0 as 0, plain decimals for 1e-6 ≤ |f| < 1e21,
// exponent form otherwise. It panics on NaN or ±Inf, which json.Marshal
// cannot encode either: canonical documents hold only finite numbers, so
// that is a programming error.
func AppendFloat(dst []byte, f float64) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		panic(fmt.Sprintf("canonjson: non-finite number %v", f))
	}
	if f == 0 {
		return append(dst, '0')
	}
	if abs := math.Abs(f); abs >= 1e-6 && abs < 1e21 {
		return strconv.AppendFloat(dst, f, 'f', -1, 64)
	}
	start := len(dst)
	dst = strconv.AppendFloat(dst, f, 'e', -1, 64)
	// Go writes at least two exponent digits (1e-07); ES6 writes 1e-7.
	n := len(dst)
	if n-start >= 4 && dst[n-4] == 'e' && dst[n-2] == '0' {
		dst[n-2] = dst[n-1]
		dst = dst[:n-1]
	}
	return dst
}
