package relay

import "github.com/anp2net/relay/a2a"

// mountA2A mounts the A2A adapter (package a2a) on the relay: the AgentCard
// and the JSON-RPC endpoint, each also under /api. Native tasks come from
// taskSource{s}.
func (s *Server) mountA2A() {
	s.a2a = a2a.New(a2a.Options{
		PublicBaseURL: s.cfg.PublicBaseURL,
		Tasks:         taskSource{s},
		Now:           s.cfg.Now,
		Logger:        s.cfg.Logger,
	})
	s.a2a.Mount(s.route)
}
