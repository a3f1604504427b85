package federation

import (
	"testing"

	"github.com/anp2net/relay/protocol"
)

// TestAllowedRelay: resolution contacts configured peers (any address) and
// nothing a profile names on its own; addresses are normalised.
func TestAllowedRelay(t *testing.T) {
	m := startRelay(t, Options{Peers: []string{"http://127.0.0.1:9000/"}}).fed
	for raw, want := range map[string]bool{
		"ws://127.0.0.1:9000/": true, "http://127.0.0.1:9000": true, "http://127.0.0.1:9000/?x=1": true,
		"http://127.0.0.1:9001": false, "file:///etc/passwd": false, "http://user@127.0.0.1:9000": false,
		"gopher://127.0.0.1:9000": false, "": false, "http://169.254.169.254/": false,
	} {
		if _, _, ok := m.AllowedRelay(raw); ok != want {
			t.Errorf("AllowedRelay(%q) = %v, want %v", raw, ok, want)
		}
	}
}

// FuzzHomeRelays: any profile content gives at most 8 non-empty entries.
func FuzzHomeRelays(f *testing.F) {
	for _, s := range []string{`{"home_relays":["wss://a/"]}`, `{"home_relays":"x"}`, `{"home_relays":[1,null,""]}`, `[]`, ``} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := HomeRelays(&protocol.Event{Content: s})
		if len(got) > 8 {
			t.Fatalf("%d home relays", len(got))
		}
		for _, h := range got {
			if h == "" {
				t.Fatal("an empty home relay")
			}
		}
	})
}
