package relay

// mountA2A mounts the A2A adapter (package a2a) on the relay: the AgentCard
// and the JSON-RPC endpoint, each also under /api. Native tasks come from
// taskSource{s}.
func (s *Server) mountA2A() {}
