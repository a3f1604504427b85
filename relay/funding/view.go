package funding

import (
	"math/big"
	"sort"
	"strings"

	"github.com/anp2net/relay/protocol"
)

// VerificationNote is the note the relay stamps on every attestation: it
// verifies nothing on-chain (§13.3.1).
const VerificationNote = "this relay does not perform on-chain verification (seed §13.3.1)"

// USDAssets are the assets counted one-for-one into a disclosed USD total;
// other assets are totalled per asset only (the relay has no price feed).
var USDAssets = map[string]bool{"USD": true, "USDC": true, "USDT": true, "DAI": true}

// Verification is the relay's stamp on an attestation (§13.3.2). The relay
// never verifies: Status is unverified, or unverifiable on Lightning, and
// the other fields are null. A donor's own claim is never repeated here.
type Verification struct {
	Status     string  `json:"status"`
	VerifiedBy *string `json:"verified_by"`
	VerifiedAt *int64  `json:"verified_at"`
	Method     *string `json:"method"`
	Note       string  `json:"note"`
}

// Stamp returns the relay's verification of a donation on chain.
func Stamp(chain string) Verification {
	st := protocol.VerifyUnverified
	if chain == protocol.ChainLightning {
		st = protocol.VerifyUnverifiable
	}
	return Verification{Status: st, Note: VerificationNote}
}

// External is a third party's re-attestation of a donation (§13.3.3,
// §13.3.4): Status is the verifier's own claim, to be weighed by the
// verifier's trust (the adapter adds it).
type External struct {
	EventID   string `json:"event_id"`
	Verifier  string `json:"verifier"`
	Status    string `json:"status"`
	CreatedAt int64  `json:"created_at"`
}

// Donation is one transfer as the relay sees it: the attestations that
// name the same chain and tx hash (or an ack's e tag naming a sent) are
// one donation, dated by its earliest.
type Donation struct {
	EventID   string `json:"event_id"`
	Type      string `json:"type"`
	Donor     string `json:"donor"`
	Chain     string `json:"chain"`
	Asset     string `json:"asset"`
	Amount    string `json:"amount,omitempty"`
	Private   bool   `json:"private"`
	TxHash    string `json:"tx_hash,omitempty"`
	CreatedAt int64  `json:"created_at"`
	// Acknowledged is true when the donee posted an ack (AckEventID).
	Acknowledged bool   `json:"acknowledged"`
	AckEventID   string `json:"ack_event_id,omitempty"`
	// Attestations counts the kind 17s grouped here; ConflictingDonors is
	// true when sent attestations of the same transfer name different
	// authors (the earliest is taken as the donor).
	Attestations int `json:"attestations"`
	// UnvalidatedChain: the chain is not one the relay knows; its tx_hash
	// and addresses were kept as given (§13.1, §13.3.3).
	UnvalidatedChain  bool         `json:"unvalidated_chain,omitempty"`
	ConflictingDonors bool         `json:"conflicting_donors"`
	Verification      Verification `json:"verification"`
	External          []External   `json:"external_attestations"`
}

// Ignored is a kind 17 about the agent that counts for nothing, and why.
type Ignored struct {
	EventID string `json:"event_id"`
	Reason  string `json:"reason"`
}

// Address is the current funding declaration (the latest valid kind 16).
type Address struct {
	EventID          string                    `json:"event_id"`
	CreatedAt        int64                     `json:"created_at"`
	Addresses        []protocol.FundingAddress `json:"addresses"`
	SuggestedMinimum map[string]string         `json:"suggested_minimum,omitempty"`
	Purpose          string                    `json:"purpose,omitempty"`
	TransparencyURL  string                    `json:"transparency_url"`
	DiscloseTotals   bool                      `json:"disclose_totals"`
}

