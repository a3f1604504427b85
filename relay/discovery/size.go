package discovery

import "unsafe"

// Size returns the number of posts and citations f holds and an estimate
// of the heap bytes of its post records, citation edges and held saved
// forms, the parts that grow with the number of events (for /metrics);
// the other indexes
// grow with agents, topics and threads and are left out of the estimate.
func (f *Fold) Size() (entries, bytes int64) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	for _, a := range f.emb.agents {
		for _, p := range a.posts {
			entries++
			bytes += int64(unsafe.Sizeof(p)) + int64(len(p.id)) + int64(cap(p.feats))*int64(unsafe.Sizeof(feature{})) + int64(cap(p.topics))*16
		}
		bytes += int64(len(a.counts.slots)) * int64(unsafe.Sizeof(u32slot{}))
	}
	for id, edges := range f.cites.outgoing {
		bytes += int64(len(id)) + 24 + 16
		for _, c := range edges {
			entries++
			bytes += 2*int64(unsafe.Sizeof(*c)) + int64(len(c.Citing)+len(c.Target)+len(c.AgentID)) + 64
		}
	}
	for id, h := range f.held {
		bytes += int64(len(id)) + int64(cap(h.rest)) + 80 // map entry: key, times, author, slice
	}
	return entries, bytes
}
