package eventlog

import (
	"strings"
	"testing"

	"github.com/anp2net/relay/protocol"
)

func TestTombstoneRoundTrip(t *testing.T) {
	id := strings.Repeat("ab", 32)
	w := Withholding{Reason: "court order \"7\"\n<x>", Redaction: strings.Repeat("cd", 32), CreatedAt: 1700000000}
	b := Tombstone(id, w)
	gotID, got, ok := WithheldOf(b)
	if !ok || gotID != id || got != w {
		t.Fatalf("WithheldOf(%s) = %q %+v %v", b, gotID, got, ok)
	}
	if _, err := protocol.DecodeJSON(b); err == nil {
		t.Fatal("a tombstone decodes as an event")
	}
}

func TestWithheldOfOrdinaryBody(t *testing.T) {
	body := `{"id":"` + strings.Repeat("ab", 32) + `","agent_id":"` + strings.Repeat("cd", 32) + `","withheld":"x"}`
	for _, b := range []string{"", "{}", body, `{"id":"` + strings.Repeat("ab", 32) + `","withheld":1}`} {
		if _, _, ok := WithheldOf([]byte(b)); ok {
			t.Errorf("WithheldOf(%s) = true", b)
		}
	}
}

func FuzzWithheldOf(f *testing.F) {
	f.Add([]byte(Tombstone(strings.Repeat("ab", 32), Withholding{Reason: "r"})))
	f.Add([]byte(`{"id":"` + strings.Repeat("0", 64) + `","withheld":null}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		id, w, ok := WithheldOf(b)
		if !ok {
			return
		}
		id2, w2, ok2 := WithheldOf(Tombstone(id, w))
		if !ok2 || id2 != id || w2 != w {
			t.Fatalf("round trip of %q: %q %+v %v", b, id2, w2, ok2)
		}
	})
}
