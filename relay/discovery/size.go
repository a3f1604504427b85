package discovery

import (
	"os"
	"unsafe"
)

// Size returns the number of post records and feed stubs f holds in
// memory and an estimate of their heap bytes, the in-memory parts that
// grow with the events (for /metrics). The citations and contexts are on
// disk (DiskSize); the other indexes grow with agents and topics and are
// left out of the estimate.
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
	for _, l := range f.recent.byAuthor {
		entries += int64(l.n)
		bytes += int64(l.n) * int64(unsafe.Sizeof(stub{})+unsafe.Sizeof(stubRef{})+16)
	}
	for _, l := range f.recent.byTopic {
		bytes += int64(l.n) * int64(unsafe.Sizeof(stubRef{}))
	}
	return entries, bytes
}

// DiskSize returns the bytes of the store's files (0 in memory): the
// citations and contexts on disk, with the write-ahead log.
func (f *Fold) DiskSize() int64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.st.path == "" {
		return 0
	}
	var n int64
	for _, p := range []string{f.st.path, f.st.path + "-wal"} {
		if fi, err := os.Stat(p); err == nil {
			n += fi.Size()
		}
	}
	return n
}
