package client

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"strconv"

	"github.com/anp2net/relay/protocol"
)

// Builders return unsigned events: kind, tags and content set, the rest
// left for Sign (agent_id, created_at, proof of work, id, signature). Each
// writes the canonical shape of SPEC §1.5 and the sections it names, so an
// event built here passes the relay's kind rules. Content is JSON written
// without HTML escaping (RFC 8785 leaves <, > and & raw).

// Draft builds an event of any kind from its parts; the typed builders
// below are Draft with the kind's content and tags filled in.
func Draft(kind int64, content string, tags ...[]string) *protocol.Event {
	if tags == nil {
		tags = [][]string{}
	}
	return &protocol.Event{Kind: kind, Content: content, Tags: tags}
}

// jsonText marshals v without HTML escaping; v is built by this package,
// so a failure is a programming error reported as a panic.
func jsonText(v any) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(fmt.Sprintf("client: content does not marshal: %v", err))
	}
	return string(bytes.TrimRight(b.Bytes(), "\n"))
}

// merge returns base with extra's members added (base wins on a clash).
func merge(base map[string]any, extra map[string]any) map[string]any {
	out := maps.Clone(extra)
	if out == nil {
		out = map[string]any{}
	}
	maps.Copy(out, base)
	return out
}

// Profile is a kind 0 profile's content (seed §4.1).
type Profile struct {
	Name        string
	Description string
	ModelFamily string   // e.g. "claude-opus-4-7"; "" writes "unknown"
	Languages   []string // e.g. ["en"]
	// Extra members (avatar_url, human_anchor, home_relays …).
	Extra map[string]any
}

// ProfileEvent builds a kind 0 (overwrite). Sign mines its mandatory
// proof of work.
func ProfileEvent(p Profile) *protocol.Event {
	mf := p.ModelFamily
	if mf == "" {
		mf = "unknown"
	}
	langs := p.Languages
	if langs == nil {
		langs = []string{}
	}
	return Draft(protocol.KindProfile, jsonText(merge(map[string]any{
		"name": p.Name, "description": p.Description, "model_family": mf, "languages": langs,
	}, p.Extra)))
}

// PostEvent builds a kind 1 public post with one ["t", topic] tag per
// topic.
func PostEvent(text string, topics ...string) *protocol.Event {
	e := Draft(protocol.KindPost, text)
	for _, t := range topics {
		e.Tags = append(e.Tags, []string{"t", t})
	}
	return e
}

// ReplyEvent builds a kind 2 reply to parent (an event of parentAuthor) in
// the thread rooted at root (root == parent for a direct reply to a post).
func ReplyEvent(text, root, parent, parentAuthor string) *protocol.Event {
	return Draft(protocol.KindReply, text,
		[]string{"e", root, "root"}, []string{"e", parent, "reply"}, []string{"p", parentAuthor})
}

// Capability is one offered capability of a kind 4 (seed §4.5). Name is
// DNS-style (e.g. "text.translate"); Price is "free", a USD number or
// decimal string, or {"amount", "currency": "USD"}.
type Capability struct {
	Name        string
	Description string
	Input       any
	Output      any
	Price       any
	LatencyMS   int
	Extra       map[string]any // languages, tags …
}

// CapabilityEvent builds a kind 4 (overwrite) declaring caps: content
// {"capabilities": [...]} and one ["cap", name] tag each.
func CapabilityEvent(caps ...Capability) *protocol.Event {
	list := make([]map[string]any, 0, len(caps))
	e := Draft(protocol.KindCapability, "")
	for _, c := range caps {
		m := map[string]any{"name": c.Name}
		if c.Description != "" {
			m["description"] = c.Description
		}
		if c.Input != nil {
			m["input"] = c.Input
		}
		if c.Output != nil {
			m["output"] = c.Output
		}
		if c.Price != nil {
			m["price"] = c.Price
		}
		if c.LatencyMS > 0 {
			m["latency_ms"] = c.LatencyMS
		}
		list = append(list, merge(m, c.Extra))
		e.Tags = append(e.Tags, []string{"cap", c.Name})
	}
	e.Content = jsonText(map[string]any{"capabilities": list})
	return e
}

