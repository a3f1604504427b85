package governance

import (
	"cmp"
	"encoding/json"
	"slices"

	"github.com/anp2net/relay/protocol"
)

// Acts of a kind 30 sovereign_act (seed §15.2).
const (
	ActFreeze         = "freeze_network"
	ActUnfreeze       = "unfreeze"
	ActRollback       = "rollback_to"
	ActBan            = "ban_agent"
	ActRevokeRelay    = "revoke_relay"
	ActShutdown       = "shutdown_protocol"
	ActAppointSteward = "appoint_steward"
	// ActSeedDestruct names a kind 21 seed-key self-destruct in the log.
	ActSeedDestruct = "seed_self_destruct"
)

// Authorities under which an act is valid.
const (
	AuthSovereign = "sovereign"
	AuthSeed      = "seed"
)

// Reasons an act is ignored (Act.Ignored).
const (
	WhyMalformed      = "malformed_content"   // content is not a JSON object with a string "act"
	WhyUnknownAct     = "unknown_act"         // act is not one of §15.2's
	WhyBelowThreshold = "below_threshold"     // neither key set's threshold is met
	WhySeedNotAllowed = "seed_keys_cannot"    // the seed keys may only freeze and unfreeze
	WhySeedDestroyed  = "seed_keys_destroyed" // signed by seed keys after their kind 21
	WhyMissingTarget  = "missing_target"      // ban, revoke, appoint or rollback without its tag
	WhyReplayed       = "replayed"            // an earlier valid act has the same content
	WhyNotSeedSigned  = "not_seed_signed"     // a kind 21 without the seed threshold
)

// Act is one kind 30 (or kind 21) event as governance judges it.
type Act struct {
	ID        string `json:"id"`
	Kind      int64  `json:"kind"`
	Author    string `json:"agent_id"`
	CreatedAt int64  `json:"created_at"`
	Act       string `json:"act"`
	// Valid is true when the act takes effect; otherwise Ignored says why.
	Valid   bool   `json:"valid"`
	Ignored string `json:"ignored,omitempty"`
	// Authority is the key set whose threshold the signers met.
	Authority string `json:"authority,omitempty"`
	// SovereignSigners and SeedSigners are the configured keys among the
	// author and the valid cosigners.
	SovereignSigners []string               `json:"sovereign_signers"`
	SeedSigners      []string               `json:"seed_signers"`
	Cosignatures     []protocol.Cosignature `json:"cosignatures"`
	// PQ are the post-quantum verdicts on signers whose keys have a
	// post-quantum part; a failed one does not count as a signer.
	PQ []PQCheck `json:"pq"`
	// Targets are the act's subjects: agents (ban, appoint), relays
	// (revoke), the checkpoint (rollback).
	Targets []string `json:"targets"`
	// Effective is when a kind 21 takes effect.
	Effective int64 `json:"effective_at,omitempty"`
	// ReplayOf names the earlier act whose content this one repeats.
	ReplayOf string `json:"replay_of,omitempty"`

	event  *protocol.Event
	digest [32]byte
}

// Event returns the judged event.
func (a *Act) Event() *protocol.Event { return a.event }

var knownActs = map[string]bool{
	ActFreeze: true, ActUnfreeze: true, ActRollback: true, ActBan: true,
	ActRevokeRelay: true, ActShutdown: true, ActAppointSteward: true,
}

// signers returns the configured keys among e's author and valid
// cosigners whose post-quantum part, if any, verifies; the judged
// cosignatures; and the post-quantum verdicts.
func (o *Options) signers(e *protocol.Event) (sov, seed []string, cos []protocol.Cosignature, pq []PQCheck) {
	cos = protocol.Cosignatures(e)
	if cos == nil {
		cos = []protocol.Cosignature{}
	}
	who := []string{e.AgentID}
	for _, c := range cos {
		if c.Valid {
			who = append(who, c.AgentID)
		}
	}
	pq = o.pqVerify(e, who)
	for _, c := range pq {
		if !c.Valid {
			who = slices.DeleteFunc(who, func(w string) bool { return w == c.AgentID })
		}
	}
	sov, seed = []string{}, []string{}
	for _, w := range who {
		if slices.Contains(o.SovereignKeys, w) && !slices.Contains(sov, w) {
			sov = append(sov, w)
		}
		if slices.Contains(o.SeedKeys, w) && !slices.Contains(seed, w) {
			seed = append(seed, w)
		}
	}
	slices.Sort(sov)
	slices.Sort(seed)
	return sov, seed, cos, pq
}

// authority returns the key set whose threshold sov and seed meet, the
// sovereign set first; "" for none. seedActive says whether the seed keys
// still count.
func (o *Options) authority(sov, seed []string, seedActive bool) string {
	switch {
	case len(o.SovereignKeys) > 0 && len(sov) >= o.SovereignThreshold:
		return AuthSovereign
	case seedActive && len(o.SeedKeys) > 0 && len(seed) >= o.SeedThreshold:
		return AuthSeed
	}
	return ""
}

