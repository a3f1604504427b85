package federation

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/eventlog"
)

// Bounds of a relay's announced topics (seed §12.9.2 topic relays).
const (
	MaxTopics   = 16
	MaxTopicLen = 64
	// topicRelaysAsked is how many topic relays one resolution asks
	// first, before the agent's home relays (within ResolveRelays).
	topicRelaysAsked = 1
)

// checkTopics returns topics sorted and deduplicated, or an error naming
// the first that is empty, longer than MaxTopicLen, or not printable
// ASCII without spaces or commas, or when there are more than MaxTopics.
func checkTopics(topics []string) ([]string, error) {
	if len(topics) == 0 {
		return nil, nil
	}
	out := slices.Clone(topics)
	slices.Sort(out)
	out = slices.Compact(out)
	if len(out) > MaxTopics {
		return nil, fmt.Errorf("%d topics: at most %d", len(out), MaxTopics)
	}
	for _, t := range out {
		if t == "" || len(t) > MaxTopicLen || strings.ContainsFunc(t, func(r rune) bool { return r <= ' ' || r > '~' || r == ',' }) {
			return nil, fmt.Errorf("topic %q: want 1 to %d printable ASCII bytes, no space or comma", t, MaxTopicLen)
		}
	}
	return out, nil
}

// agentTopics returns the capabilities agent declares in its latest kind
// 4 here (its cap tags), nil when it declares none or the read fails.
func (s *Module) agentTopics(ctx context.Context, agent string) []string {
	bodies, err := s.core.Log().Query(ctx, eventlog.Filter{Kinds: []int64{protocol.KindCapability}, Authors: []string{agent}, Limit: 1})
	if err != nil || len(bodies) == 0 {
		return nil
	}
	var e protocol.Event
	if json.Unmarshal(bodies[0], &e) != nil {
		return nil
	}
	return e.TagValues("cap")
}

// topicRelays returns the URLs of at most topicRelaysAsked relays, other
// than this one, whose latest kind 10 announces a topic among agent's
// capabilities, best standing first (GET /relays' order): the topic relays
// a resolution asks before the agent's home relays (seed §12.9.2). They
// are announced relays, so AllowedRelay lets resolution reach them only
// over the guarded dialer unless they are configured peers.
func (s *Module) topicRelays(ctx context.Context, agent string) []string {
	caps := s.agentTopics(ctx, agent)
	if len(caps) == 0 {
		return nil
	}
	relays, err := s.knownRelays(ctx)
	if err != nil {
		return nil
	}
	var out []string
	for _, r := range relays {
		if r.Standing == standingSelf || !slices.ContainsFunc(r.Topics, func(t string) bool { return slices.Contains(caps, t) }) {
			continue
		}
		out = append(out, r.URL)
		if len(out) == topicRelaysAsked {
			break
		}
	}
	return out
}
