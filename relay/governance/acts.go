package governance

import (
	"cmp"
	"encoding/json"
	"math"
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
	// StewardSigners and DeadMan describe a kind 31.
	StewardSigners []string `json:"steward_signers,omitempty"`
	DeadMan        *DeadMan `json:"dead_man,omitempty"`

	event  *protocol.Event
	digest [32]byte
}

// Event returns the judged event.
func (a *Act) Event() *protocol.Event { return a.event }

var knownActs = map[string]bool{
	ActFreeze: true, ActUnfreeze: true, ActRollback: true, ActBan: true,
	ActRevokeRelay: true, ActShutdown: true, ActAppointSteward: true,
}

// regime is who holds authority at one time: the sovereign key set (the
// configured one, or the one a dead-man switch transferred authority to),
// whether the seed keys count, and the stewards.
type regime struct {
	SovKeys          []string `json:"sovereign_keys"`
	SovThreshold     int      `json:"sovereign_threshold"`
	SeedActive       bool     `json:"seed_keys_active"`
	Stewards         []string `json:"stewards"`
	StewardThreshold int      `json:"steward_threshold"`
	// Since is when this regime began (0: genesis); By the kind 31 that
	// began it, or ByAutomatic when the dead-man switch fired on its own.
	Since int64  `json:"since"`
	By    string `json:"by,omitempty"`
	// dormantFrom is, for an automatic regime, the last activity of the
	// keys that went dormant (a kind 31 under it is judged against it).
	dormantFrom int64
}

// signers returns e's author and valid cosigners whose post-quantum part,
// if any, verifies; the judged cosignatures; and the post-quantum
// verdicts.
func (o *Options) signers(e *protocol.Event) (who []string, cos []protocol.Cosignature, pq []PQCheck) {
	cos = protocol.Cosignatures(e)
	if cos == nil {
		cos = []protocol.Cosignature{}
	}
	who = []string{e.AgentID}
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
	return who, cos, pq
}

// among returns the members of keys in who, sorted and distinct.
func among(who, keys []string) []string {
	out := []string{}
	for _, w := range who {
		if slices.Contains(keys, w) && !slices.Contains(out, w) {
			out = append(out, w)
		}
	}
	slices.Sort(out)
	return out
}

