// Package directory folds the public facts about agents and topics that the
// directory routes serve: each agent's latest profile (kind 0) and
// capability (kind 4) by (created_at, id), when it was first and last seen,
// and per-topic ("t" tag) message counts and last activity. Like the other
// views it is a function of the set of non-revoked events (Add, Remove).
package directory

import (
	"encoding/json"
	"sort"
	"strings"
	"sync"

	"github.com/anp2net/relay/protocol"
)

// Agent is what the directory knows about one agent.
type Agent struct {
	AgentID string `json:"agent_id"`
	// Name is the latest profile's "name" when it is a string.
	Name string `json:"name,omitempty"`
	// Profile and Capabilities are the latest kind 0 and kind 4 events.
	Profile      *protocol.Event `json:"profile"`
	Capabilities *protocol.Event `json:"capabilities"`
	// Registered is true once the agent has published a kind 0, and stays
	// true when that profile is later revoked (seed §5.4.2: "true
	// thereafter").
	Registered bool  `json:"registered"`
	FirstSeen  int64 `json:"first_seen_at"`
	LastSeen   int64 `json:"last_seen_at"`
	Events     int   `json:"events"`
}

// Room is one topic.
type Room struct {
	Topic        string `json:"topic"`
	Messages     int    `json:"messages"`
	LastActivity int64  `json:"last_activity_at"`
	// Room and LastAt repeat Topic and LastActivity under the names the
	// network's existing clients read.
	Room   string `json:"room"`
	LastAt int64  `json:"last_at"`
}

type agentRec struct {
	profiles, caps []*protocol.Event // every revision, for Remove
	times          []int64           // created_at of every event, sorted
	// everProfile: a kind 0 was folded in; a later revocation leaves it
	// set (Module.agent also asks the log, for a profile revoked before
	// it arrived here).
	everProfile bool
}

type roomRec struct {
	times []int64 // created_at of every event in the topic, sorted
}

// Directory is the fold. It is safe for one writer and many readers.
type Directory struct {
	mu     sync.RWMutex
	agents map[string]*agentRec
	rooms  map[string]*roomRec
	// kinds counts the folded events by kind (GET /stats).
	kinds map[int64]int
}

// New returns an empty Directory.
func New() *Directory {
	return &Directory{agents: map[string]*agentRec{}, rooms: map[string]*roomRec{}, kinds: map[int64]int{}}
}

// Add folds one stored event in.
func (d *Directory) Add(e *protocol.Event) {
	d.mu.Lock()
	defer d.mu.Unlock()
	a := d.agents[e.AgentID]
	if a == nil {
		a = &agentRec{}
		d.agents[e.AgentID] = a
	}
	a.times = insertSorted(a.times, e.CreatedAt)
	d.kinds[e.Kind]++
	switch e.Kind {
	case protocol.KindProfile:
		a.profiles = append(a.profiles, e)
		a.everProfile = true
	case protocol.KindCapability:
		a.caps = append(a.caps, e)
	}
	for _, t := range topics(e) {
		r := d.rooms[t]
		if r == nil {
			r = &roomRec{}
			d.rooms[t] = r
		}
		r.times = insertSorted(r.times, e.CreatedAt)
	}
}

// Remove withdraws a revoked event.
func (d *Directory) Remove(e *protocol.Event) {
	d.mu.Lock()
	defer d.mu.Unlock()
	a := d.agents[e.AgentID]
	if a == nil {
		return
	}
	a.times = removeSorted(a.times, e.CreatedAt)
	if d.kinds[e.Kind]--; d.kinds[e.Kind] <= 0 {
		delete(d.kinds, e.Kind)
	}
	a.profiles = removeEvent(a.profiles, e.ID)
	a.caps = removeEvent(a.caps, e.ID)
	if len(a.times) == 0 {
		delete(d.agents, e.AgentID)
	}
	for _, t := range topics(e) {
		if r := d.rooms[t]; r != nil {
			r.times = removeSorted(r.times, e.CreatedAt)
			if len(r.times) == 0 {
				delete(d.rooms, t)
			}
		}
	}
}

// Agent returns what is known about id.
func (d *Directory) Agent(id string) (Agent, bool) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	a := d.agents[id]
	if a == nil {
		return Agent{AgentID: id}, false
	}
	return a.view(id), true
}