// Summary is an agent's funding over a window.
type Summary struct {
	AgentID string
	// Declaration is nil when the agent has no valid kind 16.
	Declaration *Address
	// InvalidDeclarations counts kind 16s the fold could not read.
	InvalidDeclarations int
	Received            int
	UniqueDonors        int
	Unverified          int
	Unverifiable        int
	// UnvalidatedChain counts donations on chains the relay does not know.
	UnvalidatedChain int
	Acknowledged     int
	// ExternallyVerified counts donations with a re-attestation claiming
	// verified (a third party's claim, not the relay's).
	ExternallyVerified int
	Donations          []Donation
	Ignored            []Ignored
	// TotalsByAsset sums the non-private amounts per asset; TotalUSD sums
	// the USDAssets ones. Both are shown only when the donee discloses.
	TotalsByAsset map[string]string
	TotalUSD      string
}

// Summary returns agent's funding for donations dated in (since, until]:
// its current declaration, the donations with the relay's stamp, the
// counts and the totals. It reads only the held events.
func (f *Fold) Summary(agent string, since, until int64) Summary {
	f.mu.RLock()
	defer f.mu.RUnlock()
	s := Summary{AgentID: agent, TotalsByAsset: map[string]string{}, Donations: []Donation{}, Ignored: []Ignored{}}
	s.Declaration, s.InvalidDeclarations = f.declaration(agent, until)
	groups, ignored := f.group(agent)
	donors := map[string]bool{}
	totals := map[string]*big.Rat{}
	for _, g := range groups {
		if g.CreatedAt <= since || g.CreatedAt > until {
			continue
		}
		s.Received++
		donors[g.Donor] = true
		switch g.Verification.Status {
		case protocol.VerifyUnverifiable:
			s.Unverifiable++
		default:
			s.Unverified++
		}
		if g.Acknowledged {
			s.Acknowledged++
		}
		if g.UnvalidatedChain {
			s.UnvalidatedChain++
		}
		g.External = f.externals(g.ids, g.Donor, agent)
		for _, x := range g.External {
			if x.Status == protocol.VerifyVerified {
				s.ExternallyVerified++
				break
			}
		}
		if !g.Private && g.Amount != "" {
			addDecimal(totals, g.Asset, g.Amount)
		}
		s.Donations = append(s.Donations, g.Donation)
	}
	s.UniqueDonors = len(donors)
	s.Ignored = append(s.Ignored, ignored...)
	usd := new(big.Rat)
	for asset, r := range totals {
		s.TotalsByAsset[asset] = decimalString(r, 18)
		if USDAssets[asset] {
			usd.Add(usd, r)
		}
	}
	s.TotalUSD = usd.FloatString(2)
	sort.Slice(s.Donations, func(i, j int) bool {
		a, b := s.Donations[i], s.Donations[j]
		return a.CreatedAt > b.CreatedAt || a.CreatedAt == b.CreatedAt && a.EventID > b.EventID
	})
	return s
}

// declaration is agent's latest valid kind 16 dated at or before until, and
// how many of its kind 16s are invalid.
func (f *Fold) declaration(agent string, until int64) (*Address, int) {
	var best *fundingRec
	invalid := 0
	for _, r := range f.fundings[agent] {
		if r.funding == nil {
			invalid++
			continue
		}
		if r.ev.CreatedAt <= until && (best == nil || later(r.ev, best.ev)) {
			best = r
		}
	}
	if best == nil {
		return nil, invalid
	}
	fd := best.funding
	return &Address{EventID: best.ev.ID, CreatedAt: best.ev.CreatedAt, Addresses: fd.Addresses,
		SuggestedMinimum: fd.SuggestedMinimum, Purpose: fd.Purpose, TransparencyURL: fd.TransparencyURL,
		DiscloseTotals: fd.DiscloseTotals}, invalid
}

// group is one donation being assembled, with its attestations' ids.
type group struct {
	Donation
	ids []string
}

