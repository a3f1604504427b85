package explorer

import (
	"encoding/json"
	"net/http"
	"sync"
	"time"

	"github.com/anp2net/relay/client"
	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/eventlog"
	"github.com/anp2net/relay/relay/httpx"
	"github.com/labstack/echo/v4"
)

// The agent page shows whether the agent's human_anchor (seed §4.1.1)
// verifies. The relay never checks an anchor when it stores a profile,
// and by default its explorer does not fetch one either: the answer then
// gives the checks that need no network and says the page was not
// fetched. With VerifyAnchors the explorer runs client.VerifyHumanAnchor
// for its readers, one fetch per profile revision per anchorTTL, at most
// anchorFetches at once.

// Bounds of the anchor checks.
const (
	anchorTTL        = 10 * time.Minute // a result is reused this long
	anchorFetches    = 4                // verifications in flight at once
	anchorCacheBytes = 1 << 20          // results kept, in bytes (estimated)
	anchorCacheMax   = 1000             // results kept
)

// Codes the explorer adds to client.AnchorResult's when it did not fetch.
const (
	anchorNotChecked = "anchor_not_checked" // this relay does not fetch verification URLs
	anchorBusy       = "anchor_busy"        // anchorFetches verifications already running
)

// anchorAnswer is GET /explorer/api/human_anchor/{agent_id}.
type anchorAnswer struct {
	client.AnchorResult
	// ProfileEvent is the profile whose anchor was checked ("" when the
	// agent has none the reader may see).
	ProfileEvent string `json:"profile_event,omitempty"`
	// Fetched says whether the verification page was fetched (false: only
	// the offline checks ran); CheckedAt is when.
	Fetched   bool  `json:"fetched"`
	CheckedAt int64 `json:"checked_at"`
}

// anchorCache keeps recent results by profile event id, bounded in count
// and bytes, oldest evicted first.
type anchorCache struct {
	mu    sync.Mutex
	hc    *http.Client
	sem   chan struct{}
	byID  map[string]anchorAnswer
	order []string
	bytes int
}

// VerifyAnchors lets the explorer fetch verification URLs with hc (nil:
// client.AnchorHTTPClient(), which dials only public addresses) to show
// whether an agent's human_anchor verifies. Call before Mount.
func (m *Module) VerifyAnchors(hc *http.Client) *Module {
	if hc == nil {
		hc = client.AnchorHTTPClient()
	}
	m.anchors = &anchorCache{hc: hc, sem: make(chan struct{}, anchorFetches), byID: map[string]anchorAnswer{}}
	return m
}

// getHumanAnchor is GET /explorer/api/human_anchor/{agent_id}: the
// verification of the human_anchor of the agent's latest profile the
// reader may see (absent when none).
func (m *Module) getHumanAnchor(c echo.Context) error {
	id, err := httpx.AgentOnly(c)
	if err != nil {
		return err
	}
	reader, err := m.core.Reader(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	bodies, err := m.core.Log().Query(ctx, eventlog.Filter{Authors: []string{id}, Kinds: []int64{protocol.KindProfile}, Limit: 8,
		Revoked: m.core.State().Revoked})
	if err != nil {
		return err
	}
	var latest *protocol.Event
	for _, b := range bodies {
		var e protocol.Event
		if json.Unmarshal(b, &e) == nil && m.core.Sees(reader, &e) && (latest == nil || protocol.Less(latest, &e)) {
			latest = &e
		}
	}
	now := m.core.Now()
	if latest == nil {
		return c.JSON(http.StatusOK, anchorAnswer{AnchorResult: client.AnchorResult{AgentID: id, Status: client.AnchorAbsent}, CheckedAt: now})
	}
	out := anchorAnswer{ProfileEvent: latest.ID, CheckedAt: now}
	out.AnchorResult = offlineAnchor(latest)
	if out.Status != client.AnchorNotVerified || out.Code != anchorNotChecked || m.anchors == nil {
		return c.JSON(http.StatusOK, out)
	}
	return c.JSON(http.StatusOK, m.anchors.verify(c, latest, now))
}

// offlineAnchor makes the checks that need no network: absent, malformed,
// not HTTPS, a host not the platform's; an anchor that passes them is
// not verified yet (anchorNotChecked).
func offlineAnchor(e *protocol.Event) client.AnchorResult {
	res := client.AnchorResult{AgentID: e.AgentID, Status: client.AnchorNotVerified}
	a, err := client.ParseHumanAnchor(e.Content)
	switch {
	case err == nil && a == nil:
		res.Status = client.AnchorAbsent
	case err != nil:
		res.Anchor, res.Code, res.Reason = a, client.AnchorMalformed, err.Error()
	default:
		res.Anchor = a
		if _, code, err := client.CheckAnchorURL(a); err != nil {
			res.Code, res.Reason = code, err.Error()
		} else {
			res.Code, res.Reason = anchorNotChecked, "this relay does not fetch verification URLs (seed §4.1.1: the relay does not verify anchors); check it with client.VerifyHumanAnchor"
		}
	}
	return res
}

// verify returns the cached result for e, or fetches and caches one; at
// anchorFetches verifications in flight it answers anchorBusy.
func (a *anchorCache) verify(c echo.Context, e *protocol.Event, now int64) anchorAnswer {
	a.mu.Lock()
	got, ok := a.byID[e.ID]
	a.mu.Unlock()
	if ok && now-got.CheckedAt < int64(anchorTTL/time.Second) && now >= got.CheckedAt {
		return got
	}
	out := anchorAnswer{ProfileEvent: e.ID, CheckedAt: now}
	select {
	case a.sem <- struct{}{}:
	default:
		out.AnchorResult = offlineAnchor(e)
		out.Code, out.Reason = anchorBusy, "too many anchor checks running; try again shortly"
		return out
	}
	out.AnchorResult = client.VerifyHumanAnchor(c.Request().Context(), a.hc, e)
	<-a.sem
	out.Fetched = true
	if c.Request().Context().Err() == nil {
		a.put(e.ID, out)
	}
	return out
}

// put keeps out under id, evicting the oldest results past the bounds.
func (a *anchorCache) put(id string, out anchorAnswer) {
	size := entrySize(out)
	if size > anchorCacheBytes {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := a.byID[id]; !ok {
		a.order = append(a.order, id)
	} else {
		a.bytes -= entrySize(a.byID[id])
	}
	a.byID[id] = out
	a.bytes += size
	for len(a.order) > anchorCacheMax || a.bytes > anchorCacheBytes {
		old := a.order[0]
		a.order = a.order[1:]
		a.bytes -= entrySize(a.byID[old])
		delete(a.byID, old)
	}
}

// entrySize estimates the bytes a cached result holds.
func entrySize(out anchorAnswer) int {
	size := 256 + len(out.Reason)
	if out.Anchor != nil {
		size += len(out.Anchor.Platform) + len(out.Anchor.Handle) + len(out.Anchor.VerificationURL)
	}
	return size
}
