// Package eventlog defines the event log as the relay's core needs it: an
// append-only, durable set of signed events with a commit hook, lookups,
// filtered queries, an export by sequence, bulk loading and the source of
// the reconciliation index. The SQLite store (relay/sqlite) is its first
// implementation; the conformance suite in relay/eventlog/logtest is what
// any backend must pass.
//
// The types here are plain data shared by the core and every backend, so
// that neither imports the other.
package eventlog

import (
	"bytes"
	"context"
	"errors"

	"github.com/anp2net/relay/protocol"
)

// ErrNotFound is returned when no stored event has the requested id.
var ErrNotFound = errors.New("event not found")

// Committed is an event that has just been made durable.
type Committed struct {
	Seq   int64
	Event *protocol.Event
}

// Result is the outcome of one append.
type Result struct {
	Seq       int64
	Duplicate bool
}

// Record is one event to append, with the bytes it arrived as.
type Record struct {
	Event *protocol.Event
	// Body is the event's compact JSON (protocol.AppendJSON); the log
	// encodes it when nil, but callers that already have it save the
	// single writer that work. The log may keep it: it must not be changed
	// after an append.
	Body []byte
	// Raw is the received encoding; nil when it equals Body.
	Raw     []byte
	RawType string // "json" or "cbor"
	// ReceivedAt is the relay clock at receipt (unix seconds).
	ReceivedAt int64
	// Admit, when set, is a last rule judged under the log's writer lock
	// (a Log whose Admits method reports true): it runs after every
	// earlier append has been committed and handed to the hook, with no
	// other append in between it and this one's insert. A non-nil error
	// is the append's answer and nothing is stored (SPEC §12.1).
	Admit func() error
}

// NewRecord returns the record of e received as raw (of rawType) at
// receivedAt: its body encoded, and raw kept only when it differs. The
// body is encoded into one buffer of raw's size (the size of a canonical
// JSON raw; at most 16 KiB, so a padded raw does not size it), not grown
// from nothing.
func NewRecord(e *protocol.Event, raw []byte, rawType string, receivedAt int64) Record {
	rec := Record{Event: e, Body: protocol.AppendJSON(make([]byte, 0, min(len(raw), 16<<10)), e), RawType: rawType, ReceivedAt: receivedAt}
	if !bytes.Equal(raw, rec.Body) {
		rec.Raw = raw
	}
	return rec
}

// NewRecordOwning is NewRecord for a raw handed over to the record: the
// caller never changes or reuses it afterwards (a request body read for
// this event alone). When raw is already the canonical body, as most
// clients send it, the record's Body is raw itself instead of a copy;
// the body is compared on the stack, so a usual event allocates nothing
// here.
func NewRecordOwning(e *protocol.Event, raw []byte, rawType string, receivedAt int64) Record {
	var buf [2048]byte
	body := protocol.AppendJSON(buf[:0], e)
	rec := Record{Event: e, RawType: rawType, ReceivedAt: receivedAt}
	switch {
	case !bytes.Equal(raw, body):
		rec.Body, rec.Raw = bytes.Clone(body), raw
	case cap(raw)-len(raw) <= len(raw)/8+64:
		rec.Body = raw[:len(raw):len(raw)]
	default:
		// A body read without a Content-Length may sit in a buffer up
		// to twice its size, which the body cache would then hold.
		rec.Body = bytes.Clone(body)
	}
	return rec
}

// Filter selects events for Query. Empty lists do not filter.
type Filter struct {
	IDs     []string
	Kinds   []int64
	Authors []string
	// Tags maps a tag name to accepted values; an event matches when, for
	// every name, it carries a tag with one of the values.
	Tags map[string][]string
	// MoreTags are further tag conditions, each of which must hold too.
	// Unlike Tags' names they may repeat one: t=a and t=b selects the
	// events that carry both topics.
	MoreTags []TagCond
	Since    *int64
	Until    *int64
	Limit    int
	AsOf     *int64
	// IncludeRevoked keeps events their author revoked (§10.2).
	IncludeRevoked bool
	// Revoked, when set, reports whether an event is revoked, in place of
	// the log's own check (see Query); it must agree with the log.
	Revoked func(id string) bool
}

// TagCond holds when the event carries a tag named Name whose value is
// one of Values.
type TagCond struct {
	Name   string
	Values []string
}

