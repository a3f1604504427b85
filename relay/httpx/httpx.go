// Package httpx holds what every HTTP adapter of the relay shares: the
// query-parameter rules (unknown or repeated parameters are 400s), the
// parameter parsers, and the error that carries Retry-After. The core
// (package relay) and every capability module answer with these, so a
// rule about parameters lives in one place.
package httpx

import (
	"net/url"
	"strconv"

	"github.com/anp2net/relay/protocol"
	"github.com/labstack/echo/v4"
)

// Parameter error codes (400).
const (
	CodeBadParameter = "invalid_parameter"
	CodeUnknownParam = "unknown_parameter"
)

// RetryError is a 429 (or Status, when set: a 503) that tells the
// client, in Retry-After, how many whole seconds to wait.
type RetryError struct {
	Err    *protocol.Error
	After  int
	Status int
}

func (e *RetryError) Error() string { return e.Err.Detail }
func (e *RetryError) Unwrap() error { return e.Err }

// Params returns the query parameters, or a 400 for any parameter not in
// allowed (unknown_parameter) and any given twice (invalid_parameter).
func Params(c echo.Context, allowed ...string) (url.Values, error) {
	v := c.QueryParams()
	for name, vals := range v {
		ok := false
		for _, a := range allowed {
			ok = ok || a == name
		}
		if !ok {
			return nil, protocol.Errorf(CodeUnknownParam, "unknown query parameter %q", name)
		}
		if len(vals) != 1 {
			return nil, protocol.Errorf(CodeBadParameter, "parameter %q given %d times", name, len(vals))
		}
	}
	return v, nil
}

// HexParam returns the path parameter name, or a 400 unless it is 64
// lowercase hex characters.
func HexParam(c echo.Context, name string) (string, error) {
	v := c.Param(name)
	if !protocol.IsHex64(v) {
		return "", protocol.Errorf(CodeBadParameter, "%s must be 64 lowercase hex characters", name)
	}
	return v, nil
}

// AgentOnly is the agent_id path parameter of a route that takes no
// query parameters (the error of Params or of HexParam otherwise).
func AgentOnly(c echo.Context) (string, error) {
	if _, err := Params(c); err != nil {
		return "", err
	}
	return HexParam(c, "agent_id")
}

// IntParam parses an optional integer parameter: def when absent, a 400
// unless it is an integer within [lo, hi].
func IntParam(v url.Values, name string, def, lo, hi int64) (int64, error) {
	s := v.Get(name)
	if s == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < lo || n > hi {
		return 0, protocol.Errorf(CodeBadParameter, "%s must be an integer from %d to %d", name, lo, hi)
	}
	return n, nil
}

// NonNegative parses s as an integer in [0, 2^53−1], or answers a 400
// naming the parameter.
func NonNegative(name, s string) (int64, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || n > protocol.MaxSafeInteger {
		return 0, protocol.Errorf(CodeBadParameter, "%s must be a non-negative integer", name)
	}
	return n, nil
}

// BoolParam parses an optional boolean parameter (false when absent), or
// answers a 400.
func BoolParam(v url.Values, name string) (bool, error) {
	s, ok := v[name]
	if !ok {
		return false, nil
	}
	b, err := strconv.ParseBool(s[0])
	if err != nil {
		return false, protocol.Errorf(CodeBadParameter, "%s must be true or false", name)
	}
	return b, nil
}

// NonNil returns s, or an empty slice for nil, so that JSON says [] and
// never null.
func NonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
