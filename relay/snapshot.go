package relay

// snapshotBytes returns the on-disk bytes of each view's saved state, by
// view name (none while the relay keeps no saved state).
func (s *Server) snapshotBytes() map[string]int64 { return nil }
