package directory_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay"
	"github.com/anp2net/relay/relay/directory"
	"github.com/anp2net/relay/relay/liveness"
	"github.com/anp2net/relay/relay/relaytest"
	"github.com/anp2net/relay/tasks/taskstest"
)

func TestDirectoryAndHome(t *testing.T) {
	r := relaytest.Start(t, []relay.Module{directory.NewModule(), liveness.NewModule(liveness.Options{})})
	a := taskstest.Pool(6)
	alice, bob, mallory := a[0], a[1], a[2]
	at := int64(relaytest.VectorTime - 900)
	old := alice.Sign(protocol.KindProfile, at, map[string]any{"name": "Alice-old"})
	evs := []*protocol.Event{
		old,
		alice.Sign(protocol.KindProfile, at+1, map[string]any{"name": "Alice Translator"}),
		alice.Sign(protocol.KindCapability, at+2, map[string]any{"capabilities": []any{}}, []string{"cap", taskstest.Capability}),
		mallory.Sign(protocol.KindProfile, at+3, map[string]any{"name": 42}),
		bob.Sign(protocol.KindPost, at+4, "hi @alice", []string{"p", alice.ID}, []string{"t", "weather"}),
		bob.Sign(protocol.KindTrustVote, at+5, map[string]any{"score": 1}, []string{"p", alice.ID}),
		bob.Sign(protocol.KindDM, at+6, strings.Repeat("A", 64), []string{"p", alice.ID}, []string{"nonce", strings.Repeat("00", 24)}),
		alice.Sign(protocol.KindPost, at+7, "sunny", []string{"t", "weather"}),
		taskstest.Request(bob, at+8, at+3600, taskstest.Reward{Amount: 5}, false),
	}
	r.PostAll(t, evs, 1)
	get := func(path string, out any) {
		t.Helper()
		ans := r.Do(t, "GET", path, "", nil)
		if ans.Status != 200 {
			t.Fatalf("GET %s: %d %s", path, ans.Status, ans.Body)
		}
		if err := json.Unmarshal(ans.Body, out); err != nil {
			t.Fatal(err)
		}
	}
	var list struct {
		Agents []struct {
			AgentID string `json:"agent_id"`
			Name    string `json:"name"`
		}
	}
	get("/agents?name=translator", &list)
	if len(list.Agents) != 1 || list.Agents[0].AgentID != alice.ID || list.Agents[0].Name != "Alice Translator" {
		t.Fatalf("/agents?name=translator: %+v", list)
	}
	get("/agents?name=4", &list) // mallory's numeric name is skipped, never matched
	if len(list.Agents) != 0 {
		t.Fatalf("/agents?name=4: %+v", list)
	}
	var one struct {
		Registered   bool     `json:"registered"`
		Capabilities []string `json:"capabilities"`
		Trust        struct {
			VoterCount int `json:"voter_count"`
		} `json:"trust"`
	}
	relaytest.Eventually(t, "alice's trust", func() bool { get("/agents/"+alice.ID, &one); return one.Trust.VoterCount == 1 })
	if !one.Registered || len(one.Capabilities) != 1 {
		t.Fatalf("/agents/alice: %+v", one)
	}
	var caps struct {
		Capabilities []struct {
			Name  string `json:"name"`
			Count int    `json:"agent_count"`
		}
	}
	get("/capabilities", &caps)
	if len(caps.Capabilities) != 1 || caps.Capabilities[0].Name != taskstest.Capability {
		t.Fatalf("/capabilities: %+v", caps)
	}
	var rooms struct {
		Rooms []struct {
			Topic    string
			Messages int
		}
	}
	get("/rooms", &rooms)
	if len(rooms.Rooms) < 2 {
		t.Fatalf("/rooms: %+v", rooms)
	}
	// Revoking alice's old profile changes nothing visible; revoking her post
	// takes it out of the weather room.
	var weather int
	for _, rm := range rooms.Rooms {
		if rm.Topic == "weather" {
			weather = rm.Messages
		}
	}
	r.PostAll(t, []*protocol.Event{alice.Sign(protocol.KindRevoke, at+20, "", []string{"e", evs[7].ID})}, 1)
	get("/rooms", &rooms)
	for _, rm := range rooms.Rooms {
		if rm.Topic == "weather" && rm.Messages != weather-1 {
			t.Fatalf("weather room after revoke: %d, want %d", rm.Messages, weather-1)
		}
	}
	var home struct {
		Account struct {
			Registered bool `json:"registered"`
		} `json:"your_account"`
		Mentions []struct {
			Kind int64  `json:"kind"`
			From string `json:"from"`
		} `json:"unread_mentions"`
		Open []struct {
			TaskID    string `json:"task_id"`
			Bootstrap bool   `json:"bootstrap_for_you"`
			Matches   bool   `json:"matches_your_capabilities"`
		} `json:"open_tasks"`
		Votes []any             `json:"recent_trust_votes"`
		Links map[string]string `json:"quick_links"`
	}
	get("/api/home?agent_id="+alice.ID, &home)
	if !home.Account.Registered || len(home.Mentions) != 1 || len(home.Open) != 1 || !home.Open[0].Matches || home.Open[0].Bootstrap || len(home.Votes) != 1 {
		t.Fatalf("home: %+v", home)
	}
	for _, m := range home.Mentions {
		if m.Kind == protocol.KindDM || m.Kind == protocol.KindTrustVote {
			t.Fatalf("home leaks a kind %d mention", m.Kind)
		}
	}
	if _, ok := home.Links["my_profile"]; !ok {
		t.Fatal("registered agent lacks my_profile")
	}
	for k, u := range home.Links {
		if !strings.HasPrefix(u, "http") {
			t.Fatalf("quick link %s is not absolute: %s", k, u)
		}
	}
	home.Links = nil
	get("/home?agent_id="+bob.ID, &home)
	if home.Account.Registered {
		t.Fatal("bob never published a profile")
	}
	if _, ok := home.Links["my_profile"]; ok {
		t.Fatal("unregistered agent gets my_profile")
	}
}
