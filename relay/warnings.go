package relay

import "github.com/anp2net/relay/protocol"

// OnPublishWarn registers a module's warnings for an accepted publish: the
// departures from the seed's shape it accepts (D17), listed in the answer's
// "warnings" (POST /events, each result of POST /events/batch, and dry
// runs). It must be called before the relay serves (from Mount).
func (s *Server) OnPublishWarn(w func(e *protocol.Event, now int64) []protocol.Warning) {
	s.warners = append(s.warners, w)
}

// warnings returns every warning of an accepted publish of e: its kind
// rule's (protocol.KindWarnings), then logWarns (the rules that read the
// log), then the modules'. nil when there is none.
func (s *Server) warnings(e *protocol.Event, now int64, logWarns []protocol.Warning) []protocol.Warning {
	out := protocol.KindWarnings(e)
	out = append(out, logWarns...)
	for _, w := range s.warners {
		out = append(out, w(e, now)...)
	}
	if len(out) == 0 {
		return nil
	}
	return out
}
