package protocol

import (
	"strconv"
)

// The id preimage has a fixed shape (strings, non-negative integers below
// 2^53, and arrays), so RFC 8785 reduces to JCS string escaping and plain
// integer printing. FuzzCanonicalMatchesJCS checks this against gowebpki/jcs.

const hexDigits = "0123456789abcdef"

func appendJCSString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"':
			dst = append(dst, '\\', '"')
		case '\\':
			dst = append(dst, '\\', '\\')
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\t':
			dst = append(dst, '\\', 't')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\f':
			dst = append(dst, '\\', 'f')
		case '\r':
			dst = append(dst, '\\', 'r')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		start = i + 1
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

func appendInt(dst []byte, n int64) []byte { return strconv.AppendInt(dst, n, 10) }

func appendTags(dst []byte, tags [][]string) []byte {
	dst = append(dst, '[')
	for i, t := range tags {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, '[')
		for j, v := range t {
			if j > 0 {
				dst = append(dst, ',')
			}
			dst = appendJCSString(dst, v)
		}
		dst = append(dst, ']')
	}
	return append(dst, ']')
}

// AppendJSON appends e as compact JSON (fields in envelope order, strings
// escaped as JCS does, so <, > and & stay literal).
func AppendJSON(dst []byte, e *Event) []byte {
	dst = append(dst, `{"id":`...)
	dst = appendJCSString(dst, e.ID)
	dst = append(dst, `,"agent_id":`...)
	dst = appendJCSString(dst, e.AgentID)
	dst = append(dst, `,"created_at":`...)
	dst = appendInt(dst, e.CreatedAt)
	dst = append(dst, `,"kind":`...)
	dst = appendInt(dst, e.Kind)
	dst = append(dst, `,"tags":`...)
	dst = appendTags(dst, e.Tags)
	dst = append(dst, `,"content":`...)
	dst = appendJCSString(dst, e.Content)
	dst = append(dst, `,"sig":`...)
	dst = appendJCSString(dst, e.Sig)
	return append(dst, '}')
}

// MarshalJSON encodes e with AppendJSON.
func (e Event) MarshalJSON() ([]byte, error) { return AppendJSON(nil, &e), nil }
