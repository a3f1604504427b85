package reference

import (
	"sort"
	"strings"

	"github.com/anp2net/relay/protocol"
)

// Target kinds of a follow.
const (
	TargetAgent = "agent"
	TargetTopic = "topic"
)

// A follow target key is "agent:<agent_id>" or "topic:<topic>".
func targetKey(kind, value string) string { return kind + ":" + value }

// subscriptions folds kind 8 events: for each (follower, target) every
// event naming the target (for Remove); the latest by (created_at, id)
// decides, and it follows unless its content withdraws (§12.7).
type subscriptions struct {
	byFollower map[string]map[string][]*protocol.Event
	byTarget   map[string]map[string]bool // target key → followers with any event naming it
}

func newSubscriptions() subscriptions {
	return subscriptions{byFollower: map[string]map[string][]*protocol.Event{}, byTarget: map[string]map[string]bool{}}
}

// targetsOf returns the target keys a kind 8 names: each 64-hex p tag
// (not the author itself) and each non-empty t tag.
func targetsOf(e *protocol.Event) []string {
	var out []string
	for _, p := range distinct(e.TagValues("p")) {
		if protocol.IsHex64(p) && p != e.AgentID {
			out = append(out, targetKey(TargetAgent, p))
		}
	}
	for _, t := range topicsOf(e) {
		out = append(out, targetKey(TargetTopic, t))
	}
	return out
}

func (s *subscriptions) apply(e *protocol.Event, add bool) {
	mine := s.byFollower[e.AgentID]
	if mine == nil {
		if !add {
			return
		}
		mine = map[string][]*protocol.Event{}
		s.byFollower[e.AgentID] = mine
	}
	for _, k := range targetsOf(e) {
		mine[k] = revise(mine[k], e, add)
		if len(mine[k]) == 0 {
			delete(mine, k)
			if fs := s.byTarget[k]; fs != nil {
				delete(fs, e.AgentID)
				if len(fs) == 0 {
					delete(s.byTarget, k)
				}
			}
			continue
		}
		if s.byTarget[k] == nil {
			s.byTarget[k] = map[string]bool{}
		}
		s.byTarget[k][e.AgentID] = true
	}
	if len(mine) == 0 {
		delete(s.byFollower, e.AgentID)
	}
}

// Follow is one (follower, target) pair's current state.
type Follow struct {
	Follower   string `json:"follower"`
	TargetType string `json:"target_type"`
	Target     string `json:"target"`
	Reason     string `json:"reason"`
	Since      int64  `json:"since"`
	EventID    string `json:"event_id"`
	// Withdrawn is true when the latest event withdrew the follow (listed
	// only on request).
	Withdrawn bool `json:"withdrawn,omitempty"`
}

// decide reads the latest of a pair's events; an event whose content is
// not a valid kind 8 (a mirrored one, D15) follows without a reason.
func decide(follower, key string, evs []*protocol.Event) Follow {
	e := latest(evs)
	kind, target, _ := strings.Cut(key, ":")
	sub, _ := protocol.ParseSubscription(e.Content)
	return Follow{Follower: follower, TargetType: kind, Target: target, Reason: sub.Reason,
		Since: e.CreatedAt, EventID: e.ID, Withdrawn: sub.Withdraw}
}

// Following returns what follower follows, agents first then topics, each
// by target; withdrawn pairs only when withdrawn is true.
func (f *Fold) Following(follower string, withdrawn bool) []Follow {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := []Follow{}
	for k, evs := range f.subs.byFollower[follower] {
		if fl := decide(follower, k, evs); withdrawn || !fl.Withdrawn {
			out = append(out, fl)
		}
	}
	sortFollows(out, func(x Follow) string { return x.TargetType + ":" + x.Target })
	return out
}

// Followers returns who follows the target (TargetAgent or TargetTopic),
// by follower; withdrawn pairs only when withdrawn is true.
func (f *Fold) Followers(kind, target string, withdrawn bool) []Follow {
	f.mu.RLock()
	defer f.mu.RUnlock()
	k := targetKey(kind, target)
	out := []Follow{}
	for follower := range f.subs.byTarget[k] {
		if fl := decide(follower, k, f.subs.byFollower[follower][k]); withdrawn || !fl.Withdrawn {
			out = append(out, fl)
		}
	}
	sortFollows(out, func(x Follow) string { return x.Follower })
	return out
}

// Follows reports whether follower currently follows agent target.
func (f *Fold) Follows(follower, target string) bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.follows(follower, target)
}

func (f *Fold) follows(follower, target string) bool {
	evs := f.subs.byFollower[follower][targetKey(TargetAgent, target)]
	return len(evs) > 0 && !decide(follower, "", evs).Withdrawn
}

func sortFollows(list []Follow, key func(Follow) string) {
	sort.Slice(list, func(i, j int) bool { return key(list[i]) < key(list[j]) })
}

// FollowsEvent reports whether follower currently follows e: its author
// (an agent follow) or one of its t tags (a topic follow). A DM never
// matches.
func (f *Fold) FollowsEvent(follower string, e *protocol.Event) bool {
	if e.Kind == protocol.KindDM {
		return false
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	mine := f.subs.byFollower[follower]
	if len(mine) == 0 {
		return false
	}
	following := func(key string) bool {
		evs := mine[key]
		return len(evs) > 0 && !decide(follower, key, evs).Withdrawn
	}
	if following(targetKey(TargetAgent, e.AgentID)) {
		return true
	}
	for _, t := range e.TagValues("t") {
		if following(targetKey(TargetTopic, t)) {
			return true
		}
	}
	return false
}
