package discovery

import (
	"encoding/hex"
	"encoding/json"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/anp2net/relay/protocol"
)

// Citation is one citing event → cited event edge (§12.4).
type Citation struct {
	// ID, AgentID, Kind and CreatedAt describe the citing event (incoming)
	// or the cited event's id (outgoing: only Target is known).
	Citing    string   `json:"citing"`
	Target    string   `json:"target"`
	AgentID   string   `json:"agent_id"`
	Kind      int64    `json:"kind"`
	CreatedAt int64    `json:"created_at"`
	Relations []string `json:"relations"`
}

// citations indexes every e tag and kind 5 derived_from reference of the
// folded (non-DM, content) events: the store's cite table, an edge a row
// keyed by (citing, target) with a secondary index by target.
type citations struct{ st *store }

var markerRe = regexp.MustCompile(`^[a-z][a-z0-9_]{0,31}$`)

// refsOf returns the events e cites and how: each 64-hex e tag with its
// marker (the tag's third element when it is a lowercase word such as
// root, reply or derived, else "mention"), and for a kind 5 each id in
// content's derived_from (a string or a list of strings) as
// "derived_from". Self-citations are kept; the edge says who cited.
func refsOf(e *protocol.Event) map[string][]string {
	out := map[string][]string{}
	addRel := func(id, rel string) {
		if protocol.IsHex64(id) && id != e.ID && !slices.Contains(out[id], rel) {
			out[id] = append(out[id], rel)
		}
	}
	for _, t := range e.Tags {
		if len(t) < 2 || t[0] != "e" {
			continue
		}
		rel := "mention"
		if len(t) >= 3 && markerRe.MatchString(t[2]) {
			rel = t[2]
		} else if len(t) >= 4 && markerRe.MatchString(t[3]) {
			rel = t[3] // NIP-10 style ["e", id, relay_url, marker]
		}
		addRel(t[1], rel)
	}
	if e.Kind == protocol.KindKnowledge {
		var body struct {
			DerivedFrom json.RawMessage `json:"derived_from"`
		}
		json.Unmarshal([]byte(e.Content), &body)
		var one string
		var many []string
		if json.Unmarshal(body.DerivedFrom, &one) == nil {
			many = []string{one}
		} else {
			json.Unmarshal(body.DerivedFrom, &many)
		}
		for _, id := range many {
			addRel(id, "derived_from")
		}
	}
	for _, rels := range out {
		slices.Sort(rels)
	}
	return out
}

// mayCite reports whether refsOf(e) may be non-empty: e has an e tag or
// is a kind 5.
func mayCite(e *protocol.Event) bool {
	if e.Kind == protocol.KindKnowledge {
		return true
	}
	for _, t := range e.Tags {
		if len(t) >= 2 && t[0] == "e" {
			return true
		}
	}
	return false
}

// apply folds e in or out; refs are its refsOf (nil when it cites
// nothing). Callers hold the fold's write lock.
func (c *citations) apply(e *protocol.Event, refs map[string][]string, add bool) {
	s := c.st
	if !add {
		if mayCite(e) {
			s.flush()
			_, err := s.stmts[sCiteDel].Exec(idBlob(e.ID))
			s.fail(err)
			s.wrote(len(refs) + 1)
		}
		return
	}
	citing, agent := string(idBlob(e.ID)), s.agent(e.AgentID)
	for target, rels := range refs {
		s.addCite(citeRow{citing, string(idBlob(target)), agent, e.Kind, e.CreatedAt, strings.Join(rels, ",")})
	}
}

// edges reads the edges a citations statement selects (its first column
// the other end: citing for incoming, target for outgoing). Callers hold
// the fold's read lock.
func (s *store) edges(stmt int, id string, incoming bool, args ...any) []Citation {
	if s.empty() {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ensureIndexes()
	s.flush()
	rows, err := s.stmts[stmt].Query(append([]any{idBlob(id)}, args...)...)
	if err != nil {
		s.fail(err)
		return nil
	}
	defer rows.Close()
	var out []Citation
	for rows.Next() {
		var other []byte
		var agent, kind, at int64
		var rels string
		if err := rows.Scan(&other, &agent, &kind, &at, &rels); err != nil {
			s.fail(err)
			return out
		}
		c := Citation{Citing: id, Target: hex.EncodeToString(other), AgentID: s.name(agent), Kind: kind, CreatedAt: at,
			Relations: strings.Split(rels, ",")}
		if incoming {
			c.Citing, c.Target = c.Target, id
		}
		out = append(out, c)
	}
	s.fail(rows.Err())
	return out
}

// CitedBy returns the edges into id, newest citing event first (then by
// id), and the number of distinct citing agents.
func (f *Fold) CitedBy(id string) ([]Citation, int) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := f.st.edges(sCitedBy, id, true)
	if out == nil {
		out = []Citation{}
	}
	agents := map[string]bool{}
	for _, edge := range out {
		agents[edge.AgentID] = true
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].CreatedAt != out[j].CreatedAt {
			return out[i].CreatedAt > out[j].CreatedAt
		}
		return out[i].Citing > out[j].Citing
	})
	return out, len(agents)
}

// Cites returns the edges out of id, by target.
func (f *Fold) Cites(id string) []Citation {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := f.st.edges(sCites, id, false)
	if out == nil {
		out = []Citation{}
	}
	return out
}

// Reach is the number of distinct agents other than author that cite id.
func (f *Fold) Reach(id, author string) int {
	f.mu.RLock()
	defer f.mu.RUnlock()
	s := f.st
	if s.empty() {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ensureIndexes()
	s.flush()
	var n int
	if err := s.stmts[sReach].QueryRow(idBlob(id), s.agentOf(author)).Scan(&n); err != nil {
		s.fail(err)
	}
	return n
}
