package ws

import (
	"testing"
	"time"

	"github.com/anp2net/relay/relay/stream"
)

// TestRowBucket: a bucket starts full, refills at its size per minute
// and never holds more than its size.
func TestRowBucket(t *testing.T) {
	var b stream.RowBucket
	at := time.Unix(1_700_000_000, 0)
	b.Fill(at, 600)
	if b.Tokens != 600 {
		t.Fatalf("new bucket holds %v", b.Tokens)
	}
	b.Tokens = 0
	b.Fill(at.Add(10*time.Second), 600)
	if b.Tokens != 100 {
		t.Fatalf("after 10 s: %v rows, want 100", b.Tokens)
	}
	if w := b.Wait(400, 600); w != 30*time.Second {
		t.Fatalf("wait for 400 rows: %s", w)
	}
	b.Fill(at.Add(time.Hour), 600)
	if b.Tokens != 600 {
		t.Fatalf("after an hour: %v rows, want the size", b.Tokens)
	}
}