// actContent is the part of a kind 30's content governance reads.
type actContent struct {
	Act    string
	Target string
}

func parseAct(content string) (actContent, bool) {
	var m map[string]any
	if json.Unmarshal([]byte(content), &m) != nil {
		return actContent{}, false
	}
	act, ok := m["act"].(string)
	if !ok {
		return actContent{}, false
	}
	target, _ := m["target"].(string)
	return actContent{Act: act, Target: target}, true
}

// targets returns the subjects of act: its tag values of the act's tag
// name, or the content's target when it has none and it fits.
func targets(e *protocol.Event, act, target string) []string {
	var name string
	hex := true
	switch act {
	case ActBan, ActAppointSteward:
		name = "p"
	case ActRollback:
		name = "e"
	case ActRevokeRelay:
		name, hex = "relay", false
	default:
		return []string{}
	}
	out := []string{}
	for _, v := range e.TagValues(name) {
		if (!hex || isHex64(v)) && v != "" && !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	if len(out) == 0 && target != "" && target != "global" && (!hex || isHex64(target)) {
		out = append(out, target)
	}
	return out
}

// byTime orders events by (created_at, id), the order of D6.
func byTime(a, b *protocol.Event) int {
	if c := cmp.Compare(a.CreatedAt, b.CreatedAt); c != 0 {
		return c
	}
	return cmp.Compare(a.ID, b.ID)
}

// judge returns every kind 21 and 30 event of evs as governance judges it,
// in (created_at, id) order, and the time the seed keys stop counting
// (0: never). It depends only on the set of events and o.
func (o *Options) judge(evs []*protocol.Event) ([]*Act, int64) {
	evs = slices.Clone(evs)
	slices.SortFunc(evs, byTime)
	var destroyed int64
	out := make([]*Act, 0, len(evs))
	seen := map[[32]byte]string{}
	for _, e := range evs {
		a := &Act{ID: e.ID, Kind: e.Kind, Author: e.AgentID, CreatedAt: e.CreatedAt, Targets: []string{}, event: e}
		a.SovereignSigners, a.SeedSigners, a.Cosignatures, a.PQ = o.signers(e)
		seedActive := destroyed == 0 || e.CreatedAt < destroyed
		if e.Kind == KindSeedDestruct {
			o.judgeDestruct(a, seedActive)
			if a.Valid && destroyed == 0 {
				destroyed = a.Effective
			}
			out = append(out, a)
			continue
		}
		o.judgeAct(a, seedActive, seen)
		out = append(out, a)
	}
	return out, destroyed
}

// judgeDestruct judges a kind 21: valid under the seed threshold while the
// seed keys count; effective at its content's integer effective_at when
// later than created_at, else at created_at.
func (o *Options) judgeDestruct(a *Act, seedActive bool) {
	e := a.event
	a.Act = ActSeedDestruct
	a.Effective = e.CreatedAt
	var m map[string]any
	if json.Unmarshal([]byte(e.Content), &m) == nil {
		if f, ok := m["effective_at"].(float64); ok && f > float64(e.CreatedAt) && f < 1<<53 {
			a.Effective = int64(f)
		}
	}
	switch {
	case !seedActive:
		a.Ignored = WhySeedDestroyed
	case len(o.SeedKeys) == 0 || len(a.SeedSigners) < o.SeedThreshold:
		a.Ignored = WhyNotSeedSigned
	default:
		a.Valid, a.Authority = true, AuthSeed
	}
}

// judgeAct judges a kind 30 (SPEC §10.2); seen maps the content digests of
// earlier valid acts to their ids.
func (o *Options) judgeAct(a *Act, seedActive bool, seen map[[32]byte]string) {
	e := a.event
	c, ok := parseAct(e.Content)
	a.Act = c.Act
	switch {
	case !ok:
		a.Ignored = WhyMalformed
		return
	case !knownActs[c.Act]:
		a.Ignored = WhyUnknownAct
		return
	}
	a.Targets = targets(e, c.Act, c.Target)
	auth := o.authority(a.SovereignSigners, a.SeedSigners, seedActive)
	switch {
	case auth == "" && !seedActive && len(o.SeedKeys) > 0 && len(a.SeedSigners) >= o.SeedThreshold:
		a.Ignored = WhySeedDestroyed
		return
	case auth == "":
		a.Ignored = WhyBelowThreshold
		return
	case auth == AuthSeed && c.Act != ActFreeze && c.Act != ActUnfreeze:
		a.Ignored = WhySeedNotAllowed
		return
	}
	switch c.Act {
	case ActBan, ActAppointSteward, ActRollback, ActRevokeRelay:
		if len(a.Targets) == 0 {
			a.Ignored = WhyMissingTarget
			return
		}
	}
	a.digest, _ = protocol.CosignDigest(KindSovereignAct, e.Content)
	if first, dup := seen[a.digest]; dup {
		a.Ignored, a.ReplayOf = WhyReplayed, first
		return
	}
	seen[a.digest] = e.ID
	a.Valid, a.Authority = true, auth
}
