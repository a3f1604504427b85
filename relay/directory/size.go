package directory

// Size returns the number of events d counts (one time each per agent and
// per topic) and an estimate of their heap bytes (for /metrics).
func (d *Directory) Size() (entries, bytes int64) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	for id, a := range d.agents {
		entries += int64(len(a.times))
		bytes += int64(len(id)) + 16 + 72 + int64(cap(a.times))*8 + int64(cap(a.profiles)+cap(a.caps))*8
	}
	for t, r := range d.rooms {
		bytes += int64(len(t)) + 16 + 24 + int64(cap(r.times))*8
	}
	return entries, bytes
}
