package funding

import (
	"crypto/sha256"
	"encoding/json"
	"math"
	"sort"
)

// digestView is what the digest covers: every agent's current declaration
// and all-time donation summary at the evaluation time, and every
// operator's latest capacity report.
type digestView struct {
	Version  string         `json:"version"`
	Agents   []digestAgent  `json:"agents"`
	Capacity []digestReport `json:"capacity"`
}

type digestAgent struct {
	AgentID     string     `json:"agent_id"`
	Declaration string     `json:"declaration"`
	Invalid     int        `json:"invalid_declarations"`
	Received    int        `json:"received"`
	Donors      int        `json:"unique_donors"`
	Unverified  int        `json:"unverified"`
	Unverifiabl int        `json:"unverifiable"`
	Acked       int        `json:"acknowledged"`
	ExtVerified int        `json:"externally_verified"`
	Donations   []Donation `json:"donations"`
	Ignored     []Ignored  `json:"ignored"`
	Totals      map[string]string
}

type digestReport struct {
	Operator string `json:"operator"`
	EventID  string `json:"event_id"`
	Valid    bool   `json:"valid"`
}

// DigestVersion names the digest's construction.
const DigestVersion = "funding.v1"

// Digest is SHA-256 over the canonical JSON of every agent's funding summary
// over all donations dated at or before at, and every operator's latest
// report at at. It depends only on the held events and at (D6).
func (f *Fold) Digest(at int64) [32]byte {
	f.mu.RLock()
	agents := map[string]bool{}
	for a := range f.fundings {
		agents[a] = true
	}
	for a := range f.byDonee {
		agents[a] = true
	}
	f.mu.RUnlock()
	ids := make([]string, 0, len(agents))
	for a := range agents {
		ids = append(ids, a)
	}
	sort.Strings(ids)
	v := digestView{Version: DigestVersion, Agents: []digestAgent{}, Capacity: []digestReport{}}
	for _, a := range ids {
		s := f.Summary(a, math.MinInt64, at)
		d := digestAgent{AgentID: a, Invalid: s.InvalidDeclarations, Received: s.Received, Donors: s.UniqueDonors,
			Unverified: s.Unverified, Unverifiabl: s.Unverifiable, Acked: s.Acknowledged, ExtVerified: s.ExternallyVerified,
			Donations: s.Donations, Ignored: s.Ignored, Totals: s.TotalsByAsset}
		if s.Declaration != nil {
			d.Declaration = s.Declaration.EventID
		}
		v.Agents = append(v.Agents, d)
	}
	for _, r := range f.Capacity(at) {
		v.Capacity = append(v.Capacity, digestReport{r.Operator, r.EventID, r.Valid})
	}
	b, _ := json.Marshal(v)
	return sha256.Sum256(b)
}
