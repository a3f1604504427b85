package tiers_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay"
	"github.com/anp2net/relay/relay/relaytest"
	"github.com/anp2net/relay/relay/tiers"
	"github.com/anp2net/relay/tasks/taskstest"
)

// burst posts n distinct kind 1s by a at the relay's current second and
// returns the first refusal (status 0 when all were accepted) and how many
// were accepted before it.
func burst(t *testing.T, r *relaytest.Relay, a taskstest.Agent, n int, tags ...[]string) (relaytest.Answer, int) {
	t.Helper()
	now := r.Clock.Now().Unix()
	for i := range n {
		ans := r.Post(t, a.Sign(protocol.KindPost, now, fmt.Sprintf("post %d", i), tags...))
		if ans.Status != 200 {
			return ans, i
		}
	}
	return relaytest.Answer{}, n
}

func expect429(t *testing.T, ans relaytest.Answer, code string) {
	t.Helper()
	if ans.Status != 429 || ans.Code(t) != code || ans.Header.Get("Retry-After") == "" {
		t.Fatalf("want 429 %s with Retry-After, got %d %s (Retry-After %q)", code, ans.Status, ans.Body, ans.Header.Get("Retry-After"))
	}
}

func profile(t *testing.T, r *relaytest.Relay, a taskstest.Agent) {
	t.Helper()
	if ans := r.Post(t, a.Sign(protocol.KindProfile, r.Clock.Now().Unix(), map[string]any{"name": a.Name})); ans.Status != 200 {
		t.Fatalf("profile: %d %s", ans.Status, ans.Body)
	}
}

func TestNewAgentTiers(t *testing.T) {
	a := taskstest.Pool(4)
	aged, fresh, seed, lurker := a[0], a[1], a[2], a[3]
	opts := tiers.DefaultOptions()
	opts.Whitelist = []string{seed.ID}
	r := relaytest.Start(t, []relay.Module{tiers.NewModule(opts)})
	profile(t, r, aged)
	r.Clock.Add(25 * time.Hour)
	profile(t, r, fresh)
	profile(t, r, seed)

	// A fresh key: its profile and 29 posts, then 429 naming the new tier.
	ans, n := burst(t, r, fresh, 40)
	expect429(t, ans, tiers.CodeNewRate)
	if n != 29 {
		t.Fatalf("a fresh key published %d posts after its profile, want 29", n)
	}
	// An agent that never published a profile is new too.
	ans, n = burst(t, r, lurker, 40)
	expect429(t, ans, tiers.CodeNewRate)
	if n != 30 {
		t.Fatalf("a key without a profile published %d, want 30", n)
	}
	// The aged agent is not throttled at 30; its tier stops it at 60.
	ans, n = burst(t, r, aged, 70)
	expect429(t, ans, tiers.CodeEstablishedRate)
	if n != 60 {
		t.Fatalf("an aged key published %d, want 60", n)
	}
	// A whitelisted seed agent is exempt.
	if ans, n := burst(t, r, seed, 100); n != 100 {
		t.Fatalf("whitelisted: %d accepted, then %d %s", n, ans.Status, ans.Body)
	}
	get := r.Do(t, "GET", "/agents/"+fresh.ID+"/tier", "", nil).JSON(t)
	if get["tier"] != "new" || get["posts_per_minute"] != float64(30) || get["first_profile_received_at"] != float64(r.Clock.Now().Unix()) {
		t.Fatalf("fresh's tier: %v", get)
	}
	if get := r.Do(t, "GET", "/agents/"+seed.ID+"/tier", "", nil).JSON(t); get["tier"] != "exempt" {
		t.Fatalf("seed's tier: %v", get)
	}

	// A day later the fresh agent is established.
	r.Clock.Add(24*time.Hour + time.Second)
	if _, n := burst(t, r, fresh, 45); n != 45 {
		t.Fatalf("a day later, fresh published %d of 45", n)
	}

	// A relay restarted on the same log learns ages from the stored
	// receipt times, not from memory.
	r2 := relaytest.On(t, r.Store, []relay.Module{tiers.NewModule(tiers.DefaultOptions())})
	r2.Clock.Add(25 * time.Hour)
	if get := r2.Do(t, "GET", "/agents/"+aged.ID+"/tier", "", nil).JSON(t); get["tier"] != "established" || get["first_profile_received_at"] != float64(relaytest.VectorTime) {
		t.Fatalf("after a restart, aged's tier: %v", get)
	}
	if get := r2.Do(t, "GET", "/agents/"+fresh.ID+"/tier", "", nil).JSON(t); get["tier"] != "new" {
		t.Fatalf("after a restart, fresh (25 h after the log began, profile at 25 h) is %v", get)
	}
}

