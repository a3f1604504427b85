package state

// CaptureThen is Capture with between run after the composition's lock is
// released and before the copies are encoded.
func (s *State) CaptureThen(between func()) (*Capture, error) { return s.captureThen(between) }