// FoldTags returns f with its first MoreTags condition moved into Tags
// when Tags is empty, so a backend has one driving tag condition
// whenever there is any (Tags is copied, never changed).
func (f Filter) FoldTags() Filter {
	if len(f.Tags) > 0 || len(f.MoreTags) == 0 {
		return f
	}
	f.Tags = map[string][]string{f.MoreTags[0].Name: f.MoreTags[0].Values}
	f.MoreTags = f.MoreTags[1:]
	return f
}

// Stored is an event as kept in the log.
type Stored struct {
	Seq        int64
	Body       []byte
	Raw        []byte
	RawType    string
	ReceivedAt int64
}

// Stats are the log's size figures.
type Stats struct {
	Events int64 `json:"events"`
	MaxSeq int64 `json:"max_seq"`
	Bytes  int64 `json:"bytes"`
}

// IndexSize is one in-memory index a log keeps (see IndexSizer).
type IndexSize struct {
	Name    string // "ids", "authors"
	Entries int64  // events it holds
	Bytes   int64  // an estimate of its heap
}

// IndexSizer is a Log that keeps indexes in memory and reports them, for
// /metrics (the SQLite log; the PostgreSQL log keeps none).
type IndexSizer interface {
	IndexReport() IndexReport
}

// IndexReport is what an IndexSizer reports.
type IndexReport struct {
	Indexes []IndexSize
	// FileBytes is the size of the file that saves them (-1: none).
	FileBytes int64
	// LoadedFrom is the log position the indexes were loaded from at
	// open (0: the whole log was read), and RowsRead the events read
	// from the log after it.
	LoadedFrom, RowsRead int64
}

// Log is the event log the relay's core, its modules and its offline tools
// work on. Every method is safe for concurrent use.
//
// Appends are durable when they return without error: the hook installed
// with SetHook has then received the committed events, in log order, from
// the log's single writer. A second copy of a stored id is a Duplicate and
// changes nothing.
type Log interface {
	// SetHook installs the function that receives every committed batch,
	// in log order, before the appends that made it return.
	SetHook(hook func([]Committed))
	// Append stores one event durably.
	Append(ctx context.Context, rec Record) (Result, error)
	// AppendBatch stores several events in one transaction, durably.
	AppendBatch(ctx context.Context, recs []Record) ([]Result, error)
	// LoadBatch stores events from a source that can give them again (an
	// import, a catch-up): durable at the end of the bulk load at the
	// latest, possibly not before.
	LoadBatch(ctx context.Context, recs []Record) ([]Result, error)
	// BeginBulk starts a bulk load (indexes may be dropped; reads stay
	// correct); EndBulk ends it, reporting its phases to step.
	BeginBulk(ctx context.Context) error
	EndBulk(step func(string)) error
	// Bulk reports whether a bulk load is under way.
	Bulk() bool

	// Lookup reports whether id is stored and, if so, its signature.
	Lookup(ctx context.Context, id string) (sig string, found bool, err error)
	// Get returns the stored event id, or ErrNotFound.
	Get(ctx context.Context, id string) (*Stored, error)
	// GetEvent returns the decoded event id, or ErrNotFound.
	GetEvent(ctx context.Context, id string) (*protocol.Event, error)
	// Author returns the author of the stored event id, or ErrNotFound.
	Author(ctx context.Context, id string) (string, error)
	// Query returns the bodies of the events f selects, newest first.
	Query(ctx context.Context, f Filter) ([][]byte, error)
	// History returns every revision of agent's events of kind, oldest
	// first, revoked ones included.
	History(ctx context.Context, agent string, kind int64) ([][]byte, error)
	// Export calls fn for every event with seq > after, in log order, up to
	// the log's end as of the call (given first to start).
	Export(ctx context.Context, after int64, start func(through int64) error, fn func(seq int64, body []byte) error) error
	// Items calls fn with the (created_at, id) of every stored event
	// matching kinds, authors (empty: any) and created_at ≥ since: the
	// source of a filtered reconciliation index.
	Items(ctx context.Context, kinds []int64, authors []string, since int64, fn func(createdAt int64, id []byte)) error
	// Stats returns the log's size figures.
	Stats(ctx context.Context) (Stats, error)
	// Close releases the log.
	Close() error
}
