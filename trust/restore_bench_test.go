package trust

import (
	"bytes"
	"testing"
)

// BenchmarkRestore decodes the saved forms of the trust graph (100k votes
// among 20k agents) and of moderation (1M posts and flags): the restore
// cost of each view at a relay's start, per event, and the saved bytes per
// event. Run the same benchmark at an older commit to compare saved forms.
func BenchmarkRestore(b *testing.B) {
	g := benchGraph()
	m := NewModeration(NewGraph(Options{}), ModerationOptions{})
	const n = 1_000_000
	for i := 0; i < n; i++ {
		m.Add(benchModEvent(i))
	}
	for _, c := range []struct {
		name   string
		events int
		save   func(*bytes.Buffer) error
		load   func([]byte) error
	}{
		{"graph", benchVotes, func(w *bytes.Buffer) error { return g.Snapshot(w) },
			func(d []byte) error { return NewGraph(Options{}).Restore(bytes.NewReader(d), nil) }},
		{"moderation", n, func(w *bytes.Buffer) error { return m.Snapshot(w) },
			func(d []byte) error {
				return NewModeration(NewGraph(Options{}), ModerationOptions{}).Restore(bytes.NewReader(d), nil)
			}},
	} {
		var buf bytes.Buffer
		if err := c.save(&buf); err != nil {
			b.Fatal(err)
		}
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if err := c.load(buf.Bytes()); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*c.events), "ns/event")
			b.ReportMetric(float64(buf.Len())/float64(c.events), "saved-B/event")
		})
	}
}
