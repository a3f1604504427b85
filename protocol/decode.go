package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"regexp"
	"unicode/utf8"
)

// envelopeFields lists the envelope's members in order.
var envelopeFields = [...]string{"id", "agent_id", "created_at", "kind", "tags", "content", "sig"}

var decimalInt = regexp.MustCompile(`^(0|[1-9][0-9]*)$`)

// DecodeJSON decodes one event envelope strictly: exactly the seven members,
// no duplicates, no trailing data, every member of its declared type and
// form. Any failure is an *EnvelopeError listing every bad member.
func DecodeJSON(b []byte) (*Event, error) {
	if e, ok := decodeFast(b); ok {
		return e, nil
	}
	return decodeSlow(b)
}

// decodeSlow is the reference decoder: generic JSON, then member checks
// that collect every error.
func decodeSlow(b []byte) (*Event, error) {
	var env EnvelopeError
	if !utf8.Valid(b) {
		env.add("body is not valid UTF-8", "value_error.utf8")
		return nil, &env
	}
	members, err := scanJSONObject(b)
	if err != nil {
		env.add(err.Error(), "value_error.jsondecode")
		return nil, &env
	}
	generic := make(map[string]any, len(members))
	for k, raw := range members {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			env.add("invalid JSON value", "value_error.jsondecode", k)
			continue
		}
		generic[k] = v
	}
	if len(env.Fields) > 0 {
		return nil, &env
	}
	return fromGeneric(generic)
}

// scanJSONObject splits a top-level JSON object into raw members, rejecting
// duplicate keys and trailing data.
func scanJSONObject(b []byte) (map[string]json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	tok, err := dec.Token()
	if err != nil {
		return nil, errors.New("body is not valid JSON")
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, errors.New("event must be a JSON object")
	}
	out := make(map[string]json.RawMessage, 7)
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, errors.New("body is not valid JSON")
		}
		key, _ := tok.(string)
		if _, dup := out[key]; dup {
			return nil, errors.New("duplicate member " + key)
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, errors.New("body is not valid JSON")
		}
		out[key] = raw
	}
	if _, err := dec.Token(); err != nil {
		return nil, errors.New("body is not valid JSON")
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("trailing data after the event object")
	}
	return out, nil
}

// fromGeneric validates a decoded map (from JSON or CBOR) into an Event.
func fromGeneric(m map[string]any) (*Event, error) {
	var env EnvelopeError
	for k := range m {
		if !isEnvelopeField(k) {
			env.add("extra fields not permitted", "value_error.extra", k)
		}
	}
	e := &Event{}
	for _, f := range envelopeFields {
		v, ok := m[f]
		if !ok {
			env.add("field required", "value_error.missing", f)
			continue
		}
		switch f {
		case "id":
			e.ID = hexField(&env, f, v, 64)
		case "agent_id":
			e.AgentID = hexField(&env, f, v, 64)
		case "sig":
			e.Sig = hexField(&env, f, v, 128)
		case "created_at":
			e.CreatedAt = intField(&env, f, v)
		case "kind":
			e.Kind = intField(&env, f, v)
		case "tags":
			e.Tags = tagsField(&env, v)
		case "content":
			s, ok := v.(string)
			if !ok {
				env.add("str type expected", "type_error.str", f)
			}
			e.Content = s
		}
	}
	if len(env.Fields) > 0 {
		return nil, &env
	}
	return e, nil
}

func isEnvelopeField(k string) bool {
	for _, f := range envelopeFields {
		if f == k {
			return true
		}
	}
	return false
}

func hexField(env *EnvelopeError, f string, v any, n int) string {
	s, ok := v.(string)
	if !ok {
		env.add("str type expected", "type_error.str", f)
		return ""
	}
	if !isLowerHex(s, n) {
		env.add("must be "+itoa(n)+" lowercase hex characters", "value_error.str.regex", f)
	}
	return s
}

func intField(env *EnvelopeError, f string, v any) int64 {
	const msg = "must be a non-negative integer no larger than 2^53-1"
	switch n := v.(type) {
	case json.Number:
		if decimalInt.MatchString(string(n)) && len(n) <= 16 {
			if i, err := n.Int64(); err == nil && i <= MaxSafeInteger {
				return i
			}
		}
	case uint64:
		if n <= MaxSafeInteger {
			return int64(n)
		}
	case int64:
		if n >= 0 && n <= MaxSafeInteger {
			return n
		}
	}
	env.add(msg, "type_error.integer", f)
	return 0
}

func tagsField(env *EnvelopeError, v any) [][]string {
	outer, ok := v.([]any)
	if !ok {
		env.add("list of lists of strings expected", "type_error.list", "tags")
		return nil
	}
	tags := make([][]string, len(outer))
	for i, t := range outer {
		inner, ok := t.([]any)
		if !ok {
			env.add("list of strings expected", "type_error.list", "tags", i)
			continue
		}
		tag := make([]string, len(inner))
		for j, s := range inner {
			str, ok := s.(string)
			if !ok {
				env.add("str type expected", "type_error.str", "tags", i, j)
			}
			tag[j] = str
		}
		tags[i] = tag
	}
	return tags
}

func itoa(n int) string { return string(appendInt(nil, int64(n))) }
