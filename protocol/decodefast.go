package protocol

import (
	"encoding/json"
	"unicode/utf8"
)

// decodeFast parses a well-formed envelope in one pass without reflection.
// It accepts only what the strict decoder accepts and builds the same
// Event; on anything unusual (an unknown, missing or repeated member, a
// malformed value, a number that is not a plain decimal) it reports false
// and DecodeJSON takes the slow path, which also lists the errors.
func decodeFast(b []byte) (*Event, bool) {
	if !utf8.Valid(b) {
		return nil, false
	}
	p := fastParser{b: b}
	e := &Event{}
	var seen uint8
	if !p.consume('{') {
		return nil, false
	}
	for i := 0; ; i++ {
		if i > 0 && !p.consume(',') {
			break
		}
		key, ok := p.plainString()
		if !ok || !p.consume(':') {
			return nil, false
		}
		bit, ok := p.member(e, key)
		if !ok || seen&bit != 0 {
			return nil, false
		}
		seen |= bit
	}
	if !p.consume('}') || seen != 1<<len(envelopeFields)-1 {
		return nil, false
	}
	p.space()
	return e, p.i == len(p.b)
}

type fastParser struct {
	b []byte
	i int
}

func (p *fastParser) space() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// consume skips whitespace and then c, reporting whether c was there.
func (p *fastParser) consume(c byte) bool {
	p.space()
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

// member parses the value of key into e and returns key's bit.
func (p *fastParser) member(e *Event, key string) (uint8, bool) {
	var ok bool
	switch key {
	case "id":
		e.ID, ok = p.plainString()
		ok = ok && isLowerHex(e.ID, 64)
		return 1 << 0, ok
	case "agent_id":
		e.AgentID, ok = p.plainString()
		ok = ok && isLowerHex(e.AgentID, 64)
		return 1 << 1, ok
	case "created_at":
		e.CreatedAt, ok = p.integer()
		return 1 << 2, ok
	case "kind":
		e.Kind, ok = p.integer()
		return 1 << 3, ok
	case "tags":
		e.Tags, ok = p.tags()
		return 1 << 4, ok
	case "content":
		e.Content, ok = p.str()
		return 1 << 5, ok
	case "sig":
		e.Sig, ok = p.plainString()
		ok = ok && isLowerHex(e.Sig, 128)
		return 1 << 6, ok
	}
	return 0, false
}

// plainString parses a string without escapes.
func (p *fastParser) plainString() (string, bool) {
	if !p.consume('"') {
		return "", false
	}
	start := p.i
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			s := string(p.b[start:p.i])
			p.i++
			return s, true
		case c == '\\' || c < 0x20:
			return "", false
		}
		p.i++
	}
	return "", false
}

// str parses any JSON string; escaped ones are decoded by encoding/json so
// that \u escapes and surrogates mean exactly what they mean there.
func (p *fastParser) str() (string, bool) {
	p.space()
	start := p.i
	if s, ok := p.plainString(); ok {
		return s, true
	}
	p.i = start + 1
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '\\':
			p.i += 2
			continue
		case c < 0x20:
			return "", false
		case c == '"':
			p.i++
			var s string
			if json.Unmarshal(p.b[start:p.i], &s) != nil {
				return "", false
			}
			return s, true
		}
		p.i++
	}
	return "", false
}

// integer parses a plain decimal in [0, 2^53-1] without a leading zero.
func (p *fastParser) integer() (int64, bool) {
	p.space()
	start := p.i
	var n int64
	for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
		n = n*10 + int64(p.b[p.i]-'0')
		p.i++
		if p.i-start > 16 {
			return 0, false
		}
	}
	digits := p.i - start
	if digits == 0 || digits > 1 && p.b[start] == '0' || n > MaxSafeInteger {
		return 0, false
	}
	if p.i < len(p.b) {
		switch p.b[p.i] {
		case '.', 'e', 'E':
			return 0, false
		}
	}
	return n, true
}

// tags parses a list of lists of strings.
func (p *fastParser) tags() ([][]string, bool) {
	if !p.consume('[') {
		return nil, false
	}
	out := [][]string{}
	if p.consume(']') {
		return out, true
	}
	for {
		if !p.consume('[') {
			return nil, false
		}
		tag := []string{}
		if !p.consume(']') {
			for {
				s, ok := p.str()
				if !ok {
					return nil, false
				}
				tag = append(tag, s)
				if p.consume(']') {
					break
				}
				if !p.consume(',') {
					return nil, false
				}
			}
		}
		out = append(out, tag)
		if p.consume(']') {
			return out, true
		}
		if !p.consume(',') {
			return nil, false
		}
	}
}
