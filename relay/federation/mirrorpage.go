package federation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay"
)

// Mirroring a relay that serves neither POST /sync nor GET /events?ids=
// (any other ANP2 implementation): the mirror pages through the peer's
// GET /events with since/until/limit, which every ANP2 relay serves, and
// stores what it lacks. SPEC §6.3.

const (
	// pageLimit is the page size asked for; a peer may answer fewer.
	pageLimit = 1000
	// A paged peer is read in passes of three depths. Most passes start an
	// hour before the newest event the previous pass saw (an event
	// published a little backdated, or relayed late, is still found);
	// once an hour a pass reaches back the whole freshness window (seven
	// days: the oldest created_at POST /events accepts) plus that hour;
	// once a day a pass reads from the start.
	pagedOverlap   = 3600
	pagedDeep      = 7*86400 + pagedOverlap
	pagedDeepEvery = time.Hour
	pagedFullEvery = 24 * time.Hour
)

// peerStatusError is a peer's non-200 answer.
type peerStatusError struct {
	Method, URL string
	Status      int
	Body        string
}

func (e *peerStatusError) Error() string {
	return fmt.Sprintf("%s %s: %d %s", e.Method, e.URL, e.Status, e.Body)
}

// unsupported reports whether err says the peer does not serve the route.
func unsupported(err error) bool {
	var se *peerStatusError
	return errors.As(err, &se) && (se.Status == http.StatusNotFound || se.Status == http.StatusMethodNotAllowed ||
		se.Status == http.StatusNotImplemented)
}

// pagedPeers remembers the peers mirrored by paging, and how far each
// pass got.
type pagedPeers struct {
	mu sync.Mutex
	m  map[string]*pagedPeer
}

type pagedPeer struct {
	newest         int64     // newest created_at seen by the last complete pass
	deepAt, fullAt time.Time // when the last deep and full passes completed
	// resume, when set, is where a pass cut at maxPagesPerPass stopped,
	// with that pass's kind and the newest created_at it had seen.
	resume                 *pageWalk
	resumeFull, resumeDeep bool
	resumeNewest           int64
}

func (p *pagedPeers) get(base string) (pagedPeer, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	st, ok := p.m[base]
	if !ok {
		return pagedPeer{}, false
	}
	return *st, true
}

func (p *pagedPeers) set(base string, st pagedPeer) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil {
		p.m = make(map[string]*pagedPeer)
	}
	p.m[base] = &st
}

// mirrorPaged reads the peer's events by pages of GET /events and stores
// those this relay lacks, verified as mirrored events; how far back it
// reads is said at pagedOverlap. It pushes nothing: without /sync the
// relay cannot tell what the peer lacks, and the peer's POST /events would
// refuse old events anyway.
func (s *Module) mirrorPaged(ctx context.Context, base string, res *MirrorResult, progress func(MirrorResult)) error {
	res.Mode = "paged"
	st, _ := s.paged.get(base)
	full := st.fullAt.IsZero() || time.Since(st.fullAt) >= pagedFullEvery
	deep := time.Since(st.deepAt) >= pagedDeepEvery
	since := int64(0)
	switch {
	case full:
	case deep:
		since = max(0, st.newest-pagedDeep)
	default:
		since = max(0, st.newest-pagedOverlap)
	}
	walk, newest := newWalk(since), st.newest
	if st.resume != nil { // a pass cut at maxPagesPerPass goes on
		walk, full, deep, newest = *st.resume, st.resumeFull, st.resumeDeep, st.resumeNewest
	}
	walk, err := pageEvents(ctx, walk, maxPagesPerPass, func(since, until int64) ([]*protocol.Event, error) {
		url := base + "/events?include_revoked=true&include_hidden=true&limit=" + strconv.Itoa(pageLimit) +
			"&since=" + strconv.FormatInt(since, 10)
		if until >= 0 {
			url += "&until=" + strconv.FormatInt(until, 10)
		}
		body, err := s.peerGet(ctx, url, maxPageBytes)
		if err != nil {
			return nil, fmt.Errorf("page %s: %w", base, err)
		}
		evs, err := decodePage(body)
		if err != nil {
			return nil, fmt.Errorf("page %s: %w", base, err)
		}
		res.Rounds++
		res.BytesRecv += len(body)
		res.Fetched += len(evs)
		var lack []*protocol.Event
		for _, e := range evs {
			if e.CreatedAt >= since && (until < 0 || e.CreatedAt <= until) {
				newest = max(newest, e.CreatedAt)
			}
			if !s.core.Index().Has(relay.ItemOf(e)) {
				lack = append(lack, e)
			}
		}
		res.Need += len(lack)
		acc, rej, err := s.core.IngestMirrored(ctx, lack)
		res.Accepted += acc
		res.Rejected += rej
		report(progress, res)
		return evs, err
	})
	if errors.Is(err, errPageCap) {
		st.resume, st.resumeFull, st.resumeDeep, st.resumeNewest = &walk, full, deep, newest
		s.paged.set(base, st)
		return err
	}
	st.resume = nil
	if err != nil {
		s.paged.set(base, st)
		return err
	}
	st.newest = newest
	if full {
		st.fullAt = time.Now()
	}
	if full || deep {
		st.deepAt = time.Now()
	}
	s.paged.set(base, st)
	return nil
}