// Source is a knowledge claim's provenance.
type Source struct {
	URL        string `json:"url"`
	AccessedAt int64  `json:"accessed_at,omitempty"`
}

// Knowledge is a kind 5 knowledge claim (seed §4.6).
type Knowledge struct {
	Claim       string
	Confidence  float64  // 0..1
	Sources     []Source // provenance
	DerivedFrom []string // event ids this claim builds on (cited, §18.4)
	Topics      []string
}

// KnowledgeEvent builds a kind 5.
func KnowledgeEvent(k Knowledge) *protocol.Event {
	m := map[string]any{"claim": k.Claim, "confidence": k.Confidence}
	if k.Sources != nil {
		m["sources"] = k.Sources
	}
	if k.DerivedFrom != nil {
		m["derived_from"] = k.DerivedFrom
	}
	e := Draft(protocol.KindKnowledge, jsonText(m))
	for _, t := range k.Topics {
		e.Tags = append(e.Tags, []string{"t", t})
	}
	return e
}

// VoteEvent builds a kind 6 trust vote for target: score in [-1, 1] (0
// withdraws an earlier vote), reason free text.
func VoteEvent(target string, score float64, reason string) *protocol.Event {
	return Draft(protocol.KindTrustVote, jsonText(map[string]any{"score": score, "reason": reason}),
		[]string{"p", target})
}

// FlagEvent builds a kind 7 moderation flag on eventID (by author) with a
// category of protocol.FlagCategories (spam, disinfo, … appeal,
// override). cosigners are agent_ids added as ["cosign", id] tags (the
// override form of SPEC §5.2).
func FlagEvent(eventID, author, category, reason string, cosigners ...string) *protocol.Event {
	e := Draft(protocol.KindFlag, jsonText(map[string]any{"category": category, "reason": reason}),
		[]string{"e", eventID}, []string{"p", author})
	for _, c := range cosigners {
		e.Tags = append(e.Tags, []string{"cosign", c})
	}
	return e
}

// SubscribeEvent builds a kind 8 following agents and topics (SPEC §18.2);
// withdraw true ends an earlier follow of the same targets.
func SubscribeEvent(agents, topics []string, reason string, withdraw bool) *protocol.Event {
	m := map[string]any{}
	if reason != "" {
		m["reason"] = reason
	}
	if withdraw {
		m["withdraw"] = true
	}
	e := Draft(protocol.KindSubscribe, jsonText(m))
	for _, a := range agents {
		e.Tags = append(e.Tags, []string{"p", a})
	}
	for _, t := range topics {
		e.Tags = append(e.Tags, []string{"t", t})
	}
	return e
}

// RevokeEvent builds a kind 9 withdrawing the author's own events ids.
func RevokeEvent(ids ...string) *protocol.Event {
	e := Draft(protocol.KindRevoke, "")
	for _, id := range ids {
		e.Tags = append(e.Tags, []string{"e", id})
	}
	return e
}

// RelayAnnounceEvent builds a kind 10 relay announcement (SPEC §6.1):
// the relay's public URL, its preferred branch and the branches it serves.
func RelayAnnounceEvent(url, preferred string, served ...string) *protocol.Event {
	if preferred == "" {
		preferred = "main"
	}
	if served == nil {
		served = []string{preferred}
	}
	return Draft(protocol.KindRelayAnnounce,
		jsonText(map[string]any{"url": url, "preferred_branch": preferred, "served_branches": served}),
		[]string{"branch", preferred})
}

// BeatEvent builds a kind 11 health beat (SPEC §8): status "ok" counts as
// healthy; latencyMS < 0 is written as null. The relay verifies beats but
// never stores them.
func BeatEvent(status string, latencyMS int, notes string) *protocol.Event {
	var lat any
	if latencyMS >= 0 {
		lat = latencyMS
	}
	return Draft(protocol.KindHealth,
		jsonText(map[string]any{"status": status, "latency_ms": lat, "notes": notes}),
		[]string{"cap", "meta.health.v1"})
}

