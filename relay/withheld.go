package relay

import (
	"encoding/hex"
	"slices"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/eventlog"
	"github.com/anp2net/relay/relay/reconcile"
	"github.com/anp2net/relay/relay/state"
)

// Withheld events (SPEC §21.8): the log holds a tombstone in place of the
// body (anp2 redact), or the state knows a counted redaction that names
// the event (a peer's, honored by this relay's operator). Either way no
// route serves the body.

// CodeWithheld is the 451 of an event whose body the relay withholds.
const CodeWithheld = "withheld"

// withheldOf reports whether the stored event id, whose stored body is
// body, is withheld, and why.
func (s *Server) withheldOf(id string, body []byte) (eventlog.Withholding, bool) {
	if _, w, ok := eventlog.WithheldOf(body); ok {
		return w, true
	}
	return s.state.Withheld(id)
}

// withheldError is the 451 answer for a withheld event.
func withheldError(id string, w eventlog.Withholding) error {
	return protocol.Errorf(CodeWithheld, "event %s is withheld by this relay's operator: %s (redaction %s)", id, w.Reason, w.Redaction)
}

// dropWithheld removes from bodies the tombstones and the events the
// state withholds (a list that keeps revoked events asked for them).
func (s *Server) dropWithheld(bodies [][]byte) [][]byte {
	out := bodies[:0]
	for _, b := range bodies {
		if id, _, ok := BodyIDs(b); ok {
			if _, withheld := s.withheldOf(id, b); withheld {
				continue
			}
		} else if _, _, ok := eventlog.WithheldOf(b); ok {
			continue
		}
		out = append(out, b)
	}
	return out
}

// exportWithheld returns the line GET /export gives in place of body when
// the event is withheld: its tombstone (eventlog.Tombstone), nil when the
// body is served.
func (s *Server) exportWithheld(body []byte) []byte {
	if _, _, ok := eventlog.WithheldOf(body); ok {
		return body
	}
	id, _, ok := BodyIDs(body)
	if !ok {
		return nil
	}
	w, ok := s.state.Withheld(id)
	if !ok {
		return nil
	}
	if e, err := protocol.DecodeJSON(body); err == nil {
		w.CreatedAt = e.CreatedAt
	}
	return eventlog.Tombstone(id, w)
}

// tombstoneID returns the id of a withheld event's tombstone.
func tombstoneID(body []byte) (string, bool) {
	id, _, ok := eventlog.WithheldOf(body)
	return id, ok
}

// dropWithheldItems removes from the reconciliation index the withheld
// events it lists (an index read from the log's ids lists their
// tombstones): a peer must not be told this relay has what it will not
// serve.
func dropWithheldItems(st *state.State, index *reconcile.Index) {
	for _, id := range st.WithheldIDs() {
		if w, _ := st.Withheld(id); w.CreatedAt != 0 {
			it := reconcile.Item{CreatedAt: w.CreatedAt}
			hex.Decode(it.ID[:], []byte(id))
			index.Remove(it)
		}
	}
}

// Redactors returns the relay keys whose kind 25 redactions count on a
// relay of cfg (state.Options.Redactors): its own key's, and
// cfg.HonorRedactions.
func Redactors(cfg Config) []string {
	out := slices.Clone(cfg.HonorRedactions)
	if cfg.RelayKey != nil {
		out = append(out, protocol.AgentIDOf(cfg.RelayKey))
	}
	return out
}
