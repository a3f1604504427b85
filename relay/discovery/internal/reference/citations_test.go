package reference

import (
	"encoding/json"
	"regexp"
	"slices"
	"sort"

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
// folded (non-DM, content) events.
type citations struct {
	incoming map[string]map[string]*Citation // target → citing id → edge
	outgoing map[string][]*Citation          // citing id → its edges
}

func newCitations() citations {
	return citations{incoming: map[string]map[string]*Citation{}, outgoing: map[string][]*Citation{}}
}

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

func (c *citations) apply(e *protocol.Event, add bool) {
	if !add {
		for _, edge := range c.outgoing[e.ID] {
			if in := c.incoming[edge.Target]; in != nil {
				delete(in, e.ID)
				if len(in) == 0 {
					delete(c.incoming, edge.Target)
				}
			}
		}
		delete(c.outgoing, e.ID)
		return
	}
	if _, done := c.outgoing[e.ID]; done {
		return
	}
	refs := refsOf(e)
	if len(refs) == 0 {
		return
	}
	edges := make([]*Citation, 0, len(refs))
	for target, rels := range refs {
		edge := &Citation{Citing: e.ID, Target: target, AgentID: e.AgentID, Kind: e.Kind, CreatedAt: e.CreatedAt, Relations: rels}
		edges = append(edges, edge)
		if c.incoming[target] == nil {
			c.incoming[target] = map[string]*Citation{}
		}
		c.incoming[target][e.ID] = edge
	}
	sort.Slice(edges, func(i, j int) bool { return edges[i].Target < edges[j].Target })
	c.outgoing[e.ID] = edges
}

// CitedBy returns the edges into id, newest citing event first (then by
// id), and the number of distinct citing agents.
func (f *Fold) CitedBy(id string) ([]Citation, int) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	in := f.cites.incoming[id]
	out := make([]Citation, 0, len(in))
	agents := map[string]bool{}
	for _, edge := range in {
		out = append(out, *edge)
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
	out := make([]Citation, 0, len(f.cites.outgoing[id]))
	for _, edge := range f.cites.outgoing[id] {
		out = append(out, *edge)
	}
	return out
}

// Reach is the number of distinct agents other than author that cite id.
func (f *Fold) Reach(id, author string) int {
	f.mu.RLock()
	defer f.mu.RUnlock()
	agents := map[string]bool{}
	for _, edge := range f.cites.incoming[id] {
		if edge.AgentID != author {
			agents[edge.AgentID] = true
		}
	}
	return len(agents)
}
