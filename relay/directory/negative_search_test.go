package directory_test

import (
	"testing"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay"
	"github.com/anp2net/relay/relay/directory"
	"github.com/anp2net/relay/relay/relaytest"
	"github.com/anp2net/relay/tasks/taskstest"
)

// TestEmptyCapabilitySearchIsShortLived: "no publisher for this
// capability right now" is a negative answer (seed §12.9.4), cached at
// most NegativeTTL seconds, while a search that finds a provider keeps
// the profile TTL.
func TestEmptyCapabilitySearchIsShortLived(t *testing.T) {
	r := relaytest.Start(t, []relay.Module{directory.NewModule()})
	alice := taskstest.Pool(1)[0]
	at := int64(relaytest.VectorTime - 60)
	r.PostAll(t, []*protocol.Event{alice.Sign(protocol.KindCapability, at,
		map[string]any{"capabilities": []any{map[string]any{"name": "transform.text.demo"}}},
		[]string{"cap", "transform.text.demo"})}, 1)
	for q, want := range map[string]string{
		"cap=nobody.offers.this": "public, max-age=30",
		"cap=transform.text":     "public, max-age=3600",
	} {
		ans := r.Do(t, "GET", "/capabilities/search?"+q, "", nil)
		if ans.Status != 200 || ans.Header.Get("Cache-Control") != want {
			t.Errorf("%s: %d Cache-Control %q, want %q", q, ans.Status, ans.Header.Get("Cache-Control"), want)
		}
	}
}
