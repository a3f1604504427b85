package federation

import (
	"io"
	"net/http"
	"strings"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay"
	"github.com/anp2net/relay/relay/httpx"
	"github.com/anp2net/relay/relay/reconcile"
	"github.com/labstack/echo/v4"
)

// ContentTypeSync is the media type of POST /sync bodies.
const ContentTypeSync = "application/negentropy"

// postSync answers one set-reconciliation message (negentropy V1, SPEC §6)
// over every stored event, or, with kinds / authors / since, over the
// matching ones only. The relay keeps no session: each message carries the
// SyncFilterCost is what one filtered POST /sync message counts against
// Config.SyncRate: it reads the matching events from the log to build a
// temporary index, where an unfiltered one uses the index kept in memory.
const SyncFilterCost = 10

// client's whole position.
func (s *Module) postSync(c echo.Context) error {
	v, err := httpx.Params(c, "kinds", "authors", "since")
	if err != nil {
		return err
	}
	cost := 1
	if len(v) > 0 {
		cost = SyncFilterCost
	}
	key := s.core.ClientKey(c) // an IPv6 peer counts by its network
	if ok, wait := s.bySync.AllowN(key, s.cfg.Now(), cost); !ok {
		return &httpx.RetryError{Err: protocol.Errorf(relay.CodeRateLimited, "peer %s is over its sync rate", key), After: wait}
	}
	msg, err := io.ReadAll(io.LimitReader(c.Request().Body, reconcile.MaxMessageSize+1))
	if err != nil {
		return protocol.Errorf(httpx.CodeBadParameter, "cannot read body: %v", err)
	}
	if len(msg) > reconcile.MaxMessageSize {
		return protocol.Errorf(relay.CodeBodyTooLarge, "sync messages are at most %d bytes", reconcile.MaxMessageSize)
	}
	idx := s.core.Index()
	if len(v) > 0 {
		if idx, err = s.filteredIndex(c, v.Get("kinds"), v.Get("authors"), v.Get("since")); err != nil {
			return err
		}
	}
	reply, err := reconcile.Respond(idx, msg)
	if err != nil {
		return err
	}
	return c.Blob(http.StatusOK, ContentTypeSync, reply)
}

// filteredIndex builds a temporary index of the events matching a sync
// filter.
func (s *Module) filteredIndex(c echo.Context, kinds, authors, since string) (*reconcile.Index, error) {
	var ks []int64
	if kinds != "" {
		for _, k := range strings.Split(kinds, ",") {
			n, err := httpx.NonNegative("kinds", k)
			if err != nil {
				return nil, err
			}
			ks = append(ks, n)
		}
	}
	var as []string
	if authors != "" {
		as = strings.Split(authors, ",")
		if !allHex64(as) || len(as) > 1000 {
			return nil, protocol.Errorf(httpx.CodeBadParameter, "authors must be up to 1000 ids of 64 lowercase hex characters")
		}
	}
	var from int64
	if since != "" {
		n, err := httpx.NonNegative("since", since)
		if err != nil {
			return nil, err
		}
		from = n
	}
	var items []reconcile.Item
	withheld := withheldSet(s.core)
	err := s.core.Log().Items(c.Request().Context(), ks, as, from, func(at int64, id []byte) {
		it := reconcile.Item{CreatedAt: at}
		copy(it.ID[:], id)
		if !withheld[it.ID] {
			items = append(items, it)
		}
	})
	if err != nil {
		return nil, err
	}
	return reconcile.NewIndex(items), nil
}

// allHex64 reports whether every entry is 64 lowercase hex.
func allHex64(list []string) bool {
	for _, x := range list {
		if !protocol.IsHex64(x) {
			return false
		}
	}
	return true
}

// withheldSet is the set of events this relay withholds (SPEC §21.8),
// which a filtered index leaves out as the relay's own index does.
func withheldSet(core *relay.Server) map[[32]byte]bool {
	ids := core.State().WithheldIDs()
	if len(ids) == 0 {
		return nil
	}
	out := make(map[[32]byte]bool, len(ids))
	for _, h := range ids {
		var id [32]byte
		if decodeID(id[:], h) {
			out[id] = true
		}
	}
	return out
}
