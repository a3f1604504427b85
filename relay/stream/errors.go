package stream

import (
	"time"

	"github.com/anp2net/relay/protocol"
)

// Stable error codes produced by this package. All are 400s except
// CodeTooManySubscribers (503 with Retry-After, see BusyError) and the
// "unavailable" code of ErrClosed (503).
const (
	// CodeFilterAxisUnknown: a filter= clause names an axis this relay does
	// not know (the spelling, hyphenated).
	CodeFilterAxisUnknown = "filter-axis-unknown"
	// CodeFilterValueInvalid: a filter value is empty, malformed, too long,
	// or the filter as a whole could never match.
	CodeFilterValueInvalid = "filter-value-invalid"
	// CodeUnknownParam duplicates relay.CodeUnknownParam.
	CodeUnknownParam = "unknown_parameter"
	// CodeBadParameter duplicates relay.CodeBadParameter (after,
	// Last-Event-ID, a parameter given twice).
	CodeBadParameter = "invalid_parameter"
	// CodeTooManySubscribers: the hub is at MaxSubscribers.
	CodeTooManySubscribers = "too_many_subscribers"
	// CodeUnavailable duplicates relay.CodeUnavailable (503).
	CodeUnavailable = "unavailable"
)

// ErrClosed is returned by Serve once the hub is closed (503 unavailable).
var ErrClosed = protocol.Errorf(CodeUnavailable, "the event stream is shutting down")

// BusyError is returned by Serve when the hub already holds MaxSubscribers
// streams. The HTTP layer answers 503 with Err's body and a Retry-After of
// RetryAfter (whole seconds, rounded up).
type BusyError struct {
	Err        *protocol.Error
	RetryAfter time.Duration
}

func (e *BusyError) Error() string { return e.Err.Detail }

// Unwrap returns the coded *protocol.Error, so errors.As finds it.
func (e *BusyError) Unwrap() error { return e.Err }

// RetryAfterSeconds returns RetryAfter in whole seconds, at least 1.
func (e *BusyError) RetryAfterSeconds() int {
	s := int((e.RetryAfter + time.Second - 1) / time.Second)
	return max(s, 1)
}
