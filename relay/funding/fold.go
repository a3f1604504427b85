// Package funding is the economy's transparency side as a relay capability
// (seed §13): funding addresses (kind 16), donation attestations (kind 17)
// with the relay's own verification stamp, and relay operators' capacity
// reports (kind 22, §13.7). Its pure part, Fold, derives everything from
// the set of stored events (D6); its adapter serves GET /funding/{agent_id}
// and GET /capacity and, when asked, publishes this relay's own capacity
// report signed by the relay key.
package funding

import (
	"strings"
	"sync"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/state"
)

// fundingRec is one kind 16 as the fold read it.
type fundingRec struct {
	ev      *protocol.Event
	funding *protocol.Funding // nil when invalid
	why     string            // the first violation when invalid
}

// claimRec is one kind 17 as the fold read it.
type claimRec struct {
	ev  *protocol.Event
	d   *protocol.Donation // nil when invalid
	why string
}

// reportRec is one kind 22 as the fold read it.
type reportRec struct {
	ev       *protocol.Event
	report   *protocol.CapacityReport // nil when its shape is wrong
	problems []string
}

// Fold holds every non-revoked kind 10, 16, 17 and 22 event, indexed for the
// views; every figure is computed from these sets at query time, so the
// result depends only on which events are held, never on their order.
type Fold struct {
	mu sync.RWMutex
	// fundings: author → event id → kind 16.
	fundings map[string]map[string]*fundingRec
	// claims: event id → kind 17; byDonee: donee → ids of the attestations
	// about donations to it (sent and verification name it in p, an ack is
	// its own); byAttested: attestation id → re-attestations judging it.
	claims     map[string]*claimRec
	byDonee    map[string]map[string]struct{}
	byAttested map[string]map[string]struct{}
	// reports: author → id → kind 22; operators: kind 10 author → ids.
	reports   map[string]map[string]*reportRec
	operators map[string]map[string]struct{}
}

var _ state.Digester = (*Fold)(nil)

// NewFold returns an empty fold.
func NewFold() *Fold {
	return &Fold{
		fundings: map[string]map[string]*fundingRec{}, claims: map[string]*claimRec{},
		byDonee: map[string]map[string]struct{}{}, byAttested: map[string]map[string]struct{}{},
		reports: map[string]map[string]*reportRec{}, operators: map[string]map[string]struct{}{},
	}
}

// Add folds one stored, non-revoked event in.
func (f *Fold) Add(ev *protocol.Event) {
	switch ev.Kind {
	case protocol.KindFunding, protocol.KindDonation, protocol.KindCapacity, protocol.KindRelayAnnounce:
	default:
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	switch ev.Kind {
	case protocol.KindFunding:
		r := &fundingRec{ev: ev}
		var errs []error
		if r.funding, errs = protocol.ParseFunding(ev); len(errs) > 0 {
			r.why = errs[0].Error()
		}
		inner(f.fundings, ev.AgentID)[ev.ID] = r
	case protocol.KindDonation:
		f.addClaim(ev)
	case protocol.KindCapacity:
		r := &reportRec{ev: ev}
		r.report, r.problems = protocol.ParseCapacity(ev.Content)
		inner(f.reports, ev.AgentID)[ev.ID] = r
	case protocol.KindRelayAnnounce:
		set(f.operators, ev.AgentID)[ev.ID] = struct{}{}
	}
}

func (f *Fold) addClaim(ev *protocol.Event) {
	r := &claimRec{ev: ev}
	d, errs := protocol.ParseDonation(ev)
	if len(errs) > 0 {
		r.why = errs[0].Error()
	}
	r.d = d
	f.claims[ev.ID] = r
	if d != nil && d.Attests != "" {
		set(f.byAttested, d.Attests)[ev.ID] = struct{}{}
		return
	}
	if donee := claimDonee(ev, d); donee != "" {
		set(f.byDonee, donee)[ev.ID] = struct{}{}
	}
}

// claimDonee is the agent a kind 17 is about: the author of an ack, else
// the first 64-hex p tag (also for an invalid one, so /funding can say why
// it was ignored).
func claimDonee(ev *protocol.Event, d *protocol.Donation) string {
	if d != nil && d.Type == protocol.DonationAck {
		return ev.AgentID
	}
	for _, v := range ev.TagValues("p") {
		if protocol.IsHex64(v) {
			return v
		}
	}
	return ""
}

// Remove withdraws a revoked event.
func (f *Fold) Remove(ev *protocol.Event) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch ev.Kind {
	case protocol.KindFunding:
		drop(f.fundings, ev.AgentID, ev.ID)
	case protocol.KindCapacity:
		drop(f.reports, ev.AgentID, ev.ID)
	case protocol.KindRelayAnnounce:
		drop(f.operators, ev.AgentID, ev.ID)
	case protocol.KindDonation:
		r, ok := f.claims[ev.ID]
		if !ok {
			return
		}
		delete(f.claims, ev.ID)
		if r.d != nil && r.d.Attests != "" {
			drop(f.byAttested, r.d.Attests, ev.ID)
		} else if donee := claimDonee(ev, r.d); donee != "" {
			drop(f.byDonee, donee, ev.ID)
		}
	}
}

func inner[V any](m map[string]map[string]V, k string) map[string]V {
	in, ok := m[k]
	if !ok {
		in = map[string]V{}
		m[k] = in
	}
	return in
}

func set(m map[string]map[string]struct{}, k string) map[string]struct{} { return inner(m, k) }

func drop[V any](m map[string]map[string]V, k, id string) {
	if in, ok := m[k]; ok {
		delete(in, id)
		if len(in) == 0 {
			delete(m, k)
		}
	}
}

// later reports whether a comes after b in the protocol's order.
func later(a, b *protocol.Event) bool { return protocol.Less(b, a) }

// txKey groups attestations of one transfer: chain and lowercase tx hash.
func txKey(d *protocol.Donation) string {
	if d.TxHash == "" {
		return ""
	}
	return d.Chain + ":" + strings.ToLower(d.TxHash)
}
