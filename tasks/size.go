package tasks

import "unsafe"

// Size returns the number of lifecycle records f holds and an estimate of
// their heap bytes, parsed contents excluded (for /metrics).
func (f *Fold) Size() (entries, bytes int64) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	for _, t := range f.tasks {
		bytes += int64(unsafe.Sizeof(task{})) + 32 + 8 + 16
		if t.req != nil {
			entries++
		}
		for _, l := range t.lists {
			entries += int64(len(l))
			bytes += int64(cap(l)) * 8
		}
	}
	bytes += entries * int64(unsafe.Sizeof(rec{}))
	bytes += int64(cap(f.order)+cap(f.credit))*8 + int64(cap(f.creditLog))*int64(unsafe.Sizeof(logEntry{}))
	for _, n := range f.names {
		bytes += int64(len(n)) + 16 + 16 + 4 + 16
	}
	return entries, bytes
}
