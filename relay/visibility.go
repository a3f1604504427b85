package relay

import (
	"encoding/hex"
	"encoding/json"
	"slices"
	"strconv"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/eventlog"
	"github.com/anp2net/relay/relay/reconcile"
	"github.com/anp2net/relay/relay/state"
	"github.com/anp2net/relay/trust"
	"github.com/labstack/echo/v4"
)

// CodeHidden answers a direct read of a hidden event the reader may not see.
const CodeHidden = "hidden"

// TopReaderPercent is the trust rank (top 1%) whose readers get hidden-event
// metadata by default (§7.1).
const TopReaderPercent = 1

// viewer applies §7.1 per-reader visibility to one request.
type viewer struct {
	mod           *trust.ModSnapshot
	reader        string // "" when anonymous
	includeHidden bool
	top           bool // reader is in the top 1% by trust rank
	// rule is the modules' reader rule (AddReaderRule), nil when none
	// restricts anything.
	rule func(reader, author string) bool
}

// viewer decides what reader may see. It is built per request, and per
// event on the stream's fan-out, so it reads only the published moderation
// snapshot; listing handlers add the reader's rank (withRank).
func (s *Server) viewer(reader string, includeHidden bool) viewer {
	return viewer{mod: s.viewsState().Moderation.Current(s.now()), reader: reader, includeHidden: includeHidden, rule: s.readerRule()}
}

// withRank marks a top-1% reader, who gets hidden-event metadata (§7.1).
func (v viewer) withRank(s *Server) viewer {
	if v.reader != "" {
		v.top = s.viewsState().Trust.Current(s.now()).InTopPercent(v.reader, TopReaderPercent)
	}
	return v
}

// sees reports whether the reader may see event id by author: visible
// events always; hidden ones by their author, and by any authenticated
// reader who asks with include_hidden=true; never by anonymous readers.
func (v viewer) sees(id, author string) bool {
	if !v.allowed(author) {
		return false
	}
	if !v.mod.Hidden(id) || v.reader == author {
		return true
	}
	return v.reader != "" && v.includeHidden
}

// allowed reports whether the modules' reader rule lets the reader see
// author's events (§12.8 invite_only); include_hidden does not widen it.
func (v viewer) allowed(author string) bool {
	return v.rule == nil || v.reader == author || v.rule(v.reader, author)
}

// filterBodies drops the stored bodies the reader may not see. Where one is
// dropped it leaves a ["hidden", id] placeholder when placeholders is set
// (thread queries) or the reader is a top-1% reader, whose placeholders carry
// the moderation metadata as a third element. It returns the JSON items and
// the number of hidden events left out and let through.
func (v viewer) filterBodies(bodies [][]byte, placeholders bool) (items [][]byte, left, shown int) {
	items = bodies[:0:0]
	for _, b := range bodies {
		id, author, ok := BodyIDs(b)
		if ok && !v.allowed(author) {
			// §12.8: not counted as hidden; a placeholder keeps a thread whole.
			if placeholders {
				items = append(items, []byte(`["hidden","`+id+`"]`))
			}
			continue
		}
		if !ok || !v.mod.Hidden(id) {
			items = append(items, b)
			continue
		}
		if v.sees(id, author) {
			shown++
			items = append(items, b)
			continue
		}
		left++
		switch {
		case v.top:
			ev := v.mod.Event(id)
			meta, _ := json.Marshal(map[string]any{
				"hidden": true, "flag_count": ev.FlagCount, "flag_weight": ev.FlagWeight, "hidden_since": ev.HiddenSince,
			})
			items = append(items, []byte(`["hidden","`+id+`",`+string(meta)+`]`))
		case placeholders:
			items = append(items, []byte(`["hidden","`+id+`"]`))
		}
	}
	return items, left, shown
}

// setHiddenHeaders reports hidden events: X-ANP2-Hidden-Count (left out) to
// top-1% readers, X-ANP2-Hidden-Included (let through) to anyone who gets
// hidden events of others.
func (v viewer) setHiddenHeaders(c echo.Context, left, shown int) {
	if v.top {
		c.Response().Header().Set("X-ANP2-Hidden-Count", strconv.Itoa(left))
	}
	if shown > 0 {
		c.Response().Header().Set("X-ANP2-Hidden-Included", strconv.Itoa(shown))
	}
}

// BodyIDs reads the id and agent_id of a stored body, which
// protocol.AppendJSON writes first: {"id":"<64>","agent_id":"<64>",...
// without decoding it; ok is false for any other shape.
func BodyIDs(b []byte) (id, author string, ok bool) {
	const idAt, agentAt = len(`{"id":"`), len(`{"id":"`) + 64 + len(`","agent_id":"`)
	if len(b) < agentAt+64 || string(b[:idAt]) != `{"id":"` {
		return "", "", false
	}
	return string(b[idAt : idAt+64]), string(b[agentAt : agentAt+64]), true
}

// readerRule composes the registered rules at this moment; nil when none
// restricts anything.
func (s *Server) readerRule() func(reader, author string) bool {
	var active []func(reader, author string) bool
	for _, r := range s.readerRules {
		if p := r(); p != nil {
			active = append(active, p)
		}
	}
	switch len(active) {
	case 0:
		return nil
	case 1:
		return active[0]
	}
	return func(reader, author string) bool {
		for _, p := range active {
			if !p(reader, author) {
				return false
			}
		}
		return true
	}
}

// Sees reports whether reader ("" for anonymous) may see e now: it is not
// revoked, and §7.1 visibility lets this reader see it (default view, no
// include_hidden).
func (s *Server) Sees(reader string, e *protocol.Event) bool {
	return !s.state.Revoked(e.ID) && s.viewer(reader, false).sees(e.ID, e.AgentID)
}

// SeesHidden is Sees with include_hidden as the reader asked: a hidden
// event is seen by its author, and by an authenticated reader who asks
// for hidden events (§7.1); never by an anonymous one.
func (s *Server) SeesHidden(reader string, e *protocol.Event, includeHidden bool) bool {
	return !s.state.Revoked(e.ID) && s.viewer(reader, includeHidden).sees(e.ID, e.AgentID)
}

// TopReader reports whether reader is in the top TopReaderPercent by
// trust rank now: the high-trust readers who get hidden-event metadata by
// default (§7.1) and the appeal queue's notices (§7.3).
func (s *Server) TopReader(reader string) bool {
	return reader != "" && s.viewsState().Trust.Current(s.now()).InTopPercent(reader, TopReaderPercent)
}

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

// WithheldError is the 451 answer for a withheld event, on every path
// that meets one (reads, and a publish of it).
func WithheldError(id string, w eventlog.Withholding) error {
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