// group assembles the donations to agent from its attestations, in the
// protocol's order: every sent first (the earliest of a transfer names its
// donor), then every ack (joining the sent its e tag names, else the
// transfer with its tx hash, else standing alone).
func (f *Fold) group(agent string) ([]*group, []Ignored) {
	var sents, acks []*claimRec
	var ignored []Ignored
	for id := range f.byDonee[agent] {
		r := f.claims[id]
		switch {
		case r.d == nil:
			ignored = append(ignored, Ignored{id, r.why})
		case r.d.Type == protocol.DonationSent && r.ev.AgentID == agent:
			ignored = append(ignored, Ignored{id, "a donation an agent attests to itself does not count"})
		case r.d.Type == protocol.DonationSent:
			sents = append(sents, r)
		case r.d.Type == protocol.DonationAck && r.d.Counterparty == agent:
			ignored = append(ignored, Ignored{id, "an ack naming its own author as the donor does not count"})
		case r.d.Type == protocol.DonationAck:
			acks = append(acks, r)
		default:
			ignored = append(ignored, Ignored{id, "a verification without verified_by_external names no attestation"})
		}
	}
	byOrder := func(rs []*claimRec) {
		sort.Slice(rs, func(i, j int) bool { return protocol.Less(rs[i].ev, rs[j].ev) })
	}
	byOrder(sents)
	byOrder(acks)
	sort.Slice(ignored, func(i, j int) bool { return ignored[i].EventID < ignored[j].EventID })
	var out []*group
	byTx, byID := map[string]*group{}, map[string]*group{}
	for _, r := range sents {
		g := byTx[txKey(r.d)]
		if g == nil || txKey(r.d) == "" {
			g = newGroup(r, r.ev.AgentID)
			out = append(out, g)
			if k := txKey(r.d); k != "" {
				byTx[k] = g
			}
		} else if g.Donor != r.ev.AgentID {
			g.ConflictingDonors = true
		}
		g.Attestations++
		g.ids = append(g.ids, r.ev.ID)
		byID[r.ev.ID] = g
	}
	for _, r := range acks {
		g := ackTarget(r, byID, byTx)
		if g == nil {
			g = newGroup(r, r.d.Counterparty)
			out = append(out, g)
			if k := txKey(r.d); k != "" {
				byTx[k] = g
			}
		}
		if !g.Acknowledged {
			g.Acknowledged, g.AckEventID = true, r.ev.ID
		}
		g.Attestations++
		g.ids = append(g.ids, r.ev.ID)
	}
	return out, ignored
}

func ackTarget(r *claimRec, byID, byTx map[string]*group) *group {
	for _, ref := range r.d.Refs {
		if g := byID[ref]; g != nil {
			return g
		}
	}
	if k := txKey(r.d); k != "" {
		return byTx[k]
	}
	return nil
}

func newGroup(r *claimRec, donor string) *group {
	d := r.d
	g := &group{Donation: Donation{EventID: r.ev.ID, Type: d.Type, Donor: donor, Chain: d.Chain, Asset: d.Asset,
		Private: d.Private, TxHash: d.TxHash, CreatedAt: r.ev.CreatedAt, Verification: Stamp(d.Chain), UnvalidatedChain: d.UnvalidatedChain}}
	if !d.Private {
		g.Amount = d.Amount
	}
	return g
}

// externals lists the re-attestations of any of ids, in protocol order.
// Those by the donor or the donee are not external and are left out: a
// party's claim about its own donation is never shown as a verification.
func (f *Fold) externals(ids []string, donor, donee string) []External {
	out := []External{}
	for _, id := range ids {
		for rid := range f.byAttested[id] {
			r := f.claims[rid]
			if r.d == nil || r.ev.AgentID == donor || r.ev.AgentID == donee {
				continue
			}
			out = append(out, External{EventID: rid, Verifier: r.ev.AgentID, Status: r.d.Claimed, CreatedAt: r.ev.CreatedAt})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].CreatedAt < out[j].CreatedAt || out[i].CreatedAt == out[j].CreatedAt && out[i].EventID < out[j].EventID
	})
	return out
}

func addDecimal(totals map[string]*big.Rat, asset, amount string) {
	r, ok := new(big.Rat).SetString(amount)
	if !ok {
		return
	}
	if totals[asset] == nil {
		totals[asset] = new(big.Rat)
	}
	totals[asset].Add(totals[asset], r)
}

// decimalString writes r with at most prec decimals, trailing zeros cut.
func decimalString(r *big.Rat, prec int) string {
	s := r.FloatString(prec)
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s
}
