package trust

import (
	"cmp"
	"slices"
	"strings"
)

// HiddenEvent is one hidden event, for §7.2 author notices ({"hidden":
// true, "flag_count", "first_hidden_at"}).
type HiddenEvent struct {
	EventID       string  `json:"event_id"`
	Author        string  `json:"author"`
	FlagCount     int     `json:"flag_count"`
	FlagWeight    float64 `json:"flag_weight"`
	FirstHiddenAt int64   `json:"first_hidden_at"`
	HiddenSince   int64   `json:"hidden_since"`
}

// VisibilityChange is an event whose visibility differs from the previous
// published snapshot. At is the transition time (0 when the event became
// visible because its flags were revoked).
type VisibilityChange struct {
	EventID    string `json:"event_id"`
	Author     string `json:"author"`
	Visibility string `json:"visibility"`
	At         int64  `json:"at"`
}

// ModSnapshot is an immutable moderation result at one evaluation time. Its
// methods are safe for concurrent use; returned slices are shared and must
// not be modified.
type ModSnapshot struct {
	// Now is the evaluation time: a whole minute (EvalTime) for Compute
	// results, the second of the refresh for published snapshots.
	Now int64
	// Seq numbers published snapshots from 1; 0 for Compute results.
	Seq uint64
	// Version and TrustVersion are the Moderation and Graph versions the
	// snapshot reflects.
	Version, TrustVersion uint64
	// ActiveAgents is the number of agents with an event in (Now − 30 days,
	// Now]; HideThreshold is max(3, 0.001 × ActiveAgents).
	ActiveAgents  int
	HideThreshold float64
	// Changed lists the events whose visibility differs from the previous
	// published snapshot, by event id: every hidden event for the first
	// published snapshot (Seq 1), none for Compute results.
	Changed []VisibilityChange

	flagVersion uint64
	// wake is the earliest instant after Now at which the result changes
	// without a new event: a flag dated after Now starts to count, or a
	// debounced transition goes through; 0 when there is none.
	wake      int64
	events    map[string]*EventModeration // every event with a flag at or before Now
	hidden    []HiddenEvent               // by author, then event id
	hiddenIdx map[string]int32
}

// Hidden reports whether eventID is hidden (O(1)).
func (s *ModSnapshot) Hidden(eventID string) bool {
	_, ok := s.hiddenIdx[eventID]
	return ok
}

// Event returns the moderation state of eventID; an unflagged event is
// visible with no flags.
func (s *ModSnapshot) Event(eventID string) EventModeration {
	if em, ok := s.events[eventID]; ok {
		return *em
	}
	return EventModeration{EventID: eventID, Visibility: Visible, HideThreshold: s.HideThreshold,
		Flags: []FlagView{}, Appeals: []Appeal{}, History: []Transition{}}
}

// FlaggedBy reports whether agentID's latest flag on eventID is counted in
// Event(eventID).Flags, or agentID appealed it (the §7.1 "flagger" reader).
func (s *ModSnapshot) FlaggedBy(eventID, agentID string) bool {
	em, ok := s.events[eventID]
	if !ok {
		return false
	}
	return slices.ContainsFunc(em.Flags, func(f FlagView) bool { return f.Flagger == agentID }) ||
		len(em.Appeals) > 0 && em.Author == agentID
}

// HiddenEvents returns every hidden event, by author then event id.
func (s *ModSnapshot) HiddenEvents() []HiddenEvent { return s.hidden }

// HiddenBy returns the hidden events of author, by event id.
func (s *ModSnapshot) HiddenBy(author string) []HiddenEvent {
	lo, _ := slices.BinarySearchFunc(s.hidden, author, func(h HiddenEvent, a string) int { return strings.Compare(h.Author, a) })
	hi := lo
	for hi < len(s.hidden) && s.hidden[hi].Author == author {
		hi++
	}
	return s.hidden[lo:hi:hi]
}