// authority returns the key set whose threshold sov and seed meet under
// rg, the sovereign set first; "" for none.
func (o *Options) authority(sov, seed []string, rg *regime) string {
	switch {
	case len(rg.SovKeys) > 0 && len(sov) >= rg.SovThreshold:
		return AuthSovereign
	case rg.SeedActive && len(o.SeedKeys) > 0 && len(seed) >= o.SeedThreshold:
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

// judgement is judge's answer: every act in order, the time the seed keys
// stop counting (0: never), and the regimes in order of their Since.
type judgement struct {
	acts      []*Act
	destroyed int64
	regimes   []regime
	// final is the regime after every act (stewards included).
	final regime
	// pending is the automatic dead-man transfer due after the last act
	// (nil: none): in force from its Since.
	pending *regime
}

// regimeAt returns the regime in force at t.
func (j *judgement) regimeAt(t int64) *regime {
	if j.pending != nil && j.pending.Since <= t {
		return j.pending
	}
	rg := &j.regimes[0]
	for i := range j.regimes {
		if j.regimes[i].Since <= t {
			rg = &j.regimes[i]
		}
	}
	return rg
}

// finalAt is the regime after every act as of t: final, or the pending
// automatic transfer once it is due.
func (j *judgement) finalAt(t int64) regime {
	if j.pending != nil && j.pending.Since <= t {
		return *j.pending
	}
	return j.final
}

// judge returns every kind 21, 30 and 31 event of evs as governance judges
// it, in (created_at, id) order. activity lists the created_at of the
// stored events authored by configured sovereign keys. It depends only on
// the set of events and o.
func (o *Options) judge(evs []*protocol.Event, activity map[string][]int64) *judgement {
	return o.judgeCached(evs, activity, nil)
}

// signed is signers' answer for one event, cached across judgements.
type signed struct {
	who []string
	cos []protocol.Cosignature
	pq  []PQCheck
	// content, parsed and digest are a kind 30's parse and cosign digest.
	content actContent
	parsed  bool
	digest  [32]byte
}

// judgeCached is judge with a cache of each event's signature checks
// (pure functions of the event), so a new act does not re-verify the
// others. cache may be nil.
func (o *Options) judgeCached(evs []*protocol.Event, activity map[string][]int64, cache map[string]*signed) *judgement {
	evs = slices.Clone(evs)
	slices.SortFunc(evs, byTime)
	j := &judgement{acts: make([]*Act, 0, len(evs))}
	rg := regime{SovKeys: append([]string{}, o.SovereignKeys...), SovThreshold: o.SovereignThreshold, SeedActive: len(o.SeedKeys) > 0, Stewards: []string{}}
	j.regimes = append(j.regimes, rg)
	seen := map[[32]byte]string{}
	var lastSov int64 // latest valid sovereign act
	for _, e := range evs {
		if next, ok := o.autoFire(activity, &rg, lastSov, e.CreatedAt); ok {
			rg = next
			j.regimes = append(j.regimes, rg)
		}
		a := &Act{ID: e.ID, Kind: e.Kind, Author: e.AgentID, CreatedAt: e.CreatedAt, Targets: []string{}, event: e}
		sg := cache[e.ID]
		if sg == nil {
			sg = &signed{}
			sg.who, sg.cos, sg.pq = o.signers(e)
			if e.Kind == KindSovereignAct {
				sg.content, sg.parsed = parseAct(e.Content)
				sg.digest, _ = protocol.CosignDigest(KindSovereignAct, e.Content)
			}
			if cache != nil {
				cache[e.ID] = sg
			}
		}
		who := sg.who
		a.Cosignatures, a.PQ = sg.cos, sg.pq
		if j.destroyed != 0 && e.CreatedAt >= j.destroyed {
			rg.SeedActive = false
		}
		a.SovereignSigners, a.SeedSigners = among(who, rg.SovKeys), among(who, o.SeedKeys)
		switch e.Kind {
		case KindSeedDestruct:
			o.judgeDestruct(a, rg.SeedActive)
			if a.Valid && j.destroyed == 0 {
				j.destroyed = a.Effective
			}
		case KindDeadMan:
			last := max(lastSov, lastActivity(activity, rg.SovKeys, e.CreatedAt))
			if rg.By == ByAutomatic {
				last = rg.dormantFrom // it names the successor of the automatic transfer
			}
			if next, ok := o.judgeDeadMan(a, who, &rg, last); ok {
				rg = next
				j.regimes = append(j.regimes, rg)
			}
		default:
			o.judgeAct(a, sg, &rg, seen)
			if a.Valid && a.Authority == AuthSovereign {
				lastSov = a.CreatedAt
				if a.Act == ActAppointSteward {
					rg.Stewards = addAll(slices.Clone(rg.Stewards), a.Targets)
					slices.Sort(rg.Stewards)
					rg.StewardThreshold = stewardThreshold(e.Content, len(rg.Stewards))
				}
			}
		}
		j.acts = append(j.acts, a)
	}
	if next, ok := o.autoFire(activity, &rg, lastSov, math.MaxInt64); ok {
		j.pending = &next
	}
	j.final = rg
	return j
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
func (o *Options) judgeAct(a *Act, sg *signed, rg *regime, seen map[[32]byte]string) {
	e := a.event
	c, ok := sg.content, sg.parsed
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
	auth := o.authority(a.SovereignSigners, a.SeedSigners, rg)
	switch {
	case auth == "" && !rg.SeedActive && len(o.SeedKeys) > 0 && len(a.SeedSigners) >= o.SeedThreshold:
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
	a.digest = sg.digest
	if first, dup := seen[a.digest]; dup {
		a.Ignored, a.ReplayOf = WhyReplayed, first
		return
	}
	seen[a.digest] = e.ID
	a.Valid, a.Authority = true, auth
}