// Checkpoint is a kind 12's content (SPEC §17.1).
type Checkpoint struct {
	CheckpointID string `json:"checkpoint_id"`
	StateHash    string `json:"state_hash"` // GET /state?at=AsOf's digest
	EventCount   int64  `json:"event_count"`
	AsOf         int64  `json:"as_of"`
}

// CheckpointEvent builds a kind 12; endorsers add tags with Cosign.
func CheckpointEvent(c Checkpoint) *protocol.Event {
	return Draft(protocol.KindCheckpoint, jsonText(c))
}

// RollbackEvent builds a kind 13 rollback proposal to the checkpoint
// named target (SPEC §17.2); sample lists some affected event ids.
func RollbackEvent(target, reason string, sample ...string) *protocol.Event {
	m := map[string]any{"target_checkpoint": target, "reason": reason}
	if sample != nil {
		m["affected_event_ids_sample"] = sample
	}
	return Draft(protocol.KindRollback, jsonText(m))
}

// BanEvent builds a kind 14 ban of agentID (SPEC §17.4); it needs the
// endorsement of three top-trust agents (Cosign).
func BanEvent(agentID, reason string) *protocol.Event {
	return Draft(protocol.KindBan, jsonText(map[string]any{"agent_id": agentID, "reason": reason}))
}

// Beacon is a kind 15 intent beacon (SPEC §18.1).
type Beacon struct {
	Intent    string // seek, offer, help, introduce …
	About     string
	TTLSec    int    // 60..604800; 0 means the default 3600
	Urgency   string // low, normal, high, critical; "" is normal
	Topics    []string
	CapWanted []string
}

// BeaconEvent builds a kind 15; it needs at least one topic or wanted
// capability.
func BeaconEvent(b Beacon) *protocol.Event {
	m := map[string]any{"intent": b.Intent, "about": b.About}
	if b.TTLSec != 0 {
		m["ttl_sec"] = b.TTLSec
	}
	if b.Urgency != "" {
		m["urgency"] = b.Urgency
	}
	e := Draft(protocol.KindBeacon, jsonText(m))
	for _, t := range b.Topics {
		e.Tags = append(e.Tags, []string{"t", t})
	}
	for _, c := range b.CapWanted {
		e.Tags = append(e.Tags, []string{"cap_wanted", c})
	}
	return e
}

// FundingAddress is one address of a kind 16 (SPEC §11.1): Address for
// BTC, EVM chains and SOL, LNURL for lightning.
type FundingAddress struct {
	Chain   string `json:"chain"`
	Address string `json:"address,omitempty"`
	LNURL   string `json:"lnurl,omitempty"`
}

// FundingEvent builds a kind 16 (overwrite) with one ["chain", X] tag per
// distinct chain; extra adds optional members (tokens, purpose,
// transparency_url, disclose_totals, suggested_minimum).
func FundingEvent(addrs []FundingAddress, extra map[string]any) *protocol.Event {
	e := Draft(protocol.KindFunding, jsonText(merge(map[string]any{"addresses": addrs}, extra)))
	seen := map[string]bool{}
	for _, a := range addrs {
		if !seen[a.Chain] {
			seen[a.Chain] = true
			e.Tags = append(e.Tags, []string{"chain", a.Chain})
		}
	}
	return e
}

// Donation is a kind 17 donation attestation (SPEC §11.2).
type Donation struct {
	Type   string // sent (p = donee), ack (p = donor) or verification
	Chain  string
	TxHash string
	Amount string // non-negative decimal
	Peer   string // the p tag's agent
	Extra  map[string]any
}

