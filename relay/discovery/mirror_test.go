package discovery_test

import (
	"context"
	"testing"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay"
	"github.com/anp2net/relay/relay/discovery"
	"github.com/anp2net/relay/relay/federation"
	"github.com/anp2net/relay/relay/relaytest"
	"github.com/anp2net/relay/tasks/taskstest"
)

// fedRelay runs a real relay with discovery and federation under its own
// relay key; federation's Run announces the relay (kind 10).
func fedRelay(t *testing.T, name string) (*relaytest.Relay, *federation.Module, taskstest.Agent) {
	t.Helper()
	fed, err := federation.NewModule(federation.Options{})
	if err != nil {
		t.Fatal(err)
	}
	key := taskstest.NewAgent("relay-" + name)
	r := relaytest.Start(t, []relay.Module{discovery.NewModule(), fed}, func(c *relay.Config) { c.RelayKey = key.Key })
	relaytest.Eventually(t, name+" announced", func() bool {
		return r.Do(t, "GET", "/events?kinds=10&authors="+key.ID, "", nil).Status == 200 &&
			len(r.Do(t, "GET", "/events?kinds=10&authors="+key.ID, "", nil).Body) > 2
	})
	return r, fed, key
}

// TestInviteOnlyMirrors: a relay mirroring another gets an invite_only
// agent's events (relays read them, §18.6), in the first round (the
// authenticated export) and in a later one (fetches by id), and applies
// the rule to its own readers.
func TestInviteOnlyMirrors(t *testing.T) {
	a, _, _ := fedRelay(t, "a")
	b, fedB, _ := fedRelay(t, "b")
	hermit, friend := taskstest.NewAgent("hermit"), taskstest.NewAgent("friend")
	now := int64(relaytest.VectorTime)
	secret := hermit.Sign(protocol.KindPost, now-80, "quiet note")
	a.PostAll(t, []*protocol.Event{
		hermit.Sign(protocol.KindProfile, now-90, map[string]any{"name": "hermit", "discoverability": "invite_only"}),
		hermit.Sign(protocol.KindSubscribe, now-89, "", []string{"p", friend.ID}),
		secret,
	}, 1)
	ctx := context.Background()
	if _, err := fedB.MirrorOnce(ctx, a.URL, nil); err != nil {
		t.Fatal(err)
	}
	later := hermit.Sign(protocol.KindPost, now-10, "another quiet note")
	a.PostAll(t, []*protocol.Event{later}, 1)
	if _, err := fedB.MirrorOnce(ctx, a.URL, nil); err != nil {
		t.Fatal(err)
	}
	for _, e := range []*protocol.Event{secret, later} {
		if _, err := b.Store.Get(ctx, e.ID); err != nil {
			t.Fatalf("b lacks %s: %v", e.Content, err)
		}
		path := "/events/" + e.ID
		if got := b.Do(t, "GET", path, "", nil); got.Status != 403 {
			t.Fatalf("b served %s anonymously: %d", e.Content, got.Status)
		}
		if got := b.Do(t, "GET", path, "", nil, "Authorization", b.Auth(friend.Key, "GET", path, now)); got.Status != 200 {
			t.Fatalf("b refused %s to the friend: %d %s", e.Content, got.Status, got.Body)
		}
	}
}