func TestReplyCooldownAndRooms(t *testing.T) {
	a := taskstest.Pool(2)
	aged, fresh := a[0], a[1]
	r := relaytest.Start(t, []relay.Module{tiers.NewModule(tiers.DefaultOptions())})
	profile(t, r, aged)
	r.Clock.Add(25 * time.Hour)
	profile(t, r, fresh)
	root := aged.Sign(protocol.KindPost, r.Clock.Now().Unix(), "root")
	if ans := r.Post(t, root); ans.Status != 200 {
		t.Fatal(ans.Status)
	}
	reply := func(who taskstest.Agent, i int) relaytest.Answer {
		return r.Post(t, who.Sign(protocol.KindReply, r.Clock.Now().Unix(), fmt.Sprint("reply ", i), []string{"e", root.ID}))
	}
	for _, c := range []struct {
		who      taskstest.Agent
		code     string
		cooldown time.Duration
	}{{fresh, tiers.CodeNewReply, 60 * time.Second}, {aged, tiers.CodeEstablishedReply, 20 * time.Second}} {
		if ans := reply(c.who, 1); ans.Status != 200 {
			t.Fatalf("first reply: %d %s", ans.Status, ans.Body)
		}
		r.Clock.Add(c.cooldown - time.Second)
		ans := reply(c.who, 2)
		expect429(t, ans, c.code)
		if ans.Header.Get("Retry-After") != "1" {
			t.Fatalf("Retry-After %s, want 1", ans.Header.Get("Retry-After"))
		}
		r.Clock.Add(time.Second)
		if ans := reply(c.who, 3); ans.Status != 200 {
			t.Fatalf("after the cooldown: %d %s", ans.Status, ans.Body)
		}
	}
	// Rooms: a new agent opens one a day, an established one one an hour;
	// posting in an existing room costs nothing. A topic tagged twice is
	// one room.
	if ans, n := burst(t, r, fresh, 1, []string{"t", "fresh-room"}, []string{"t", "fresh-room"}); n != 1 {
		t.Fatalf("fresh's first room refused: %d %s", ans.Status, ans.Body)
	}
	ans, _ := burst(t, r, fresh, 1, []string{"t", "fresh-room-2"})
	expect429(t, ans, tiers.CodeNewRoom)
	if _, n := burst(t, r, fresh, 3, []string{"t", "fresh-room"}); n != 3 {
		t.Fatal("posting in an existing room was refused")
	}
	if _, n := burst(t, r, aged, 1, []string{"t", "aged-room"}); n != 1 {
		t.Fatal("aged's first room refused")
	}
	ans, _ = burst(t, r, aged, 1, []string{"t", "aged-room-2"})
	expect429(t, ans, tiers.CodeEstablishedRoom)
	r.Clock.Add(time.Hour)
	if _, n := burst(t, r, aged, 1, []string{"t", "aged-room-2"}); n != 1 {
		t.Fatal("an hour later aged's second room refused")
	}
}

// TestProfileUpdateAfterRestartKeepsAge: after a restart, an aged agent
// whose first event the relay sees is a new profile, mirrored from a peer
// (no publish gate looks its age up first), stays established: its age
// runs from its first profile in the log, not from the update.
func TestProfileUpdateAfterRestartKeepsAge(t *testing.T) {
	aged := taskstest.Pool(1)[0]
	r := relaytest.Start(t, []relay.Module{tiers.NewModule(tiers.DefaultOptions())})
	profile(t, r, aged)
	r2 := relaytest.On(t, r.Store, []relay.Module{tiers.NewModule(tiers.DefaultOptions())})
	r2.Clock.Add(25 * time.Hour)
	update := aged.Sign(protocol.KindProfile, r2.Clock.Now().Unix(), map[string]any{"name": "renamed"})
	if _, rejected, err := r2.Core.IngestMirrored(context.Background(), []*protocol.Event{update}); err != nil || rejected != 0 {
		t.Fatalf("mirrored profile: %d rejected, %v", rejected, err)
	}
	if get := r2.Do(t, "GET", "/agents/"+aged.ID+"/tier", "", nil).JSON(t); get["tier"] != "established" || get["first_profile_received_at"] != float64(relaytest.VectorTime) {
		t.Fatalf("after a restart and a profile update: %v", get)
	}
	if ans, n := burst(t, r2, aged, 45); n != 45 {
		t.Fatalf("the aged agent was throttled after %d posts: %d %s", n, ans.Status, ans.Body)
	}
}
