package reference

import (
	"slices"
	"sort"

	"github.com/anp2net/relay/protocol"
)

// beacon is a folded kind 15 whose content follows §12.1's rules (a
// mirrored beacon that breaks them is stored but never active, D15).
type beacon struct {
	ev        *protocol.Event
	content   protocol.Beacon
	topics    []string
	capWanted []string
}

// Beacon is one beacon as GET /beacons serves it.
type Beacon struct {
	ID        string   `json:"id"`
	AgentID   string   `json:"agent_id"`
	CreatedAt int64    `json:"created_at"`
	ExpiresAt int64    `json:"expires_at"`
	Intent    string   `json:"intent"`
	About     string   `json:"about"`
	TTLSec    int64    `json:"ttl_sec"`
	Urgency   string   `json:"urgency"`
	Topics    []string `json:"topics"`
	CapWanted []string `json:"cap_wanted"`
	// Event is the beacon event itself.
	Event *protocol.Event `json:"event"`
}

func (f *Fold) foldBeacon(e *protocol.Event, add bool) {
	if !add {
		delete(f.beacons, e.ID)
		return
	}
	b, err := protocol.ParseBeacon(e.Content)
	caps := distinct(e.TagValues("cap_wanted"))
	if err != nil || len(topicsOf(e)) == 0 && len(caps) == 0 {
		return
	}
	f.beacons[e.ID] = &beacon{ev: e, content: b, topics: topicsOf(e), capWanted: caps}
}

// BeaconQuery selects active beacons: all of them, or those whose t tags
// hold Topic and whose cap_wanted tags hold CapWanted (each when set).
type BeaconQuery struct {
	Topic, CapWanted, Author string
	Limit                    int
}

// Active returns the beacons active at now (created_at ≤ now <
// created_at + ttl_sec) that match q, most urgent first, then newest
// first, then by id; and how many matched before the limit.
func (f *Fold) Active(q BeaconQuery, now int64) ([]Beacon, int) {
	f.mu.RLock()
	var hits []*beacon
	for _, b := range f.beacons {
		if b.active(now) && b.matches(q) {
			hits = append(hits, b)
		}
	}
	f.mu.RUnlock()
	sort.Slice(hits, func(i, j int) bool {
		a, b := hits[i], hits[j]
		if ua, ub := protocol.UrgencyRank(a.content.Urgency), protocol.UrgencyRank(b.content.Urgency); ua != ub {
			return ua > ub
		}
		return newer(a.ev, b.ev)
	})
	total := len(hits)
	if q.Limit > 0 && len(hits) > q.Limit {
		hits = hits[:q.Limit]
	}
	out := make([]Beacon, len(hits))
	for i, b := range hits {
		out[i] = b.view()
	}
	return out, total
}

func (b *beacon) active(now int64) bool {
	return b.ev.CreatedAt <= now && now < b.ev.CreatedAt+b.content.TTLSec
}

func (b *beacon) matches(q BeaconQuery) bool {
	return (q.Topic == "" || slices.Contains(b.topics, q.Topic)) &&
		(q.CapWanted == "" || slices.Contains(b.capWanted, q.CapWanted)) &&
		(q.Author == "" || b.ev.AgentID == q.Author)
}

func (b *beacon) view() Beacon {
	return Beacon{
		ID: b.ev.ID, AgentID: b.ev.AgentID, CreatedAt: b.ev.CreatedAt,
		ExpiresAt: b.ev.CreatedAt + b.content.TTLSec, Intent: b.content.Intent, About: b.content.About,
		TTLSec: b.content.TTLSec, Urgency: b.content.Urgency,
		Topics: nonNil(b.topics), CapWanted: nonNil(b.capWanted), Event: b.ev,
	}
}

func distinct(vals []string) []string {
	var out []string
	for _, v := range vals {
		if v != "" && !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
