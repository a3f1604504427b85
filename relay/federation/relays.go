package federation

import (
	"cmp"
	"context"
	"encoding/json"
	"slices"
	"strings"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/eventlog"
)

// The relay directory (GET /relays, and the relays resolution may ask) is
// built from kind 10 announcements, which anyone can publish for free. So
// that a flood of them cannot displace the relays that matter (SPEC §20.1):
// the relay's own and its peers' latest announcements are read by author,
// outside any window; so are those of the most trusted agents; only the
// rest come from a window of the newest; an announcement dated after now
// is not counted until its time comes; and the list is ranked by standing
// (self, peer, trusted by weighted trust score), never by date alone.

// Bounds of one directory read.
const (
	// directoryTrusted is how many of the most trusted agents' kind 10s
	// are read by author.
	directoryTrusted = 1000
	// directoryRecent is the window of the newest announcements read for
	// everyone else.
	directoryRecent = 1000
)

// Standings of a relay in the directory, best first.
const (
	standingSelf      = "self"
	standingPeer      = "peer"
	standingTrusted   = "trusted"
	standingAnnounced = "announced"
)

// knownRelay is one relay of the directory: its latest announcement at
// now and why it ranks where it does.
type knownRelay struct {
	AgentID         string   `json:"agent_id"`
	URL             string   `json:"url"`
	PreferredBranch string   `json:"preferred_branch"`
	ServedBranches  []string `json:"served_branches"`
	Topics          []string `json:"topics,omitempty"`
	AnnouncedAt     int64    `json:"announced_at"`
	Standing        string   `json:"standing"`
	Trust           float64  `json:"trust"`
	// TlogAlarm and TlogAlarms: this relay, witnessing that relay's
	// transparency log, holds signed checkpoints of it that cannot both
	// be true (SPEC §21.5).
	TlogAlarm  bool `json:"tlog_alarm,omitempty"`
	TlogAlarms int  `json:"tlog_alarms,omitempty"`
}

// knownRelays returns the directory at now (see the comment above), best
// first: by standing, then weighted trust score, then the newest
// announcement, then agent_id. Revoked relays are left out.
func (s *Module) knownRelays(ctx context.Context) ([]knownRelay, error) {
	now := s.now()
	self := ""
	if s.cfg.RelayKey != nil {
		self = protocol.AgentIDOf(s.cfg.RelayKey)
	}
	var peers []string
	s.peerKeys.Range(func(k, _ any) bool { peers = append(peers, k.(string)); return true })
	snap := s.core.Views().Trust.Current(now)
	var trusted []string
	for _, sum := range snap.TrustGraph(0, directoryTrusted) {
		if sum.WeightedScore > 0 {
			trusted = append(trusted, sum.AgentID)
		}
	}
	latest := map[string]*protocol.Event{}
	read := func(authors []string, limit int) error {
		f := eventlog.Filter{Kinds: []int64{protocol.KindRelayAnnounce}, Until: &now, Limit: limit, Authors: authors}
		bodies, err := s.core.Log().Query(ctx, f)
		if err != nil {
			return err
		}
		for _, b := range bodies {
			var e protocol.Event
			if json.Unmarshal(b, &e) != nil {
				continue
			}
			if old := latest[e.AgentID]; old == nil || protocol.Less(old, &e) {
				latest[e.AgentID] = &e
			}
		}
		return nil
	}
	for _, k := range append([]string{self}, peers...) {
		if k != "" {
			if err := read([]string{k}, 1); err != nil {
				return nil, err
			}
		}
	}
	if len(trusted) > 0 {
		if err := read(trusted, 2*directoryTrusted); err != nil {
			return nil, err
		}
	}
	if err := read(nil, directoryRecent); err != nil {
		return nil, err
	}
	out := make([]knownRelay, 0, len(latest))
	for agent, e := range latest {
		var a announcement
		if json.Unmarshal([]byte(e.Content), &a) != nil || s.revoked(agent) || s.revoked(strings.TrimRight(a.URL, "/")) {
			continue // governance revoked this relay: its announcements no longer count
		}
		topics, _ := checkTopics(a.Topics) // a malformed list names no topic
		r := knownRelay{AgentID: agent, URL: a.URL, PreferredBranch: a.PreferredBranch, ServedBranches: a.ServedBranches,
			Topics: topics, AnnouncedAt: e.CreatedAt, Standing: standingAnnounced, Trust: snap.WeightedScore(agent)}
		switch {
		case agent == self:
			r.Standing = standingSelf
		case s.isPeerKey(agent):
			r.Standing = standingPeer
		case r.Trust > 0:
			r.Standing = standingTrusted
		}
		out = append(out, r)
	}
	order := map[string]int{standingSelf: 0, standingPeer: 1, standingTrusted: 2, standingAnnounced: 3}
	slices.SortFunc(out, func(a, b knownRelay) int {
		return cmp.Or(cmp.Compare(order[a.Standing], order[b.Standing]), cmp.Compare(b.Trust, a.Trust),
			cmp.Compare(b.AnnouncedAt, a.AnnouncedAt), strings.Compare(a.AgentID, b.AgentID))
	})
	return out, nil
}
