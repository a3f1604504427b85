package tlog

import (
	"crypto/sha256"
	"path/filepath"
	"testing"

	"github.com/anp2net/relay/relay/internal/pipeload"
)

// BenchmarkTreeAppend is the tree's own cost per event, as the commit
// hook pays it: batches of 8 ids hashed and written to the tree file.
//
//	go test ./relay/tlog/ -run XXX -bench TreeAppend -count 5
func BenchmarkTreeAppend(b *testing.B) {
	t, err := openTree(filepath.Join(b.TempDir(), "bench.tlog"))
	if err != nil {
		b.Fatal(err)
	}
	defer t.Close()
	batch := make([][32]byte, 8)
	b.ResetTimer()
	cpu0 := pipeload.ProcessCPU()
	for i := 0; i < b.N; i += len(batch) {
		for k := range batch {
			batch[k] = sha256.Sum256([]byte{byte(i), byte(i >> 8), byte(i >> 16), byte(k)})
		}
		if err := t.append(batch); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64((pipeload.ProcessCPU()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
}
