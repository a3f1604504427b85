package stream

// The hub's routing index: Publish offers a batch only to the
// subscribers whose filter may match one of its events, not to every
// subscriber (with a thousand subscribers on a topic each, matching
// them all was most of the fan-out's cost, paid in the commit hook,
// before the publishers are answered). A subscriber is filed under the
// keys of one condition its filter requires, the most selective it has:
// the values of its first tag condition, else its authors, else its
// ids; one with none of these is offered everything (scan). The keys
// only narrow the candidates: offer still applies the whole filter.

// routeKeys returns the keys f is filed under, nil for a scan
// subscriber.
func routeKeys(f *Filter) []string {
	var keys []string
	switch {
	case len(f.Tags) > 0:
		for _, v := range f.Tags[0].Values {
			keys = append(keys, string(appendTagKey(nil, f.Tags[0].Name, v)))
		}
	case len(f.Authors) > 0:
		for _, a := range f.Authors {
			keys = append(keys, "a\x00"+a)
		}
	case len(f.IDs) > 0:
		for _, id := range f.IDs {
			keys = append(keys, "i\x00"+id)
		}
	}
	return keys
}

func appendTagKey(b []byte, name, value string) []byte {
	b = append(b, 't', 0)
	b = append(b, name...)
	b = append(b, 0)
	return append(b, value...)
}

// file adds s to the index; the caller holds h.mu.
func (h *Hub) file(s *subscriber) {
	s.keys = routeKeys(s.filter)
	if s.keys == nil {
		h.scan[s] = struct{}{}
		return
	}
	for _, k := range s.keys {
		set := h.routes[k]
		if set == nil {
			set = map[*subscriber]struct{}{}
			h.routes[k] = set
		}
		set[s] = struct{}{}
	}
}

// unfile removes s from the index; the caller holds h.mu.
func (h *Hub) unfile(s *subscriber) {
	if s.keys == nil {
		delete(h.scan, s)
		return
	}
	for _, k := range s.keys {
		if set := h.routes[k]; set != nil {
			delete(set, s)
			if len(set) == 0 {
				delete(h.routes, k)
			}
		}
	}
}

// candidates returns the subscribers that may match one of entries,
// each once; the caller holds h.mu. The slice is reused by the next
// call.
func (h *Hub) candidates(entries []entry) []*subscriber {
	h.gen++
	out := h.cands[:0]
	add := func(set map[*subscriber]struct{}) {
		for s := range set {
			if s.mark != h.gen {
				s.mark = h.gen
				out = append(out, s)
			}
		}
	}
	add(h.scan)
	if len(h.routes) > 0 {
		for i := range entries {
			e := entries[i].ev
			for _, t := range e.Tags {
				if len(t) >= 2 {
					h.key = appendTagKey(h.key[:0], t[0], t[1])
					add(h.routes[string(h.key)])
				}
			}
			h.key = append(append(h.key[:0], 'a', 0), e.AgentID...)
			add(h.routes[string(h.key)])
			h.key = append(append(h.key[:0], 'i', 0), e.ID...)
			add(h.routes[string(h.key)])
		}
	}
	h.cands = out
	return out
}
