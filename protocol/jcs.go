package protocol

import (
	"strconv"

	"github.com/anp2net/relay/protocol/canonjson"
)

// The id preimage has a fixed shape (strings, non-negative integers below
// 2^53, and arrays), so RFC 8785 reduces to JCS string escaping and plain
// integer printing. FuzzCanonicalMatchesJCS checks this against gowebpki/jcs.

// appendJCSString appends s as RFC 8785 writes it (canonjson.AppendString).
func appendJCSString(dst []byte, s string) []byte { return canonjson.AppendString(dst, s) }

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
