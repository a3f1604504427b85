package federation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"sync"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay"
	"github.com/anp2net/relay/relay/eventlog"
	"github.com/anp2net/relay/relay/httpx"
	"github.com/labstack/echo/v4"
)

// MaxGossipEvents bounds one POST /gossip batch.
const MaxGossipEvents = relay.MaxBatchEvents

// MaxServedBranches bounds served_branches in the relay's kind 10: the
// preferred branch, main, the pre-rollback branches, then voluntary forks
// in order, the first 64.
const MaxServedBranches = 64

// announcement is the content of the relay's kind 10 (§11.3.5).
type announcement struct {
	URL             string   `json:"url"`
	PreferredBranch string   `json:"preferred_branch"`
	ServedBranches  []string `json:"served_branches"`
	// Topics are the topics the relay specialises in (Options.Topics);
	// left out when it names none, so such a relay's kind 10 is unchanged.
	Topics []string `json:"topics,omitempty"`
}

// Announce publishes the relay's signed kind 10 unless the latest one it
// stored already says the same. The kind 10 carries the transparency log's
// latest checkpoint (a ["tlog", size, root] tag) as it stands when the
// kind 10 is published; a checkpoint alone never causes a new kind 10
// (the log grows all the time), except once when the latest stored one
// carries none (a relay upgraded from a version without the tree).
func (s *Module) Announce(ctx context.Context) error {
	if s.cfg.RelayKey == nil {
		return nil
	}
	preferred, served := "main", []string{"main"}
	if b := s.cfg.PreferredBranch; b != "" && b != "main" {
		preferred, served = b, []string{b, "main"}
	}
	if ids := s.core.BranchIDs(); len(ids) > 0 { // every branch it can answer for (§17.5)
		served = ids[:min(len(ids), MaxServedBranches)]
	}
	content, _ := json.Marshal(announcement{URL: s.cfg.PublicBaseURL, PreferredBranch: preferred, ServedBranches: served,
		Topics: s.opts.Topics})
	self := protocol.AgentIDOf(s.cfg.RelayKey)
	bodies, err := s.core.Log().Query(ctx, eventlog.Filter{Authors: []string{self}, Kinds: []int64{protocol.KindRelayAnnounce}, Limit: 1})
	if err != nil {
		return err
	}
	var tlogTag []string
	if s.opts.TlogCheckpoint != nil {
		if size, root, ok := s.opts.TlogCheckpoint(); ok {
			tlogTag = []string{"tlog", strconv.FormatInt(size, 10), root}
		}
	}
	createdAt := s.now()
	if len(bodies) == 1 {
		var last protocol.Event
		if json.Unmarshal(bodies[0], &last) != nil {
			last = protocol.Event{}
		}
		// A new kind 10 must supersede the last one: within the same second
		// the overwrite order breaks the tie by id, which may keep the old.
		createdAt = max(createdAt, last.CreatedAt+1)
		if last.Content == string(content) &&
			(tlogTag == nil || slices.ContainsFunc(last.Tags, func(t []string) bool { return len(t) > 0 && t[0] == "tlog" })) {
			return nil
		}
	}
	tags := [][]string{{"branch", preferred}}
	if tlogTag != nil {
		tags = append(tags, tlogTag)
	}
	e := &protocol.Event{CreatedAt: createdAt, Kind: protocol.KindRelayAnnounce, Content: string(content), Tags: tags}
	e.Sign(s.cfg.RelayKey)
	if _, rejected, err := s.core.IngestMirrored(ctx, []*protocol.Event{e}); err != nil || rejected > 0 {
		return fmt.Errorf("relay announcement not stored (rejected %d): %v", rejected, err)
	}
	return nil
}

// peerStats counts what one peer sent or received.
type peerStats struct {
	Peer          string `json:"peer"`
	Direction     string `json:"direction"` // "inbound" (it pushes to us) or "outbound" (we mirror it)
	State         string `json:"state,omitempty"`
	LastContactAt int64  `json:"last_contact_at"`
	LastError     string `json:"last_error,omitempty"`
	Received      int64  `json:"received"`
	Accepted      int64  `json:"accepted"`
	Duplicate     int64  `json:"duplicate"`
	Invalid       int64  `json:"invalid"`
	Pushed        int64  `json:"pushed"`
	// TlogAlarm and TlogAlarms, as in knownRelay (an outbound peer).
	TlogAlarm  bool `json:"tlog_alarm,omitempty"`
	TlogAlarms int  `json:"tlog_alarms,omitempty"`
}

