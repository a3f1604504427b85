package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/anp2net/relay/protocol"
)

// ErrBadEvent wraps an event a relay served that fails VerifyEvent: the
// read that got it fails rather than hand it over.
var ErrBadEvent = errors.New("relay served an event that does not verify")

// Filter selects events, as GET /events, /stream and the WebSocket's REQ
// take it (SPEC §3.1, §7, §14). Zero fields do not filter.
type Filter struct {
	IDs     []string // event ids (64 hex), up to 1000
	Authors []string // agent_ids (64 hex), up to 1000
	Kinds   []int64  // any of these kinds
	// Tags maps a tag name (e, p, t, cap, cap_wanted, any single letter)
	// to the values any of which matches; several names must all match.
	Tags  map[string][]string
	Since int64 // created_at ≥ Since
	Until int64 // created_at ≤ Until
	Limit int   // GET /events and a REQ without after: 1..1000 (0: the relay's 100)
}

// values writes f as query parameters.
func (f Filter) values() url.Values {
	q := url.Values{}
	if len(f.IDs) > 0 {
		q.Set("ids", strings.Join(f.IDs, ","))
	}
	if len(f.Authors) > 0 {
		q.Set("authors", strings.Join(f.Authors, ","))
	}
	if len(f.Kinds) > 0 {
		ks := make([]string, len(f.Kinds))
		for i, k := range f.Kinds {
			ks[i] = itoa(k)
		}
		q.Set("kinds", strings.Join(ks, ","))
	}
	for name, vals := range f.Tags {
		if len(vals) > 0 {
			q.Set(name, strings.Join(vals, ","))
		}
	}
	if f.Since > 0 {
		q.Set("since", itoa(f.Since))
	}
	if f.Until > 0 {
		q.Set("until", itoa(f.Until))
	}
	if f.Limit > 0 {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	return q
}

// ReadOption changes what a read route answers from.
type ReadOption func(*readOpts)

type readOpts struct {
	asOf           int64
	branch         string
	includeRevoked bool
	includeHidden  bool
}

// AsOf reads the log as it stood at unix time t: GET /events' as_of and
// GET /state's at (SPEC §3.1, §5.5). Routes without a time ignore it.
func AsOf(t int64) ReadOption { return func(o *readOpts) { o.asOf = t } }

// Branch reads branch b (main, a branch id, a comma-separated union, or
// all; SPEC §17.5) on /events, /state and the view routes.
func Branch(b string) ReadOption { return func(o *readOpts) { o.branch = b } }

// IncludeRevoked keeps revoked events in GET /events.
func IncludeRevoked() ReadOption { return func(o *readOpts) { o.includeRevoked = true } }

// IncludeHidden asks GET /events for hidden events this reader may see
// (SPEC §3.2; needs Key).
func IncludeHidden() ReadOption { return func(o *readOpts) { o.includeHidden = true } }

func applyOpts(q url.Values, timeParam string, opts []ReadOption) url.Values {
	var o readOpts
	for _, f := range opts {
		f(&o)
	}
	if q == nil {
		q = url.Values{}
	}
	if o.asOf > 0 && timeParam != "" {
		q.Set(timeParam, itoa(o.asOf))
	}
	if o.branch != "" {
		q.Set("branch", o.branch)
	}
	if o.includeRevoked {
		q.Set("include_revoked", "true")
	}
	if o.includeHidden {
		q.Set("include_hidden", "true")
	}
	return q
}

// Query runs GET /events: events matching f, newest first by
// (created_at, id). Every event is verified (VerifyEvent); one that fails
// makes the read fail with ErrBadEvent. Placeholders of hidden or
// cross-branch events are left out.
func (c *Client) Query(ctx context.Context, f Filter, opts ...ReadOption) ([]*protocol.Event, error) {
	var raw []json.RawMessage
	if err := c.GetJSON(ctx, "/events", applyOpts(f.values(), "as_of", opts), &raw); err != nil {
		return nil, err
	}
	return decodeVerified(raw)
}

func decodeVerified(raw []json.RawMessage) ([]*protocol.Event, error) {
	out := make([]*protocol.Event, 0, len(raw))
	for _, r := range raw {
		if len(r) > 0 && r[0] == '[' {
			continue // ["hidden", id] or ["cross-branch", id, branch]
		}
		e, err := protocol.DecodeJSON(r)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrBadEvent, err)
		}
		if err := VerifyEvent(e); err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrBadEvent, e.ID, err)
		}
		out = append(out, e)
	}
	return out, nil
}

// Event fetches one event by id (GET /events/{id}), verified. A missing
// or revoked event is an *Error with status 404.
func (c *Client) Event(ctx context.Context, id string) (*protocol.Event, error) {
	var raw json.RawMessage
	if err := c.GetJSON(ctx, "/events/"+url.PathEscape(id), nil, &raw); err != nil {
		return nil, err
	}
	evs, err := decodeVerified([]json.RawMessage{raw})
	if err != nil {
		return nil, err
	}
	if len(evs) != 1 || evs[0].ID != id {
		return nil, fmt.Errorf("%w: asked for %s", ErrBadEvent, id)
	}
	return evs[0], nil
}

// Pager walks GET /events newest first, page by page, with a keyset
// cursor on (created_at, id): each event of the query's result is given
// exactly once, however many share one second. Events stored while it
// walks with a created_at inside the walked range are not seen; use
// Client.Scan (log order, by seq) to miss nothing.
type Pager struct {
	c     *Client
	f     Filter
	opts  []ReadOption
	until int64           // the created_at of the oldest event given, 0 at start
	seen  map[string]bool // the ids given at created_at == until
	done  bool
}

// Pages returns a Pager over f; f.Limit is the page size (default 100).
func (c *Client) Pages(f Filter, opts ...ReadOption) *Pager {
	if f.Limit <= 0 {
		f.Limit = 100
	}
	return &Pager{c: c, f: f, opts: opts}
}

// Next returns the next page, nil once the result is exhausted (one
// more query than there are pages). It fails when more than 1000 events
// share one created_at (no keyset can split them) and on any read error,
// after which Next may be called again.
func (p *Pager) Next(ctx context.Context) ([]*protocol.Event, error) {
	for limit := p.f.Limit; !p.done; limit *= 2 {
		f := p.f
		f.Limit = min(limit+len(p.seen), 1000)
		if p.until > 0 {
			f.Until = p.until
		}
		evs, err := p.c.Query(ctx, f, p.opts...)
		if err != nil {
			return nil, err
		}
		page := slices.DeleteFunc(evs, func(e *protocol.Event) bool {
			return e.CreatedAt == p.until && p.seen[e.ID]
		})
		if len(page) == 0 {
			if len(p.seen) >= f.Limit && f.Limit < 1000 {
				continue // the page was all events given already: ask for more
			}
			if len(p.seen) >= f.Limit {
				return nil, fmt.Errorf("more than 1000 events created at %d: the keyset cannot page through them", p.until)
			}
			p.done = true
			return nil, nil
		}
		if len(page) > p.f.Limit {
			page = page[:p.f.Limit]
		}
		for _, e := range page {
			if e.CreatedAt != p.until {
				p.until, p.seen = e.CreatedAt, map[string]bool{}
			}
			p.seen[e.ID] = true
		}
		return page, nil
	}
	return nil, nil
}
