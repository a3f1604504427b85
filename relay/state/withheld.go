package state

import (
	"encoding/json"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/eventlog"
)

// Redactions (SPEC §21.8). An event is withheld when a kind 25 by one of
// Options.Redactors names it in an e tag, or when the log holds only its
// tombstone (AddWithheld). A withheld event is excluded from every view
// exactly as a revoked one is (counted in Digest.Revoked, reported by
// Revoked), whichever of the redaction and the event arrives first; a
// tombstone still counts in the set of events (its id is the log's
// entry). Redactions by other keys are ordinary events.

// addRedaction records the targets of ev, a counted redaction, and
// withdraws from the views those already folded (found with lookup).
// Callers hold mu.
func (s *State) addRedaction(ev *protocol.Event, lookup Lookup) {
	reason := redactionReason(ev)
	for _, t := range revokeTargets(ev) {
		if old, ok := s.withheld[t]; ok && old.Redaction != "" && old.Redaction <= ev.ID {
			continue // the reason shown is the smallest redaction id's
		}
		w := eventlog.Withholding{Reason: reason, Redaction: ev.ID, CreatedAt: s.withheld[t].CreatedAt}
		s.setWithheld(t, w)
		if _, done := s.revoked[t]; done || lookup == nil {
			continue
		}
		if target := lookup(t); target != nil && target.ID == t {
			w.CreatedAt = target.CreatedAt
			s.setWithheld(t, w)
			s.markRevoked(t)
			s.remove(target)
		}
	}
}

// redactionReason returns the reason a kind 25's content states ("" when
// its content is not the JSON object it should be).
func redactionReason(ev *protocol.Event) string {
	var c struct {
		Reason string `json:"reason"`
	}
	_ = json.Unmarshal([]byte(ev.Content), &c)
	return c.Reason
}

// setWithheld records why id is withheld. Callers hold mu.
func (s *State) setWithheld(id string, w eventlog.Withholding) {
	s.revMu.Lock()
	s.withheld[id] = w
	s.revMu.Unlock()
}

// AddWithheld counts the event id whose body the log withholds (its
// stored body is a tombstone, eventlog.WithheldOf) at log sequence seq:
// it is part of the set of events, and of no view.
func (s *State) AddWithheld(seq int64, id string, w eventlog.Withholding) {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.version.Add(1)
	if seq >= s.seq {
		s.seq, s.lastID = seq, id
	}
	s.count++
	addID(&s.sum, id)
	if _, ok := s.withheld[id]; !ok {
		s.setWithheld(id, w)
	}
	s.markRevoked(id)
}

// AddStored folds one stored body at seq: a tombstone (AddWithheld) or
// an event (Add). It returns the event, nil for a tombstone.
func (s *State) AddStored(seq int64, body []byte, lookup Lookup) (*protocol.Event, error) {
	if id, w, ok := eventlog.WithheldOf(body); ok {
		s.AddWithheld(seq, id, w)
		return nil, nil
	}
	e, err := protocol.DecodeJSON(body)
	if err != nil {
		return nil, err
	}
	s.Add(seq, e, lookup)
	return e, nil
}

// noteWithheld records the created_at of ev, an event a counted
// redaction names (its reconciliation item). Callers hold mu.
func (s *State) noteWithheld(ev *protocol.Event) {
	if w, ok := s.withheld[ev.ID]; ok && w.CreatedAt == 0 {
		w.CreatedAt = ev.CreatedAt
		s.setWithheld(ev.ID, w)
	}
}

// Withheld reports whether id is withheld and why (CreatedAt is 0 while
// neither the event nor its tombstone was folded).
func (s *State) Withheld(id string) (eventlog.Withholding, bool) {
	s.revMu.RLock()
	defer s.revMu.RUnlock()
	w, ok := s.withheld[id]
	return w, ok
}

// WithheldIDs returns every withheld id.
func (s *State) WithheldIDs() []string {
	s.revMu.RLock()
	defer s.revMu.RUnlock()
	out := make([]string, 0, len(s.withheld))
	for id := range s.withheld {
		out = append(out, id)
	}
	return out
}

// Redactor reports whether a kind 25 by agent counts here.
func (s *State) Redactor(agent string) bool { return s.redactors[agent] }