// peers tracks peer traffic for GET /relays.
type peers struct {
	mu sync.Mutex
	m  map[string]*peerStats
}

func (p *peers) update(key, direction string, f func(*peerStats)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil {
		p.m = map[string]*peerStats{}
	}
	st := p.m[direction+" "+key]
	if st == nil {
		st = &peerStats{Peer: key, Direction: direction}
		p.m[direction+" "+key] = st
	}
	f(st)
}

func (p *peers) list() []peerStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]peerStats, 0, len(p.m))
	for _, st := range p.m {
		out = append(out, *st)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Direction != out[j].Direction {
			return out[i].Direction < out[j].Direction
		}
		return out[i].Peer < out[j].Peer
	})
	return out
}

// gossipAnswer is the body of POST /gossip.
type gossipAnswer struct {
	Accepted  int              `json:"accepted"`
	Duplicate int              `json:"duplicate"`
	Rejected  []gossipRejected `json:"rejected"`
}

type gossipRejected struct {
	Index  int    `json:"index"`
	ID     string `json:"id,omitempty"`
	Code   string `json:"code"`
	Detail string `json:"detail"`
}

// postGossip accepts a batch of events pushed to this relay (§12.9.3): a
// JSON array or a CBOR array. A batch from an authenticated peer (see
// gossipPeer) is verified as mirrored events; bad ones are listed and never
// block the good ones. Anyone else's batch gets exactly POST /events' rules,
// event by event (gossipAsPublisher).
func (s *Module) postGossip(c echo.Context) error {
	peerKey, err := s.gossipPeer(c)
	if err != nil {
		return err
	}
	items, rawType, err := relay.ReadBatch(c)
	if err != nil {
		return err
	}
	if peerKey == "" {
		return s.gossipAsPublisher(c, items, rawType)
	}
	now := s.cfg.Now()
	peer := c.RealIP()
	if ok, wait := s.byPeer.AllowN(peerKey, now, len(items)); !ok {
		return &httpx.RetryError{Err: protocol.Errorf(relay.CodeRateLimited, "peer %s is over its gossip rate", peerKey), After: wait}
	}
	// Decode and verify every event (on every core), then append the valid
	// ones in one group commit; each bad one is reported by its index.
	evs := make([]*protocol.Event, len(items))
	errs := make([]error, len(items))
	for i, raw := range items {
		if rawType == "cbor" {
			evs[i], errs[i] = protocol.DecodeCBOR(raw)
		} else {
			evs[i], errs[i] = protocol.DecodeJSON(raw)
		}
	}
	s.core.CheckMirrored(evs, errs, nil)
	ans := gossipAnswer{Rejected: []gossipRejected{}}
	var recs []eventlog.Record
	for i, err := range errs {
		if err != nil {
			ans.Rejected = append(ans.Rejected, rejection(i, evs[i], err))
			s.core.CountRejected(err)
			continue
		}
		recs = append(recs, eventlog.NewRecord(evs[i], items[i], rawType, now.Unix()))
	}
	results, err := s.core.Log().AppendBatch(c.Request().Context(), recs)
	if err != nil {
		return err
	}
	s.core.CountStored(results)
	for _, r := range results {
		if r.Duplicate {
			ans.Duplicate++
		} else {
			ans.Accepted++
		}
	}
	s.peers.update(peer, "inbound", func(p *peerStats) {
		p.LastContactAt = now.Unix()
		p.Received += int64(len(items))
		p.Accepted += int64(ans.Accepted)
		p.Duplicate += int64(ans.Duplicate)
		p.Invalid += int64(len(ans.Rejected))
	})
	return c.JSON(http.StatusOK, ans)
}

