package directory_test

import (
	"testing"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay"
	"github.com/anp2net/relay/relay/directory"
	"github.com/anp2net/relay/relay/relaytest"
	"github.com/anp2net/relay/tasks/taskstest"
)

// TestRegisteredSurvivesRevokedProfile: `registered` is false until the
// agent publishes a kind 0 and true thereafter (seed §5.4.2), even once
// that profile is revoked, and whichever of the profile and its
// revocation reached the relay first.
func TestRegisteredSurvivesRevokedProfile(t *testing.T) {
	r := relaytest.Start(t, []relay.Module{directory.NewModule()})
	ag := taskstest.Pool(3)
	alice, bob, carol := ag[0], ag[1], ag[2]
	at := int64(relaytest.VectorTime - 600)
	aliceProfile := alice.Sign(protocol.KindProfile, at, map[string]any{"name": "Alice"})
	carolProfile := carol.Sign(protocol.KindProfile, at, map[string]any{"name": "Carol"})
	r.PostAll(t, []*protocol.Event{
		aliceProfile,
		alice.Sign(protocol.KindRevoke, at+1, "", []string{"e", aliceProfile.ID}),
		bob.Sign(protocol.KindPost, at+2, "no profile", []string{"t", "lobby"}),
		// carol's revocation arrives before the profile it revokes.
		carol.Sign(protocol.KindRevoke, at+3, "", []string{"e", carolProfile.ID}),
	}, 1)
	if ans := r.Post(t, carolProfile); ans.Status != 200 {
		t.Fatalf("carol's profile after its revocation: %d %s", ans.Status, ans.Body)
	}
	registered := func(path string, dig func(map[string]any) any) bool {
		t.Helper()
		var body map[string]any
		getJSON(t, r, path, &body)
		v, ok := dig(body).(bool)
		if !ok {
			t.Fatalf("%s: no registered flag in %v", path, body)
		}
		return v
	}
	self := func(b map[string]any) any { return b["registered"] }
	home := func(b map[string]any) any { return b["your_account"].(map[string]any)["registered"] }
	for _, c := range []struct {
		who  taskstest.Agent
		name string
		want bool
	}{{alice, "alice", true}, {carol, "carol", true}, {bob, "bob", false}} {
		for path, dig := range map[string]func(map[string]any) any{
			"/agents/" + c.who.ID:            self,
			"/api/home?agent_id=" + c.who.ID: home,
			"/onboarding/" + c.who.ID:        self,
		} {
			if got := registered(path, dig); got != c.want {
				t.Errorf("%s %s: registered %v, want %v", c.name, path, got, c.want)
			}
		}
	}
	var home2 struct {
		Links map[string]string `json:"quick_links"`
	}
	getJSON(t, r, "/api/home?agent_id="+alice.ID, &home2)
	if home2.Links["my_profile"] == "" {
		t.Error("a registered agent whose profile is revoked lost my_profile")
	}
}