// compute derives the moderation snapshot from the current state, weighing
// flaggers with ts (which fixes the evaluation time).
func (m *Moderation) compute(ts *Snapshot) *ModSnapshot {
	in := m.extract(ts.Now)
	threshold := thresholdMicros(in.active)
	s := &ModSnapshot{Now: ts.Now, Version: in.version, TrustVersion: ts.Version, flagVersion: in.flagVersion,
		ActiveAgents: in.active, HideThreshold: fromMicros(threshold), Changed: []VisibilityChange{},
		events: make(map[string]*EventModeration, len(in.targets)), hiddenIdx: make(map[string]int32)}
	w := &weigher{ts: ts, names: in.names, w: make(map[int32]int64), top: make(map[int32]bool)}
	for _, t := range in.targets {
		for i := range t.flags {
			if c := t.flags[i].createdAt; c > ts.Now {
				s.wakeAt(c)
			}
		}
		if em := evaluate(t, ts.Now, threshold, w); em != nil {
			if em.Pending != nil {
				s.wakeAt(em.Pending.At)
			}
			s.events[t.id] = em
			if em.Visibility == Hidden {
				s.hidden = append(s.hidden, HiddenEvent{EventID: em.EventID, Author: em.Author, FlagCount: em.FlagCount,
					FlagWeight: em.FlagWeight, FirstHiddenAt: em.FirstHiddenAt, HiddenSince: em.HiddenSince})
			}
		}
	}
	slices.SortFunc(s.hidden, func(a, b HiddenEvent) int {
		if c := strings.Compare(a.Author, b.Author); c != 0 {
			return c
		}
		return strings.Compare(a.EventID, b.EventID)
	})
	for i, h := range s.hidden {
		s.hiddenIdx[h.EventID] = int32(i)
	}
	return s
}

func (s *ModSnapshot) wakeAt(t int64) {
	if s.wake == 0 || t < s.wake {
		s.wake = t
	}
}

// diff fills s.Changed with the visibility changes since prev.
func (s *ModSnapshot) diff(prev *ModSnapshot) {
	for _, h := range s.hidden {
		if prev == nil || !prev.Hidden(h.EventID) {
			s.Changed = append(s.Changed, VisibilityChange{EventID: h.EventID, Author: h.Author, Visibility: Hidden, At: h.HiddenSince})
		}
	}
	if prev != nil {
		for _, h := range prev.hidden {
			if s.Hidden(h.EventID) {
				continue
			}
			c := VisibilityChange{EventID: h.EventID, Author: h.Author, Visibility: Visible}
			if em, ok := s.events[h.EventID]; ok && len(em.History) > 0 {
				c.At = em.History[len(em.History)-1].At
			}
			s.Changed = append(s.Changed, c)
		}
	}
	slices.SortFunc(s.Changed, func(a, b VisibilityChange) int { return cmp.Compare(a.EventID, b.EventID) })
}

// Compute returns the exact moderation state at EvalTime(now), weighing
// flaggers with the exact trust snapshot at the same time (Graph.At). It
// does not publish the result.
func (m *Moderation) Compute(now int64) *ModSnapshot { return m.compute(m.g.At(now)) }

// ComputeWith returns the exact moderation state at ts.Now weighing
// flaggers with ts, which must be a snapshot of this view's Graph: no
// trust computation. It does not publish the result.
func (m *Moderation) ComputeWith(ts *Snapshot) *ModSnapshot { return m.compute(ts) }

// Digest returns SHA-256 over the canonical serialization of the snapshot:
// the threshold and every flagged event's full state, by event id (see
// writeDigest).
func (s *ModSnapshot) Digest() [32]byte { return canonicalDigest(s.writeDigest) }

// Digest returns SHA-256 over the canonical serialization of the moderation
// state at EvalTime(now), computed exactly (Compute).
func (m *Moderation) Digest(now int64) [32]byte { return m.Compute(now).Digest() }
