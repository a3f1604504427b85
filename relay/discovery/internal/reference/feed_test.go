package reference

import (
	"slices"

	"github.com/anp2net/relay/protocol"
)

// FeedKinds are the kinds a feed ranks: posts, replies, claims, beacons and
// task requests. DMs never enter a feed.
var FeedKinds = []int64{protocol.KindPost, protocol.KindReply, protocol.KindKnowledge, protocol.KindBeacon, protocol.KindTaskRequest}

// Interests returns what agent follows (agents and topics) and the topics
// and capabilities it uses: its followed topics with its five most used
// topics, and its latest capability names.
func (f *Fold) Interests(agent string) (follows, topics, caps []string) {
	for _, fl := range f.Following(agent, false) {
		if fl.TargetType == TargetAgent {
			follows = append(follows, fl.Target)
		} else {
			topics = append(topics, fl.Target)
		}
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	if a := f.emb.agents[agent]; a != nil {
		for _, t := range sampleTopics(a.posts, 5) {
			if !slices.Contains(topics, t) {
				topics = append(topics, t)
			}
		}
	}
	return follows, topics, slices.Clone(f.ctx.capsOf[agent])
}

// FirstProfile reports whether e is its author's only (non-revoked) kind 0
// in the fold.
func (f *Fold) FirstProfile(e *protocol.Event) bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	p := f.profiles[e.AgentID]
	return len(p) == 1 && p[0].ID == e.ID
}
