package stream

// Readers returns the distinct agents whose streams are open and
// authenticated now (for notices addressed by who reads, such as the
// appeal queue's to high-trust readers; each is then sent with Notify).
func (h *Hub) Readers() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	seen := map[string]bool{}
	var out []string
	for s := range h.subs {
		if s.reader != "" && !seen[s.reader] {
			seen[s.reader] = true
			out = append(out, s.reader)
		}
	}
	return out
}
