package branches

// Size returns the number of events f indexes and an estimate of the heap
// bytes of its id index and the events it keeps (for /metrics).
func (f *Fold) Size() (entries, bytes int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	entries = int64(f.ids.Len())
	bytes = f.ids.Bytes(32, 8)
	for id, e := range f.votes {
		bytes += int64(len(id)) + 16 + 120 + int64(len(e.ID)+len(e.Content)) + int64(len(e.Tags))*(24+32)
	}
	for id := range f.agents {
		bytes += int64(len(id)) + 32
	}
	for b, m := range f.tagged {
		bytes += int64(len(b)) + int64(len(m))*(64+16+8+16)
	}
	return entries, bytes
}