// decodePage reads a GET /events answer: a JSON array of events, where
// anything that is not an event (another relay's placeholders) is skipped.
func decodePage(body []byte) ([]*protocol.Event, error) {
	var items []json.RawMessage
	if err := json.Unmarshal(body, &items); err != nil {
		var wrapped struct {
			Events []json.RawMessage `json:"events"`
		}
		if json.Unmarshal(body, &wrapped) != nil {
			return nil, err
		}
		items = wrapped.Events
	}
	evs := make([]*protocol.Event, 0, len(items))
	for _, it := range items {
		if len(it) > MaxPeerLine {
			return nil, &capError{fmt.Sprintf("an event longer than %d bytes", MaxPeerLine)}
		}
		if e, err := protocol.DecodeJSON(it); err == nil {
			evs = append(evs, e)
		}
	}
	return evs, nil
}

// pageWalk is where a walk through a paged peer stands: the next page
// asked is [Since, Until] (Until < 0: no upper bound); Known and Ascending
// say whether the peer's order is known and which it is; After, when ≥ 0,
// is where an upward walk starts if the downward one finds nothing.
type pageWalk struct {
	Since, Until     int64
	Known, Ascending bool
	After            int64
}

// newWalk starts a walk over every event with created_at ≥ since.
func newWalk(since int64) pageWalk { return pageWalk{Since: since, Until: -1, After: -1} }

// maxPagesPerPass caps the pages one mirror round reads from a paged peer;
// a longer pass is cut (an error: the peer is backed off) and the next
// round resumes it where it stopped. A variable so that tests can lower it.
var maxPagesPerPass = 5000

var (
	errNoProgress = errors.New("the peer's page makes no progress: it ignores since/until or repeats itself")
	errPageCap    = fmt.Errorf("a pass took more than %d pages: resumed next round", maxPagesPerPass)
)

// pageEvents walks every event from w (see newWalk) through page, which
// answers the events in [since, until] (until < 0: no upper bound, both
// ends inclusive), a page of them in either time order, and returns where
// the walk stands. A newest-first peer is walked down by until, an
// oldest-first one up by since. Each next page starts at the last page's
// oldest (or newest) second again, so events sharing a second with the
// page's edge are not skipped; only when a whole page is one second does
// the walk step past it (a peer with more events in one second than its
// page size can hide some of them this way). Events outside the asked
// bounds are left out; a page with none inside them, or the same events as
// the page before, is errNoProgress; past maxPages pages the walk stops
// with errPageCap, and the returned position resumes it.
func pageEvents(ctx context.Context, w pageWalk, maxPages int, page func(since, until int64) ([]*protocol.Event, error)) (pageWalk, error) {
	// The order is known once a page spans two seconds. Until then the
	// walk goes down (ANP2 relays answer newest first); if the first page
	// was one second and the walk down found nothing, the peer may answer
	// oldest first, so the walk goes up from after that second once.
	var last []string
	for pages := 0; ctx.Err() == nil; pages++ {
		if pages >= maxPages {
			return w, errPageCap
		}
		got, err := page(w.Since, w.Until)
		if err != nil {
			return w, err
		}
		evs, ids := inBounds(got, w.Since, w.Until)
		if len(got) > 0 && (len(evs) == 0 || slices.Equal(ids, last)) {
			return w, errNoProgress
		}
		last = ids
		if len(evs) == 0 {
			if w.Known || w.After < 0 {
				return w, nil
			}
			w = pageWalk{Since: w.After, Until: -1, Known: true, Ascending: true, After: -1}
			continue
		}
		first, lastAt := evs[0].CreatedAt, evs[len(evs)-1].CreatedAt
		lo, hi := first, first
		for _, e := range evs {
			lo, hi = min(lo, e.CreatedAt), max(hi, e.CreatedAt)
		}
		switch {
		case first != lastAt:
			w.Known, w.Ascending, w.After = true, first < lastAt, -1
		case !w.Known && w.Until < 0:
			w.After = hi + 1
		}
		if w.Ascending { // move since up, past a page of one second
			w.Since = max(hi, w.Since+1)
			if lo == hi {
				w.Since = hi + 1
			}
			continue
		}
		// Move until down, past a page of one second.
		next := lo
		if lo == hi || w.Until >= 0 && lo >= w.Until {
			next = lo - 1
		}
		if w.Until = next; w.Until < w.Since {
			if w.Known || w.After < 0 {
				return w, nil
			}
			w = pageWalk{Since: w.After, Until: -1, Known: true, Ascending: true, After: -1}
		}
	}
	return w, ctx.Err()
}

// inBounds returns the events of a page within [since, until] (until < 0:
// no upper bound) and their ids, sorted.
func inBounds(evs []*protocol.Event, since, until int64) ([]*protocol.Event, []string) {
	var in []*protocol.Event
	var ids []string
	for _, e := range evs {
		if e.CreatedAt >= since && (until < 0 || e.CreatedAt <= until) {
			in = append(in, e)
			ids = append(ids, e.ID)
		}
	}
	slices.Sort(ids)
	return in, ids
}
