package governance

import (
	"cmp"
	"encoding/json"
	"slices"
	"strings"

	"github.com/anp2net/relay/protocol"
)

// Sovereign is the effect of the valid acts created at or before At: the
// body of GET /sovereign/state.
type Sovereign struct {
	At int64 `json:"at"`
	// Frozen: publishing is halted (§11.6, §15.2). FrozenBy is the
	// authority of the freeze in force ("sovereign" wins), FrozenSince
	// when it began, FrozenUntil when a seed freeze lapses (0: until an
	// unfreeze), FreezeAct the act that froze or last renewed it.
	Frozen      bool   `json:"frozen"`
	FrozenBy    string `json:"frozen_by,omitempty"`
	FrozenSince int64  `json:"frozen_since,omitempty"`
	FrozenUntil int64  `json:"frozen_until,omitempty"`
	FreezeAct   string `json:"freeze_act,omitempty"`
	// Shutdown: shutdown_protocol was exercised (ShutdownSince, ShutdownAct).
	Shutdown      bool   `json:"shutdown"`
	ShutdownSince int64  `json:"shutdown_since,omitempty"`
	ShutdownAct   string `json:"shutdown_act,omitempty"`
	// BannedAgents, RevokedRelays and Stewards are sorted; Rollbacks are
	// the checkpoints rollback_to named, oldest act first.
	BannedAgents  []string `json:"banned_agents"`
	RevokedRelays []string `json:"revoked_relays"`
	Stewards      []string `json:"stewards"`
	Rollbacks     []string `json:"rollbacks"`
	// SeedKeysActive is false once a valid kind 21 took effect
	// (SeedKeysDestroyedAt).
	SeedKeysActive      bool  `json:"seed_keys_active"`
	SeedKeysDestroyedAt int64 `json:"seed_keys_destroyed_at,omitempty"`
	// LastSovereignActivity is the created_at of the latest valid act
	// under the sovereign keys (0: none).
	LastSovereignActivity int64 `json:"last_sovereign_activity"`
	// Regime is who holds authority at At: the sovereign keys (changed by
	// a dead-man switch) and the stewards' threshold.
	Regime regime `json:"regime"`
	// ValidActs and IgnoredActs count the acts created at or before At.
	ValidActs   int `json:"valid_acts"`
	IgnoredActs int `json:"ignored_acts"`
}

// sovereignAt folds the judged acts (in order) created at or before at.
func (o *Options) sovereignAt(j *judgement, at int64) *Sovereign {
	acts, destroyed := j.acts, j.destroyed
	s := &Sovereign{At: at, BannedAgents: []string{}, RevokedRelays: []string{}, Stewards: []string{}, Rollbacks: []string{}}
	s.SeedKeysActive = len(o.SeedKeys) > 0 && (destroyed == 0 || at < destroyed)
	if destroyed != 0 && destroyed <= at {
		s.SeedKeysDestroyedAt = destroyed
	}
	var sovFrozen bool
	var sovSince, seedSince, seedUntil int64
	var sovAct, seedAct string
	for _, a := range effectOrder(acts) {
		if a.CreatedAt > at {
			break
		}
		if !a.Valid {
			s.IgnoredActs++
			continue
		}
		s.ValidActs++
		if a.Authority == AuthSovereign {
			s.LastSovereignActivity = a.CreatedAt
		}
		switch a.Act {
		case ActFreeze:
			if a.Authority == AuthSovereign {
				if !sovFrozen {
					sovSince = a.CreatedAt
				}
				sovFrozen, sovAct = true, a.ID
				break
			}
			if a.CreatedAt >= seedUntil {
				seedSince = a.CreatedAt
			}
			seedUntil, seedAct = max(seedUntil, a.CreatedAt+o.SeedFreezeTTL), a.ID
		case ActUnfreeze:
			if a.Authority == AuthSovereign {
				sovFrozen = false
			}
			seedUntil = min(seedUntil, a.CreatedAt)
		case ActShutdown:
			if !s.Shutdown {
				s.Shutdown, s.ShutdownSince, s.ShutdownAct = true, a.CreatedAt, a.ID
			}
		case ActBan:
			s.BannedAgents = addAll(s.BannedAgents, a.Targets)
		case ActRevokeRelay:
			s.RevokedRelays = addAll(s.RevokedRelays, a.Targets)
		case ActAppointSteward:
			s.Stewards = addAll(s.Stewards, a.Targets)
		case ActRollback:
			s.Rollbacks = append(s.Rollbacks, a.Targets...)
		}
	}
	if s.SeedKeysDestroyedAt != 0 {
		seedUntil = min(seedUntil, s.SeedKeysDestroyedAt)
	}
	switch {
	case sovFrozen:
		s.Frozen, s.FrozenBy, s.FrozenSince, s.FreezeAct = true, AuthSovereign, sovSince, sovAct
	case at < seedUntil:
		s.Frozen, s.FrozenBy, s.FrozenSince, s.FrozenUntil, s.FreezeAct = true, AuthSeed, seedSince, seedUntil, seedAct
	}
	s.Regime = *j.regimeAt(at)
	s.Regime.Stewards, s.Regime.SeedActive = s.Stewards, s.SeedKeysActive
	s.Regime.StewardThreshold = stewardsThresholdAt(acts, at, len(s.Stewards))
	slices.Sort(s.BannedAgents)
	slices.Sort(s.RevokedRelays)
	slices.Sort(s.Stewards)
	return s
}

// effectOrder returns acts (in (created_at, id) order) with every unfreeze
// moved after the other acts of its second: a freeze and an unfreeze with
// one created_at leave the network unfrozen, whatever their ids.
func effectOrder(acts []*Act) []*Act {
	out := slices.Clone(acts)
	slices.SortStableFunc(out, func(a, b *Act) int {
		if a.CreatedAt != b.CreatedAt {
			return cmp.Compare(a.CreatedAt, b.CreatedAt)
		}
		return cmp.Compare(unfreezeRank(a), unfreezeRank(b))
	})
	return out
}

func unfreezeRank(a *Act) int {
	if a.Act == ActUnfreeze {
		return 1
	}
	return 0
}

// stewardsThresholdAt is the threshold of the latest valid appointment
// at or before at.
func stewardsThresholdAt(acts []*Act, at int64, n int) int {
	th := 0
	for _, a := range acts {
		if a.CreatedAt <= at && a.Valid && a.Act == ActAppointSteward {
			th = stewardThreshold(a.event.Content, n)
		}
	}
	return th
}

func addAll(set, vals []string) []string {
	for _, v := range vals {
		if !slices.Contains(set, v) {
			set = append(set, v)
		}
	}
	return set
}

// RelayRevoked reports whether a kind 10 announcement e comes from a
// revoked relay: its author or its content's url is in RevokedRelays.
func (s *Sovereign) RelayRevoked(e *protocol.Event) bool {
	if len(s.RevokedRelays) == 0 {
		return false
	}
	if _, ok := slices.BinarySearch(s.RevokedRelays, e.AgentID); ok {
		return true
	}
	var a struct {
		URL string `json:"url"`
	}
	if json.Unmarshal([]byte(e.Content), &a) == nil && a.URL != "" {
		u := strings.TrimRight(a.URL, "/")
		return slices.ContainsFunc(s.RevokedRelays, func(r string) bool { return strings.TrimRight(r, "/") == u })
	}
	return false
}

// Banned reports whether agent is banned in s.
func (s *Sovereign) Banned(agent string) bool {
	_, ok := slices.BinarySearch(s.BannedAgents, agent)
	return ok
}
