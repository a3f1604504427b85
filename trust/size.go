package trust

import "unsafe"

// mapEntryOverhead approximates a Go map's per-entry cost beyond its key
// and value (buckets, tophash, load factor).
const mapEntryOverhead = 16

// Size returns the number of votes g holds and an estimate of the heap
// bytes of its records, agent table and indexes (for /metrics).
func (g *Graph) Size() (entries, bytes int64) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	bytes = g.agents.size()
	bytes += int64(len(g.pairs)) * int64(unsafe.Sizeof(pairState{})+unsafe.Sizeof(pairKey{})+4+mapEntryOverhead)
	for i := range g.pairs {
		for _, r := range g.pairs[i].recs {
			entries++
			bytes += int64(unsafe.Sizeof(r)) + int64(len(r.id)+len(r.reason))
		}
	}
	for _, v := range g.inbound {
		bytes += int64(cap(v))*4 + 4 + 24 + mapEntryOverhead
	}
	return entries, bytes
}

// Size returns the number of live events m holds and an estimate of the
// heap bytes of its per-event keys, activity times and flags (for /metrics).
func (m *Moderation) Size() (entries, bytes int64) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	entries = int64(m.events.Len())
	bytes = m.agents.size() + m.events.Bytes(int(unsafe.Sizeof(idKey{})), 4)
	for _, a := range m.activity {
		bytes += 24 + int64(cap(a))*8
	}
	for t, fl := range m.targets {
		bytes += int64(len(t)) + 16 + 24 + mapEntryOverhead
		for _, f := range fl {
			bytes += int64(unsafe.Sizeof(f)) + int64(len(f.id)+len(f.category)+len(f.reason)+4*len(f.cosigners))
		}
	}
	return entries, bytes
}

func (a *agentTable) size() int64 {
	var n int64
	for _, s := range a.names {
		n += int64(len(s)) + 16 + 16 + 4 + mapEntryOverhead
	}
	return n
}