// gossipPeer returns the relay key a POST /gossip is signed with when that
// key is a peer's this relay chose (Config.PeerKeys, or the key a
// configured --peer names for itself in its own GET /relays, learnPeerKey),
// and "" for anyone else: a kind 10 proves nothing, since anyone can
// publish one naming any URL. The D4 header of a peer's push binds the
// body with a payload tag, so that a captured header cannot carry another
// batch (the core refuses a header on a body without one,
// auth_payload_required). A header that does not verify is a 401, as on
// any route.
func (s *Module) gossipPeer(c echo.Context) (string, error) {
	e, err := s.core.Authenticate(c)
	if e == nil || err != nil {
		return "", err
	}
	if e.TagValue("payload") == "" || s.revoked(e.AgentID) || !s.isPeerKey(e.AgentID) {
		return "", nil
	}
	return e.AgentID, nil
}

// isPeerKey reports whether agent is the relay key of a chosen peer.
func (s *Module) isPeerKey(agent string) bool {
	_, ok := s.peerKeys.Load(agent)
	return ok
}

// learnPeerKey reads the relay key a configured peer names for itself in
// GET /relays ("self"), fetched from the peer's own URL (no redirect, at
// most maxSmallAnswer bytes, within peerDeadline), and takes that key's
// gossip as a peer's from then on, in place of the key it named before.
func (s *Module) learnPeerKey(ctx context.Context, base string) {
	b, err := s.peerGet(ctx, base+"/relays", maxSmallAnswer)
	if err != nil {
		return
	}
	var r struct {
		Self struct {
			AgentID string `json:"agent_id"`
		} `json:"self"`
	}
	if json.Unmarshal(b, &r) != nil || !protocol.IsHex64(r.Self.AgentID) {
		return
	}
	if old := s.keyOf(base); old != "" && old != r.Self.AgentID {
		s.peerKeys.CompareAndDelete(old, "peer "+base)
	}
	s.peerKeys.LoadOrStore(r.Self.AgentID, "peer "+base) // a configured key stays "configured"
}

// gossipAsPublisher ingests a pushed batch from someone who is not a chosen
// peer with POST /events' rules, one event at a time (freshness window,
// address and agent allowances, PoW, kind and log rules), and lists what
// it refused.
func (s *Module) gossipAsPublisher(c echo.Context, items [][]byte, rawType string) error {
	ctx := c.Request().Context()
	ans := gossipAnswer{Rejected: []gossipRejected{}}
	for i, raw := range items {
		var e *protocol.Event
		var err error
		if rawType == "cbor" {
			e, err = protocol.DecodeCBOR(raw)
		} else {
			e, err = protocol.DecodeJSON(raw)
		}
		var res *relay.PublishAnswer
		if err == nil {
			res, err = s.core.Ingest(ctx, e, raw, rawType, c.RealIP())
		}
		switch {
		case err != nil:
			ans.Rejected = append(ans.Rejected, rejection(i, e, err))
			s.core.CountRejected(err)
		case res.Duplicate:
			ans.Duplicate++
		default:
			ans.Accepted++
		}
	}
	return c.JSON(http.StatusOK, ans)
}

func rejection(i int, e *protocol.Event, err error) gossipRejected {
	r := gossipRejected{Index: i, Code: protocol.CodeOf(err), Detail: err.Error()}
	if e != nil {
		r.ID = e.ID
	}
	var pe *protocol.Error
	if errors.As(err, &pe) {
		r.Detail = pe.Detail
	}
	return r
}

// getRelays lists the relays known from kind 10 announcements, ranked by
// standing (knownRelays), and the traffic of every peer.
func (s *Module) getRelays(c echo.Context) error {
	if _, err := httpx.Params(c); err != nil {
		return err
	}
	relays, err := s.knownRelays(c.Request().Context())
	if err != nil {
		return err
	}
	self := map[string]any{"url": s.core.BaseURL(c)}
	if s.cfg.RelayKey != nil {
		self["agent_id"] = protocol.AgentIDOf(s.cfg.RelayKey)
	}
	peers := s.peers.list()
	if alarms := s.opts.TlogAlarms; alarms != nil {
		for i := range relays {
			relays[i].TlogAlarms = alarms(relays[i].URL)
			relays[i].TlogAlarm = relays[i].TlogAlarms > 0
		}
		for i := range peers {
			if peers[i].Direction == "outbound" {
				peers[i].TlogAlarms = alarms(peers[i].Peer)
				peers[i].TlogAlarm = peers[i].TlogAlarms > 0
			}
		}
	}
	return c.JSON(http.StatusOK, map[string]any{"self": self, "relays": relays, "peers": peers})
}
