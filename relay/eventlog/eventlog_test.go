package eventlog

import (
	"bytes"
	"crypto/ed25519"
	"strings"
	"testing"

	"github.com/anp2net/relay/protocol"
)

// TestNewRecordOwning checks that NewRecordOwning builds the record
// NewRecord builds, for canonical and other encodings, events small and
// larger than its stack buffer, and that it keeps a canonical raw itself
// as the body without allocating (unless raw's buffer is much larger).
func TestNewRecordOwning(t *testing.T) {
	priv := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, 32))
	for _, content := range []string{"hello", "é \"quoted\" \u2028 <tag>", strings.Repeat("long ", 1000)} {
		e := &protocol.Event{CreatedAt: 1_700_000_000, Kind: 1, Content: content, Tags: [][]string{{"t", "x"}}}
		e.Sign(priv)
		canonical := bytes.Clone(protocol.AppendJSON(nil, e))
		spaced := append([]byte(" "), canonical...)
		// A canonical body in a buffer twice its size is copied, so the
		// body cache does not hold the rest of the buffer.
		slack := append(make([]byte, 0, 2*len(canonical)+1024), canonical...)
		for name, raw := range map[string][]byte{"canonical": canonical, "spaced": spaced, "slack": slack} {
			want := NewRecord(e, raw, "json", 42)
			got := NewRecordOwning(e, raw, "json", 42)
			if got.Event != e || !bytes.Equal(got.Body, want.Body) || !bytes.Equal(got.Raw, want.Raw) ||
				(got.Raw == nil) != (want.Raw == nil) || got.RawType != "json" || got.ReceivedAt != 42 {
				t.Fatalf("%s, %d bytes: got body %.60q raw %.60q, want body %.60q raw %.60q", name, len(content), got.Body, got.Raw, want.Body, want.Raw)
			}
			if shared := &got.Body[0] == &raw[0]; shared != (name == "canonical") {
				t.Errorf("%s, %d bytes: body shares raw's memory: %v", name, len(content), shared)
			}
		}
	}
	e := &protocol.Event{CreatedAt: 1_700_000_000, Kind: 1, Content: "hello", Tags: [][]string{}}
	e.Sign(priv)
	raw := bytes.Clone(protocol.AppendJSON(nil, e))
	if n := testing.AllocsPerRun(100, func() { NewRecordOwning(e, raw, "json", 42) }); n != 0 {
		t.Errorf("NewRecordOwning of a canonical raw allocates %v times", n)
	}
}