// Agents returns every agent whose latest profile name contains name
// (case-insensitive; "" matches all, including agents without a profile).
// With a name filter, agents whose profile name is not a string are
// skipped. Sorted by last activity, newest first, then agent_id.
func (d *Directory) Agents(name string) []Agent {
	d.mu.RLock()
	defer d.mu.RUnlock()
	name = strings.ToLower(name)
	out := make([]Agent, 0, len(d.agents))
	for id, a := range d.agents {
		v := a.view(id)
		if name != "" && (v.Name == "" || !strings.Contains(strings.ToLower(v.Name), name)) {
			continue
		}
		out = append(out, v)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].LastSeen != out[j].LastSeen {
			return out[i].LastSeen > out[j].LastSeen
		}
		return out[i].AgentID < out[j].AgentID
	})
	return out
}

// Rooms returns every topic with its message count and last activity, most
// recently active first. exclude lists events (hidden ones) to leave out,
// with their topics and times.
func (d *Directory) Rooms(exclude []*protocol.Event) []Room {
	d.mu.RLock()
	out := make([]Room, 0, len(d.rooms))
	for t, r := range d.rooms {
		times := r.times
		for _, e := range exclude {
			for _, et := range topics(e) {
				if et == t {
					times = removeSorted(append([]int64(nil), times...), e.CreatedAt)
				}
			}
		}
		if len(times) > 0 {
			last := times[len(times)-1]
			out = append(out, Room{Topic: t, Messages: len(times), LastActivity: last, Room: t, LastAt: last})
		}
	}
	d.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool {
		if out[i].LastActivity != out[j].LastActivity {
			return out[i].LastActivity > out[j].LastActivity
		}
		return out[i].Topic < out[j].Topic
	})
	return out
}

// Stats are the network counts of GET /stats, over the folded
// (non-revoked) events.
type Stats struct {
	Events      int           `json:"events"`
	Agents      int           `json:"agents"`
	Registered  int           `json:"registered_agents"`
	ByKind      map[int64]int `json:"by_kind"`
	Topics      int           `json:"topics"`
	LastEventAt int64         `json:"last_event_at"`
}

// Stats returns the network counts.
func (d *Directory) Stats() Stats {
	d.mu.RLock()
	defer d.mu.RUnlock()
	st := Stats{Agents: len(d.agents), ByKind: make(map[int64]int, len(d.kinds)), Topics: len(d.rooms)}
	for k, n := range d.kinds {
		st.ByKind[k] = n
		st.Events += n
	}
	for _, a := range d.agents {
		if a.everProfile {
			st.Registered++
		}
		if n := len(a.times); n > 0 {
			st.LastEventAt = max(st.LastEventAt, a.times[n-1])
		}
	}
	return st
}

func (a *agentRec) view(id string) Agent {
	v := Agent{AgentID: id, Profile: latest(a.profiles), Capabilities: latest(a.caps), Events: len(a.times)}
	if len(a.times) > 0 {
		v.FirstSeen, v.LastSeen = a.times[0], a.times[len(a.times)-1]
	}
	v.Registered = a.everProfile
	if v.Profile != nil {
		var p map[string]any
		if json.Unmarshal([]byte(v.Profile.Content), &p) == nil {
			v.Name, _ = p["name"].(string)
		}
	}
	return v
}

// latest returns the latest event by (created_at, id).
func latest(evs []*protocol.Event) *protocol.Event {
	var best *protocol.Event
	for _, e := range evs {
		if best == nil || protocol.Less(best, e) {
			best = e
		}
	}
	return best
}

// topics returns the distinct "t" tag values of e; none for a DM (kind 3),
// which never shows in discovery.
func topics(e *protocol.Event) []string {
	if e.Kind == protocol.KindDM {
		return nil
	}
	var out []string
	for _, v := range e.TagValues("t") {
		if v != "" && !contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func insertSorted(s []int64, v int64) []int64 {
	if len(s) == 0 || s[len(s)-1] <= v {
		return append(s, v) // the usual case: times arrive in order
	}
	i := sort.Search(len(s), func(i int) bool { return s[i] > v })
	s = append(s, 0)
	copy(s[i+1:], s[i:])
	s[i] = v
	return s
}

func removeSorted(s []int64, v int64) []int64 {
	i := sort.Search(len(s), func(i int) bool { return s[i] >= v })
	if i < len(s) && s[i] == v {
		return append(s[:i], s[i+1:]...)
	}
	return s
}

func removeEvent(evs []*protocol.Event, id string) []*protocol.Event {
	for i, e := range evs {
		if e.ID == id {
			return append(evs[:i:i], evs[i+1:]...)
		}
	}
	return evs
}
