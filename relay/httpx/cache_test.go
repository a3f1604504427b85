package httpx

import "testing"

func TestTTLHint(t *testing.T) {
	for in, want := range map[string]int{
		`{"ttl_sec":120}`: 120, `{"ttl_sec":0}`: 3600, `{"ttl_sec":-5}`: 3600, `{"ttl_sec":1.5}`: 3600,
		`{"ttl_sec":"120"}`: 3600, `{"ttl_sec":604800}`: 604800, `{"ttl_sec":604801}`: 3600,
		`{}`: 3600, `not json`: 3600, ``: 3600, `{"ttl_sec":1e3}`: 3600, `[1]`: 3600,
	} {
		if got := TTLHint(in, 3600); got != want {
			t.Errorf("TTLHint(%s) = %d, want %d", in, got, want)
		}
	}
}

func FuzzTTLHint(f *testing.F) {
	for _, s := range []string{`{"ttl_sec":120}`, `{"ttl_sec":-1}`, `{"ttl_sec":1e400}`, `{"ttl_sec":null}`, `[]`, ``} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got := TTLHint(s, 60); got != 60 && (got < MinTTL || got > MaxTTL) {
			t.Fatalf("TTLHint(%q) = %d out of bounds", s, got)
		}
	})
}

func TestETagMatches(t *testing.T) {
	if !ETagMatches(`"a", W/"b"`, `"b"`) || !ETagMatches(`*`, `"x"`) || ETagMatches(`"a"`, `"b"`) {
		t.Fatal("ETagMatches")
	}
}
