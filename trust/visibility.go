package trust

import (
	"math"
	"slices"
)

// Moderation parameters (§7, decisions D8).
const (
	// Visibility values.
	Visible = "visible"
	Hidden  = "hidden"
	// ActiveWindow is the activity window for the active-agent count (30 days).
	ActiveWindow = 30 * secondsPerDay
	// Debounce is the least time between two visibility transitions (§7.4).
	Debounce = 3600
	// AppealCooldown is the least time between two counted appeals (§7.3).
	AppealCooldown = secondsPerDay
	// OverrideTopPercent is the rank a flagger needs for an override (§7.4).
	OverrideTopPercent = 5
	// MaxOverrideSign bounds |sign| of a cosigned override (§7.5).
	MaxOverrideSign = 3
	// MinHideThreshold and ThresholdPerActive give hide_threshold =
	// max(3, 0.001 × active agents).
	MinHideThreshold   = 3
	ThresholdPerActive = 0.001
	// MaxWeightMod caps weight_mod.
	MaxWeightMod = 10
)

// WeightMod returns a flagger's weight, clamp(1 + weighted_score, 0, 10).
func (s *Snapshot) WeightMod(agentID string) float64 {
	if s.excluded[agentID] {
		return 0
	}
	return math.Min(MaxWeightMod, math.Max(0, 1+s.WeightedScore(agentID)))
}

// Transition is one visibility change of an event.
type Transition struct {
	At         int64   `json:"at"`
	Visibility string  `json:"visibility"`
	FlagWeight float64 `json:"flag_weight"`
}

// PendingChange is a visibility change the desired state calls for but the
// one-hour debounce has not let through yet.
type PendingChange struct {
	Visibility string `json:"visibility"`
	At         int64  `json:"at"`
}

// FlagView is the latest flag of one flagger on an event, as weighed at the
// snapshot's time.
type FlagView struct {
	EventID   string `json:"event_id"`
	Flagger   string `json:"flagger"`
	Category  string `json:"category"`
	Reason    string `json:"reason"`
	CreatedAt int64  `json:"created_at"`
	// Override and Appeal report what the flag asked for (category or tag).
	Override bool `json:"override"`
	Appeal   bool `json:"appeal"`
	// Sign is +1, 0 (appeal) or −1…−3 (an override from the top 5%,
	// cosigned); Weight is the flagger's weight_mod.
	Sign   float64 `json:"sign"`
	Weight float64 `json:"weight"`
	// Cosigners are the cosigners counted toward |Sign|.
	Cosigners []string `json:"cosigners"`
}

// Appeal is a flag by the flagged event's own author (§7.3). Counted is
// false when it came within 24 h of the previous counted appeal.
type Appeal struct {
	EventID   string `json:"event_id"`
	Category  string `json:"category"`
	Reason    string `json:"reason"`
	CreatedAt int64  `json:"created_at"`
	Counted   bool   `json:"counted"`
}

// EventModeration is the moderation state of one event: the body of
// GET /events/{id}/flags.
type EventModeration struct {
	EventID string `json:"event_id"`
	// Author is "" while the event itself has not been added.
	Author        string         `json:"author"`
	Visibility    string         `json:"visibility"`
	FlagWeight    float64        `json:"flag_weight"`
	HideThreshold float64        `json:"hide_threshold"`
	FlagCount     int            `json:"flag_count"`
	FirstHiddenAt int64          `json:"first_hidden_at,omitempty"`
	HiddenSince   int64          `json:"hidden_since,omitempty"`
	Pending       *PendingChange `json:"pending,omitempty"`
	Flags         []FlagView     `json:"flags"`
	Appeals       []Appeal       `json:"appeals"`
	History       []Transition   `json:"history"`
}

// modInput is what a computation needs from the locked state.
type modInput struct {
	version, flagVersion uint64
	active               int
	names                []string
	targets              []targetInput
}

type targetInput struct {
	id     string
	author int32 // -1 while the target event is unknown
	flags  []flagRec
}

func (m *Moderation) extract(at int64) modInput {
	m.mu.RLock()
	defer m.mu.RUnlock()
	in := modInput{version: m.version.Load(), flagVersion: m.flagVersion.Load(),
		active: m.activeAgents(at), names: m.agents.names, targets: make([]targetInput, 0, len(m.targets))}
	for id, flags := range m.targets {
		author, ok := m.events.Get(keyOf(id))
		if !ok {
			author = -1
		}
		in.targets = append(in.targets, targetInput{id: id, author: author, flags: flags})
	}
	return in
}

// weigher caches flagger weights (millionths) and override rights.
type weigher struct {
	ts    *Snapshot
	names []string
	w     map[int32]int64
	top   map[int32]bool
}

func (w *weigher) weight(a int32) int64 {
	v, ok := w.w[a]
	if !ok {
		v = micros(w.ts.WeightMod(w.names[a]))
		w.w[a] = v
	}
	return v
}

func (w *weigher) canOverride(a int32) bool {
	v, ok := w.top[a]
	if !ok {
		v = w.ts.InTopPercent(w.names[a], OverrideTopPercent)
		w.top[a] = v
	}
	return v
}

// thresholdMicros returns hide_threshold in millionths.
func thresholdMicros(active int) int64 {
	return max(MinHideThreshold*microsPerWeight, int64(active)*int64(ThresholdPerActive*microsPerWeight))
}

// evaluate derives the moderation state of one target at time at.
func evaluate(t targetInput, at int64, threshold int64, w *weigher) *EventModeration {
	flags := make([]flagRec, 0, len(t.flags))
	for _, f := range t.flags {
		if f.createdAt <= at {
			flags = append(flags, f)
		}
	}
	if len(flags) == 0 {
		return nil
	}
	slices.SortFunc(flags, func(a, b flagRec) int { return a.cmp(&b) })
	s := newSweep(flags, t.author, w)
	em := &EventModeration{EventID: t.id, HideThreshold: fromMicros(threshold)}
	if t.author >= 0 {
		em.Author = w.names[t.author]
	}
	s.run(at, threshold, em)
	s.report(em)
	return em
}
