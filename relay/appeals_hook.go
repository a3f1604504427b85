package relay

import "github.com/anp2net/relay/protocol"

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
