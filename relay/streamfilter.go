package relay

import "github.com/anp2net/relay/protocol"

// AddStreamFilter registers a module's extra GET /stream (and WebSocket
// REQ) parameter: make turns the parameter's value into an event
// predicate, or a 400. It must be called before the relay serves (from
// Mount).
func (s *Server) AddStreamFilter(name string, build func(value string) (func(*protocol.Event) bool, error)) {
	if s.streamFilters == nil {
		s.streamFilters = map[string]func(string) (func(*protocol.Event) bool, error){}
	}
	s.streamFilters[name] = build
}

// StreamFilter returns the predicate a registered extra stream parameter
// gives for value; ok is false when no module registered name.
func (s *Server) StreamFilter(name, value string) (keep func(*protocol.Event) bool, ok bool, err error) {
	build, ok := s.streamFilters[name]
	if !ok {
		return nil, false, nil
	}
	keep, err = build(value)
	return keep, true, err
}

// StreamFilterNames lists the registered extra stream parameters.
func (s *Server) StreamFilterNames() []string {
	out := make([]string, 0, len(s.streamFilters))
	for n := range s.streamFilters {
		out = append(out, n)
	}
	return out
}
