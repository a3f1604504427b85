package state

// Sizer is a Fold (or built-in view) that reports how much it holds, for
// /metrics: its entries (records it keeps) and an estimate of their heap
// bytes.
type Sizer interface {
	Size() (entries, bytes int64)
}

// DiskSizer is a Fold that keeps part of its state in files of its own
// (beside its saved snapshot): DiskSize is their bytes, for /metrics.
type DiskSizer interface {
	DiskSize() int64
}

// FoldSize is one view's figures in memory; Sized is false for a fold that
// does not report them (not a Sizer). Disk is the bytes of the fold's own
// files (a DiskSizer), its snapshot not included.
type FoldSize struct {
	Name           string
	Entries, Bytes int64
	Sized          bool
	Disk           int64
}

// Sizes returns the figures of every view: the built-in ones (trust,
// moderation, tasks), the composition's own bookkeeping ("state": its
// revocation records), then the modules' folds in registration order.
// Each view is read under its own lock; an Add in progress is not waited
// for.
func (s *State) Sizes() []FoldSize {
	out := []FoldSize{
		sizeOf("trust", s.Trust), sizeOf("moderation", s.Moderation), sizeOf("tasks", s.Tasks),
	}
	s.revMu.RLock()
	n := int64(len(s.revoked))
	s.revMu.RUnlock()
	out = append(out, FoldSize{Name: "state", Entries: n, Bytes: n * (64 + 16 + 16), Sized: true})
	for _, f := range s.folds {
		out = append(out, sizeOf(f.Name, f.Fold))
	}
	return out
}

func sizeOf(name string, v any) FoldSize {
	out := FoldSize{Name: name}
	if z, ok := v.(Sizer); ok {
		out.Entries, out.Bytes = z.Size()
		out.Sized = true
	}
	if d, ok := v.(DiskSizer); ok {
		out.Disk = d.DiskSize()
	}
	return out
}
