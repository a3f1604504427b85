package protocol

import (
	"errors"
	"fmt"
	"strings"
)

// Error is a violation of a protocol rule, carrying a stable snake_case code
// that the HTTP layer maps to a status (400 unless the code says otherwise).
type Error struct {
	Code   string
	Detail string
}

func (e *Error) Error() string { return e.Detail }

// Errorf builds an *Error with the given code and a formatted detail.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Detail: fmt.Sprintf(format, args...)}
}

// FieldError is one entry of a malformed-envelope (422) answer, in the shape
// FastAPI clients already parse: {"loc": [...], "msg": "...", "type": "..."}.
type FieldError struct {
	Loc  []any  `json:"loc"`
	Msg  string `json:"msg"`
	Type string `json:"type"`
}

// EnvelopeError reports every way an envelope failed to decode. It maps to
// HTTP 422.
type EnvelopeError struct {
	Fields []FieldError
}

func (e *EnvelopeError) Error() string {
	parts := make([]string, 0, len(e.Fields))
	for _, f := range e.Fields {
		loc := make([]string, 0, len(f.Loc))
		for _, l := range f.Loc {
			loc = append(loc, fmt.Sprint(l))
		}
		parts = append(parts, strings.Join(loc, ".")+": "+f.Msg)
	}
	return "malformed envelope: " + strings.Join(parts, "; ")
}

func (e *EnvelopeError) add(msg, typ string, loc ...any) {
	e.Fields = append(e.Fields, FieldError{Loc: append([]any{"body"}, loc...), Msg: msg, Type: typ})
}

// Stable error codes produced by this package.
const (
	CodeContentTooLarge = "content_too_large"
	CodeTooManyTags     = "too_many_tags"
	CodeTagTooLarge     = "tag_value_too_large"
	CodeTooFarFuture    = "created_at_too_far_in_future"
	CodeTooFarPast      = "created_at_too_far_in_past"
	CodeIDMismatch      = "id_mismatch"
	CodeBadSignature    = "invalid_signature"
	CodeWeakKey         = "weak_key" // agent_id is a small-order or non-canonical key (D14)
	CodePoWRequired     = "pow_required"
	CodePoWMalformed    = "pow_malformed"
	CodePoWBelowMinimum = "pow_below_minimum"
	CodePoWNotMet       = "pow_does_not_meet_declared"
)

// CodeOf is the stable code of a rejection: a *Error's code,
// malformed_envelope for an *EnvelopeError (a 422), invalid otherwise.
func CodeOf(err error) string {
	var pe *Error
	var env *EnvelopeError
	switch {
	case errors.As(err, &pe):
		return pe.Code
	case errors.As(err, &env):
		return "malformed_envelope"
	}
	return "invalid"
}
