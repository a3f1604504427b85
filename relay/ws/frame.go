package ws

import (
	"bytes"
	"encoding/json"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay"
)

// Stable error codes of this package (sent in CLOSED, NOTICE and OK
// frames, never as HTTP statuses once the connection is upgraded).
const (
	// CodeInvalidFrame: a client frame is not a JSON array of the
	// documented shape.
	CodeInvalidFrame = "invalid_frame"
	// CodeTooManySubscriptions: a REQ beyond MaxSubscriptions on one
	// connection.
	CodeTooManySubscriptions = "too_many_subscriptions"
	// CodeTooSlow: the client fell too far behind; the connection closes.
	CodeTooSlow = "too_slow"
)

// Frame types a client sends.
const (
	TypeReq   = "REQ"
	TypeClose = "CLOSE"
	TypeEvent = "EVENT"
	TypeAuth  = "AUTH"
)

// maxSubID is the longest subscription id accepted (NIP-01 uses 64).
const maxSubID = 64

// Frame is one parsed client frame.
type Frame struct {
	Type  string
	SubID string // REQ, CLOSE
	// Filter is the REQ filter object (nil when the REQ has none).
	Filter json.RawMessage
	// Event is the EVENT or AUTH event object, the exact bytes received.
	Event json.RawMessage
}

// ParseFrame parses one client text message: ["REQ", sub_id] or
// ["REQ", sub_id, {filter}], ["CLOSE", sub_id], ["EVENT", {event}],
// ["AUTH", {event}]. It fails with a *protocol.Error invalid_frame.
func ParseFrame(b []byte) (Frame, error) {
	var parts []json.RawMessage
	if err := json.Unmarshal(b, &parts); err != nil {
		return Frame{}, bad("a frame must be a JSON array: %v", err)
	}
	if len(parts) == 0 {
		return Frame{}, bad("empty frame")
	}
	var f Frame
	if err := json.Unmarshal(parts[0], &f.Type); err != nil {
		return Frame{}, bad("a frame's first element must be its type, a string")
	}
	switch f.Type {
	case TypeReq:
		if len(parts) < 2 || len(parts) > 3 {
			return Frame{}, bad("REQ takes a subscription id and at most one filter object")
		}
		if len(parts) == 3 {
			if !isObject(parts[2]) {
				return Frame{}, bad("a REQ filter must be a JSON object")
			}
			f.Filter = parts[2]
		}
	case TypeClose:
		if len(parts) != 2 {
			return Frame{}, bad("CLOSE takes exactly a subscription id")
		}
	case TypeEvent, TypeAuth:
		if len(parts) != 2 || !isObject(parts[1]) {
			return Frame{}, bad("%s takes exactly one event object", f.Type)
		}
		f.Event = parts[1]
		return f, nil
	default:
		return Frame{}, bad("unknown frame type %q (known: REQ, CLOSE, EVENT, AUTH)", clip(f.Type))
	}
	if err := json.Unmarshal(parts[1], &f.SubID); err != nil {
		return Frame{}, bad("a subscription id must be a string")
	}
	if f.SubID == "" || len(f.SubID) > maxSubID || !utf8.ValidString(f.SubID) {
		return Frame{}, bad("a subscription id must be 1 to %d bytes of UTF-8", maxSubID)
	}
	return f, nil
}

func isObject(b json.RawMessage) bool {
	b = bytes.TrimSpace(b)
	return len(b) > 0 && b[0] == '{'
}

func bad(format string, a ...any) error { return protocol.Errorf(CodeInvalidFrame, format, a...) }

func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// Limits of GET /events' limit, which a REQ without "after" uses for its
// stored matches.
const (
	defaultLimit = 100
	maxLimit     = 1000
)

// FilterQuery turns a REQ filter object into the query parameters of GET
// /stream (parsed by stream.ParseFilter) and the limit of its stored
// matches. Keys are those parameters; "#x" is accepted for the tag
// parameter x (NIP-01's spelling) and "limit" (1..1000, default 100) caps
// the stored matches. A value is a string (as in a query), a non-negative
// integer, or an array of them (joined with commas, each item's own commas
// and backslashes escaped as relay.SplitList reads them). It fails with a
// *protocol.Error invalid_frame; the parameters themselves are checked by
// stream.ParseFilter.
func FilterQuery(raw json.RawMessage) (url.Values, int, error) {
	v := url.Values{}
	limit := defaultLimit
	if raw == nil {
		return v, limit, nil
	}
	var obj map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&obj); err != nil {
		return nil, 0, bad("a REQ filter must be a JSON object: %v", err)
	}
	for k, val := range obj {
		s, err := paramValue(k, val)
		if err != nil {
			return nil, 0, err
		}
		if k == "limit" {
			n, err := strconv.Atoi(s)
			if err != nil || n < 1 || n > maxLimit {
				return nil, 0, bad("limit must be an integer from 1 to %d", maxLimit)
			}
			limit = n
			continue
		}
		if strings.HasPrefix(k, "#") {
			k = k[1:]
		}
		if v.Has(k) {
			return nil, 0, bad("filter key %q given twice", clip(k))
		}
		v.Set(k, s)
	}
	return v, limit, nil
}

// paramValue renders one filter value as a query parameter value.
func paramValue(k string, val json.RawMessage) (string, error) {
	var x any
	dec := json.NewDecoder(bytes.NewReader(val))
	dec.UseNumber()
	if err := dec.Decode(&x); err != nil {
		return "", bad("filter %q: %v", clip(k), err)
	}
	one := func(x any) (string, bool) {
		switch t := x.(type) {
		case string:
			return t, true
		case json.Number:
			if _, err := strconv.ParseUint(t.String(), 10, 63); err != nil {
				return "", false
			}
			return t.String(), true
		}
		return "", false
	}
	if list, ok := x.([]any); ok {
		if len(list) == 0 {
			return "", bad("filter %q is an empty list; it could never match", clip(k))
		}
		parts := make([]string, len(list))
		for i, el := range list {
			s, ok := one(el)
			if !ok {
				return "", bad("filter %q: list items must be strings or non-negative integers", clip(k))
			}
			parts[i] = relay.EscapeListValue(s) // an item may hold a comma

		}
		return strings.Join(parts, ","), nil
	}
	s, ok := one(x)
	if !ok {
		return "", bad("filter %q must be a string, a non-negative integer or a list of them", clip(k))
	}
	return s, nil
}
