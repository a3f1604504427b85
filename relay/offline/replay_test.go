package offline

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/state"
	"github.com/anp2net/relay/relay/state/statetest"
)

// TestReplayFileMatchesLiveFold replays a file holding a random stream —
// revokes after their targets, export-wrapped lines, a duplicate, a forged
// event and garbage — and requires the live fold's digest.
func TestReplayFileMatchesLiveFold(t *testing.T) {
	evs := statetest.Corpus(5, 16, 20, corpusBase, 1200)
	want := state.New(state.Options{})
	for _, e := range evs {
		want.Preload(e)
	}
	for i, e := range evs {
		want.Add(int64(i+1), e, nil)
	}
	var buf bytes.Buffer
	for i, e := range evs {
		if i%3 == 0 {
			buf.WriteString(`{"seq":1,"event":`)
			buf.Write(protocol.AppendJSON(nil, e))
			buf.WriteString("}\n")
			continue
		}
		buf.Write(protocol.AppendJSON(nil, e))
		buf.WriteString("\n")
	}
	buf.Write(protocol.AppendJSON(nil, evs[0]))
	forged := *evs[1]
	forged.Content += "!"
	buf.WriteString("\n\nnot json\n")
	buf.Write(protocol.AppendJSON(nil, &forged))
	buf.WriteString("\n")
	path := filepath.Join(t.TempDir(), "log.jsonl")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	checker := protocol.DefaultChecker()
	checker.PoW.Kinds = nil
	rp := &Replayer{Checker: checker, Now: vectorTime}
	got, stats, err := rp.Replay(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	if stats.Valid != len(evs) || stats.Duplicate != 1 || stats.Rejected["id_mismatch"] != 1 || stats.Rejected["malformed_envelope"] != 1 {
		t.Fatalf("stats: %+v", stats)
	}
	g, w := got.Digest(vectorTime), want.Digest(vectorTime)
	if g.Digest != w.Digest || g.Revoked == 0 {
		t.Fatalf("replay differs from the live fold in %q: %+v vs %+v", state.FirstDifference(g, w), g, w)
	}
}

// vectorTime is near the conformance vectors' created_at (the test clock);
// corpusBase is where the random corpora begin.
const (
	vectorTime = 1763800000
	corpusBase = vectorTime - 3600
)
