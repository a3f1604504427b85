package branches

import (
	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/trust"
)

// BanView is one kind 14 event as judged at an evaluation time.
type BanView struct {
	ID        string `json:"id"`
	Author    string `json:"author"`
	CreatedAt int64  `json:"created_at"`
	Ban
	// Valid reports whether at least MinEndorsers members of the
	// high-trust set at created_at endorse it.
	Valid     bool       `json:"valid"`
	Invalid   string     `json:"invalid_reason,omitempty"`
	Endorsed  int        `json:"endorsed"`
	Endorsers []Endorser `json:"endorsers"`
}

// bans judges every ban created at or before at. Callers hold mu.
func (f *Fold) bans(at int64) []BanView {
	out := []BanView{}
	for _, s := range f.sorted(protocol.KindBan, at) {
		bv := BanView{ID: s.ev.ID, Author: s.ev.AgentID, CreatedAt: s.ev.CreatedAt}
		b, err := ParseBan(s.ev)
		if err != nil {
			bv.Invalid = reasonOf(err)
			out = append(out, bv)
			continue
		}
		bv.Ban = b
		bv.Endorsers = endorsers(s, f.topSet(s.ev.CreatedAt))
		bv.Endorsed = countTop(bv.Endorsers)
		bv.Valid = bv.Endorsed >= MinEndorsers
		if !bv.Valid {
			bv.Invalid = "too_few_top_trust_endorsers"
		}
		out = append(out, bv)
	}
	return out
}

// Banned returns the agents a valid ban created at or before at names,
// with the earliest such ban's time.
func (v View) Banned() map[string]int64 {
	out := map[string]int64{}
	for _, b := range v.Bans {
		if t, ok := out[b.AgentID]; b.Valid && (!ok || b.CreatedAt < t) {
			out[b.AgentID] = b.CreatedAt
		}
	}
	return out
}

// BannedBy returns the id of the earliest valid ban of agent in force at
// now (created at or before EvalTime(now)), or "" when there is none.
// Without any kind 14 it costs one lock; otherwise the banned set is kept
// per (votes and bans version, minute).
func (f *Fold) BannedBy(agent string, now int64) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.bannedAt(now)[agent]
}

// Excluded returns the agents under a valid ban in force at now (nil when
// none): state.Excluder, so their votes, flags and weights stop counting
// in trust, moderation, tasks and credit. The high-trust sets of this
// fold (§17.0) are computed without it.
func (f *Fold) Excluded(now int64) map[string]bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out map[string]bool
	for a := range f.bannedAt(now) {
		if out == nil {
			out = map[string]bool{}
		}
		out[a] = true
	}
	return out
}

// bannedAt returns the banned agents at now and their bans. Callers hold
// mu and do not change the map.
func (f *Fold) bannedAt(now int64) map[string]string {
	if f.nbans == 0 {
		return nil
	}
	at := trust.EvalTime(now)
	if c := &f.banned; c.agents == nil || c.version != f.version || c.at != at {
		c.version, c.at, c.agents = f.version, at, map[string]string{}
		for _, b := range f.bans(at) {
			if _, ok := c.agents[b.AgentID]; b.Valid && !ok {
				c.agents[b.AgentID] = b.ID
			}
		}
	}
	return f.banned.agents
}