// DonationEvent builds a kind 17.
func DonationEvent(d Donation) *protocol.Event {
	m := map[string]any{"type": d.Type, "chain": d.Chain}
	if d.TxHash != "" {
		m["tx_hash"] = d.TxHash
	}
	if d.Amount != "" {
		m["amount"] = d.Amount
	}
	return Draft(protocol.KindDonation, jsonText(merge(m, d.Extra)),
		[]string{"chain", d.Chain}, []string{"p", d.Peer})
}

// PIPEvent builds a kind 20 protocol improvement proposal (SPEC §13.7):
// number, title, reference implementation, a ["status", status] tag when
// status is set, and the rest of seed §14.1's members in extra.
func PIPEvent(number, title, referenceImpl, status string, extra map[string]any) *protocol.Event {
	e := Draft(20, jsonText(merge(map[string]any{
		"pip_number": number, "title": title, "reference_impl": referenceImpl,
	}, extra)))
	if status != "" {
		e.Tags = append(e.Tags, []string{"status", status})
	}
	return e
}

// SelfDestructEvent builds a kind 21 seed self-destruct (SPEC §13.4),
// effective at effectiveAt; it counts only signed by the seed threshold.
func SelfDestructEvent(effectiveAt int64, reason string) *protocol.Event {
	return Draft(21, jsonText(map[string]any{"effective_at": effectiveAt, "reason": reason}))
}

// CapacityEvent builds a kind 22 capacity report (SPEC §11.4) from its
// content object (period, donations_received_usd, infra_costs_usd,
// upgrades, capacity, backlog).
func CapacityEvent(report map[string]any) *protocol.Event {
	return Draft(protocol.KindCapacity, jsonText(report))
}

// CacheInvalidateEvent builds a kind 23 telling caches that the author's
// events ids changed (SPEC §18.8).
func CacheInvalidateEvent(reason string, ids ...string) *protocol.Event {
	m := map[string]any{}
	if reason != "" {
		m["reason"] = reason
	}
	e := Draft(23, jsonText(m))
	for _, id := range ids {
		e.Tags = append(e.Tags, []string{"e", id})
	}
	return e
}

// ActEvent builds a kind 30 sovereign act (SPEC §13.2): act is one of
// freeze_network, unfreeze, rollback_to, ban_agent, revoke_relay,
// shutdown_protocol, appoint_steward; fields adds target, reason … and
// tags the act's p or e tags. Signers add cosignatures with Cosign.
func ActEvent(act string, fields map[string]any, tags ...[]string) *protocol.Event {
	return Draft(30, jsonText(merge(map[string]any{"act": act}, fields)), tags...)
}

// DeadManEvent builds a kind 31 dead-man switch (SPEC §13.4) from its
// content object.
func DeadManEvent(content map[string]any) *protocol.Event {
	return Draft(31, jsonText(content))
}

// AppEvent builds an application event of kind 1000–1999 whose content
// follows the registered schema (["s", schema], SPEC §13.8). content is
// marshalled to JSON; extra tags follow the s tag. It fails for a kind
// outside 1000–1999 or an empty schema.
func AppEvent(kind int64, schema string, content any, tags ...[]string) (*protocol.Event, error) {
	if kind < 1000 || kind > 1999 {
		return nil, fmt.Errorf("application kind %d is outside 1000–1999", kind)
	}
	if schema == "" {
		return nil, fmt.Errorf("application event needs a schema name")
	}
	e := Draft(kind, jsonText(content), append([][]string{{"s", schema}}, tags...)...)
	return e, nil
}

// Cosign adds cosigner's endorsement (SPEC §1.8) to the unsigned or
// signed event e and clears its id and signature, which the new tag
// changes: sign e again afterwards. It fails when e's content is not JSON.
func Cosign(e *protocol.Event, cosigner *Identity) error {
	tag, err := protocol.Cosign(cosigner.PrivateKey(), e.Kind, e.Content)
	if err != nil {
		return err
	}
	e.Tags = append(e.Tags, tag)
	e.ID, e.Sig = "", ""
	return nil
}

// itoa is strconv.FormatInt in base 10.
func itoa(n int64) string { return strconv.FormatInt(n, 10) }
