package directory_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay"
	"github.com/anp2net/relay/relay/directory"
	"github.com/anp2net/relay/relay/relaytest"
	"github.com/anp2net/relay/tasks/taskstest"
)

// getJSON fetches path from r into out, requiring a 200 with CORS.
func getJSON(t *testing.T, r *relaytest.Relay, path string, out any) {
	t.Helper()
	ans := r.Do(t, "GET", path, "", nil, "Origin", "https://client.example")
	if ans.Status != 200 {
		t.Fatalf("GET %s: %d %s", path, ans.Status, ans.Body)
	}
	if ans.Header.Get("Access-Control-Allow-Origin") != "*" {
		t.Fatalf("GET %s: no CORS header", path)
	}
	if err := json.Unmarshal(ans.Body, out); err != nil {
		t.Fatalf("GET %s: %v in %s", path, err, ans.Body)
	}
}

// TestClientCompatibleRoutes serves the routes and fields the network's
// existing clients call (issue 12 items 7 and 8): /stats, /capabilities/
// search with every filter and sort, /welcome, /onboarding/{id}, and the
// extra field names of /rooms, /capabilities and /agents.
func TestClientCompatibleRoutes(t *testing.T) {
	r := relaytest.Start(t, []relay.Module{directory.NewModule()})
	ag := taskstest.Pool(5)
	alice, bob, carol, newbie := ag[0], ag[1], ag[2], ag[3]
	at := int64(relaytest.VectorTime - 900)
	caps := func(a taskstest.Agent, at int64, entries ...map[string]any) *protocol.Event {
		var tags [][]string
		for _, e := range entries {
			tags = append(tags, []string{"cap", e["name"].(string)})
		}
		return a.Sign(protocol.KindCapability, at, map[string]any{"capabilities": entries}, tags...)
	}
	evs := []*protocol.Event{
		alice.Sign(protocol.KindProfile, at, map[string]any{"name": "Alice"}),
		caps(alice, at+1, map[string]any{"name": "transform.text.demo", "price": "free", "latency_ms": 900.0, "languages": []any{"fr", "en"}},
			map[string]any{"name": "summarize.research.ml", "price": map[string]any{"amount": "0.20", "currency": "USD"}, "tags": []any{"ml"}}),
		caps(bob, at+2, map[string]any{"name": "transform.text.demo", "price": "0.05", "latency_ms": 200.0, "languages": []any{"de"}}),
		caps(carol, at+3, map[string]any{"name": "Transform Anything", "price": "cheap"}),
		bob.Sign(protocol.KindTrustVote, at+4, map[string]any{"score": 1}, []string{"p", alice.ID}),
		carol.Sign(protocol.KindTrustVote, at+4, map[string]any{"score": 1}, []string{"p", alice.ID}),
		bob.Sign(protocol.KindPost, at+5, "hello", []string{"t", "lobby"}),
		bob.Sign(protocol.KindDM, at+6, strings.Repeat("A", 64), []string{"p", alice.ID}, []string{"nonce", strings.Repeat("00", 24)}, []string{"t", "secret-room"}),
		taskstest.Request(carol, at+7, at+7200, taskstest.Reward{Amount: 5}, false),
	}
	r.PostAll(t, evs, 1)

	var stats struct {
		Events, Agents, Registered int
		ByKind                     map[string]int `json:"by_kind"`
		LastEventAt                int64          `json:"last_event_at"`
	}
	getJSON(t, r, "/stats", &stats)
	if stats.Events != len(evs) || stats.Agents != 3 || stats.ByKind["4"] != 3 || stats.ByKind["3"] != 1 || stats.LastEventAt != at+7 {
		t.Fatalf("/stats: %+v", stats)
	}

	var rooms struct {
		Rooms []struct {
			Room, Topic string
			LastAt      int64 `json:"last_at"`
			Messages    int
		}
	}
	getJSON(t, r, "/api/rooms", &rooms)
	for _, rm := range rooms.Rooms {
		if rm.Room != rm.Topic || rm.LastAt == 0 || rm.Room == "secret-room" {
			t.Fatalf("/rooms row %+v (a DM's topic must never show)", rm)
		}
	}

	var capList struct {
		Capabilities []struct {
			Capability   string
			Providers    int
			LastDeclared int64 `json:"last_declared"`
		}
	}
	getJSON(t, r, "/capabilities", &capList)
	if c := capList.Capabilities[0]; c.Capability != "transform.text.demo" || c.Providers != 2 || c.LastDeclared != at+2 {
		t.Fatalf("/capabilities: %+v", capList)
	}

	var agents struct {
		Agents []struct {
			AgentID       string         `json:"agent_id"`
			LatestProfile *string        `json:"latest_profile"`
			Profile       map[string]any `json:"profile"`
			EventCount    int            `json:"event_count"`
			FirstSeen     int64          `json:"first_seen"`
			LastSeen      int64          `json:"last_seen"`
		}
	}
	getJSON(t, r, "/agents", &agents)
	for _, a := range agents.Agents {
		var p map[string]any
		if a.AgentID == alice.ID && (a.LatestProfile == nil || json.Unmarshal([]byte(*a.LatestProfile), &p) != nil || p["name"] != "Alice" ||
			a.Profile["name"] != "Alice" || a.EventCount != 2 || a.FirstSeen == 0 || a.LastSeen < a.FirstSeen) {
			t.Fatalf("/agents row for alice: %+v", a)
		}
	}

	type result struct {
		Provider, Capability string
		PriceUSD             *float64 `json:"price_usd"`
		IsCanonical          bool     `json:"is_canonical"`
		DeclaredAt           int64    `json:"declared_at"`
		Trust                float64
	}
	search := func(q string) []result {
		t.Helper()
		var ans struct {
			Results []result
			Count   int
		}
		getJSON(t, r, "/capabilities/search?"+q, &ans)
		if ans.Count != len(ans.Results) {
			t.Fatalf("count %d for %d results", ans.Count, len(ans.Results))
		}
		return ans.Results
	}
	providers := func(rs []result) string {
		var out []string
		for _, x := range rs {
			out = append(out, map[string]string{alice.ID: "alice", bob.ID: "bob", carol.ID: "carol"}[x.Provider]+":"+x.Capability)
		}
		return strings.Join(out, ",")
	}
	relaytest.Eventually(t, "alice's trust", func() bool {
		rs := search("cap=transform.text")
		return len(rs) == 2 && rs[0].Provider == alice.ID && rs[0].Trust > 0
	})
	for q, want := range map[string]string{
		"cap=transform":                            "alice:transform.text.demo,bob:transform.text.demo",
		"q=summ":                                   "alice:summarize.research.ml",
		"q=transform.text&sort_by=price":           "alice:transform.text.demo,bob:transform.text.demo",
		"q=transform.text&sort_by=latency":         "bob:transform.text.demo,alice:transform.text.demo",
		"cap=transform.text&min_trust=0.01":        "alice:transform.text.demo",
		"max_price_usd=0.1":                        "alice:transform.text.demo,bob:transform.text.demo",
		"max_price_usd=0.3&sort_by=price":          "alice:transform.text.demo,bob:transform.text.demo,alice:summarize.research.ml",
		"supported_language=DE":                    "bob:transform.text.demo",
		"tag=ml":                                   "alice:summarize.research.ml",
		"q=Transform":                              "carol:Transform Anything",
		"cap=transform.text&sort_by=trust&limit=1": "alice:transform.text.demo",
	} {
		if got := providers(search(q)); got != want {
			t.Errorf("search %s: %s, want %s", q, got, want)
		}
	}
	if rs := search("q=Transform"); rs[0].IsCanonical || rs[0].PriceUSD != nil {
		t.Fatalf("a non-dotted name with an unreadable price: %+v", rs[0])
	}
	if rs := search("q=summ"); !rs[0].IsCanonical || rs[0].PriceUSD == nil || *rs[0].PriceUSD != 0.2 || rs[0].DeclaredAt != at+1 {
		t.Fatalf("summarize: %+v", rs[0])
	}
	for _, bad := range []string{"sort_by=fame", "min_trust=x", "limit=0", "bogus=1"} {
		if ans := r.Do(t, "GET", "/capabilities/search?"+bad, "", nil); ans.Status != 400 {
			t.Fatalf("search %s: %d, want 400", bad, ans.Status)
		}
	}

	var welcome struct {
		Steps []struct{ Key, How string }
		Rules struct {
			PowMinBits int `json:"pow_min_bits"`
		}
		You *struct {
			Registered bool
			NextStep   struct{ Key string } `json:"next_step"`
		}
		Claimable *struct {
			TaskID string `json:"task_id"`
		} `json:"claimable_task"`
	}
	getJSON(t, r, "/welcome", &welcome)
	if len(welcome.Steps) < 4 || welcome.You != nil || !strings.Contains(welcome.Steps[0].How, "keygen") {
		t.Fatalf("/welcome: %+v", welcome)
	}
	getJSON(t, r, "/welcome?key="+newbie.ID, &welcome)
	if welcome.You == nil || welcome.You.Registered || welcome.You.NextStep.Key != "key" || welcome.Claimable == nil || welcome.Claimable.TaskID != evs[8].ID {
		t.Fatalf("/welcome?key=newbie: %+v", welcome)
	}
	if ans := r.Do(t, "GET", "/welcome?key=nothex", "", nil); ans.Status != 400 {
		t.Fatalf("/welcome?key=nothex: %d", ans.Status)
	}
	var ob struct {
		Completed int
		NextStep  struct{ Key string } `json:"next_step"`
		Steps     []struct {
			Key  string
			Done bool
		}
	}
	getJSON(t, r, "/onboarding/"+alice.ID, &ob)
	// alice has a key, a profile and capabilities; no post, no task yet.
	if ob.Completed != 3 || ob.NextStep.Key != "post" {
		t.Fatalf("/onboarding/alice: %+v", ob)
	}
	getJSON(t, r, "/onboarding/"+bob.ID, &ob)
	if fmt.Sprint(ob.Steps) != "[{key true} {profile false} {capability true} {post true} {task false}]" {
		t.Fatalf("/onboarding/bob: %+v", ob.Steps)
	}
}
