package relay

// A ReaderRule is a module's rule on who may read whose events (seed §12.8
// discoverability). It returns nil when it restricts nothing right now —
// the common case, which then costs one call per request — else a
// predicate: may reader ("" for anonymous) see the events by author?
type ReaderRule func() func(reader, author string) bool

// AddReaderRule registers a module's ReaderRule. Every read path consults
// it where it applies §7.1 visibility (GET /events, /events/{id}, /raw,
// /history, an anonymous /export, /stream and the WebSocket through Sees).
// It must be called before the relay serves (from Mount).
func (s *Server) AddReaderRule(r ReaderRule) { s.readerRules = append(s.readerRules, r) }

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
