package governance

import (
	"encoding/json"
	"slices"
)

// DefaultDeadManAfter is the sovereign dormancy after which the stewards
// may take authority (seed §15.4: "N months (e.g., 12 months)").
const DefaultDeadManAfter = 365 * 86400

// Reasons a kind 31 is ignored.
const (
	WhyNoStewards         = "no_stewards"             // no steward was appointed before it
	WhyBelowStewards      = "below_steward_threshold" // too few stewards signed
	WhySovereignActive    = "sovereign_active"        // the sovereign keys were active within the period
	WhyMalformedSuccessor = "malformed_content"       // content is not a JSON object
)

// DeadMan is what a kind 31 claims and what governance derived instead.
type DeadMan struct {
	// Claimed is the content's last_sovereign_activity (not trusted);
	// Derived the latest sovereign act or sovereign-key event before it.
	Claimed int64 `json:"claimed_last_sovereign_activity"`
	Derived int64 `json:"last_sovereign_activity"`
	// NewKeys and NewThreshold are the sovereign set it transfers to.
	NewKeys      []string `json:"new_sovereign_keys"`
	NewThreshold int      `json:"new_threshold"`
}

// stewardThreshold reads an appoint_steward's multisig_threshold (or
// threshold) when it is an integer in 1..n, else a majority of n.
func stewardThreshold(content string, n int) int {
	var m map[string]any
	json.Unmarshal([]byte(content), &m)
	for _, k := range []string{"multisig_threshold", "threshold"} {
		if f, ok := m[k].(float64); ok && f == float64(int(f)) && int(f) >= 1 && int(f) <= n {
			return int(f)
		}
	}
	return n/2 + 1
}

// lastActivity is the latest created_at ≤ t of an event by one of keys.
func lastActivity(activity map[string][]int64, keys []string, t int64) int64 {
	var last int64
	for _, k := range keys {
		for _, at := range activity[k] {
			if at <= t {
				last = max(last, at)
			}
		}
	}
	return last
}

// judgeDeadMan judges a kind 31 (SPEC §10.4) under rg, whose sovereign
// keys were last active at last; on success it returns the regime it
// starts.
func (o *Options) judgeDeadMan(a *Act, who []string, rg *regime, last int64) (regime, bool) {
	e := a.event
	a.Act = "dead_man_switch"
	var m map[string]any
	if json.Unmarshal([]byte(e.Content), &m) != nil {
		a.Ignored = WhyMalformedSuccessor
		return regime{}, false
	}
	dm := &DeadMan{Derived: last}
	if f, ok := m["last_sovereign_activity"].(float64); ok && f >= 0 && f < 1<<53 {
		dm.Claimed = int64(f)
	}
	a.DeadMan = dm
	a.StewardSigners = among(who, rg.Stewards)
	switch {
	case len(rg.Stewards) == 0:
		a.Ignored = WhyNoStewards
		return regime{}, false
	case len(a.StewardSigners) < rg.StewardThreshold:
		a.Ignored = WhyBelowStewards
		return regime{}, false
	case e.CreatedAt-last < o.DeadManAfter:
		a.Ignored = WhySovereignActive
		return regime{}, false
	}
	keys, _ := m["new_stewards"].([]any)
	for _, k := range keys {
		if s, ok := k.(string); ok && isHex64(s) && !slices.Contains(dm.NewKeys, s) {
			dm.NewKeys = append(dm.NewKeys, s)
		}
	}
	if len(dm.NewKeys) == 0 {
		dm.NewKeys = slices.Clone(rg.Stewards)
	}
	slices.Sort(dm.NewKeys)
	dm.NewThreshold = stewardThreshold(e.Content, len(dm.NewKeys))
	a.Valid, a.Authority, a.Targets = true, "stewards", dm.NewKeys
	next := *rg
	next.SovKeys, next.SovThreshold, next.Since, next.By = dm.NewKeys, dm.NewThreshold, e.CreatedAt, e.ID
	return next, true
}

// ByAutomatic is a regime's By when the dead-man switch fired on its own.
const ByAutomatic = "automatic"

// autoFire is the dead-man switch firing on its own (seed §15.4: "an event
// automatically fires"): once stewards are appointed, the first instant
// at or before until at which the sovereign keys in force have shown no
// activity (a valid sovereign act, or any stored event by one of them) for
// DeadManAfter seconds, authority passes to the stewards at their
// threshold. It is derived from the set of events and the options alone;
// nothing is signed. ok is false when no such instant is ≤ until, or the
// stewards already hold authority.
func (o *Options) autoFire(activity map[string][]int64, rg *regime, lastSov, until int64) (regime, bool) {
	if len(rg.Stewards) == 0 || rg.StewardThreshold < 1 || slices.Equal(rg.SovKeys, rg.Stewards) {
		return regime{}, false
	}
	cur := max(lastSov, rg.Since)
	var ts []int64
	for _, k := range rg.SovKeys {
		for _, t := range activity[k] {
			if t > cur && t <= until {
				ts = append(ts, t)
			}
		}
	}
	slices.Sort(ts)
	fire, ok := int64(0), false
	for _, t := range ts {
		if t-cur >= o.DeadManAfter {
			fire, ok = cur+o.DeadManAfter, true
			break
		}
		cur = t
	}
	if !ok && until-cur >= o.DeadManAfter {
		fire, ok = cur+o.DeadManAfter, true
	}
	if !ok {
		return regime{}, false
	}
	next := *rg
	next.SovKeys, next.SovThreshold = slices.Clone(rg.Stewards), rg.StewardThreshold
	next.Since, next.By, next.dormantFrom = fire, ByAutomatic, fire-o.DeadManAfter
	return next, true
}
