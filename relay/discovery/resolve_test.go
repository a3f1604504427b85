package discovery_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay"
	"github.com/anp2net/relay/relay/directory"
	"github.com/anp2net/relay/relay/discovery"
	"github.com/anp2net/relay/relay/federation"
	"github.com/anp2net/relay/relay/relaytest"
	"github.com/anp2net/relay/tasks/taskstest"
)

// resolvingRelay runs a real relay with directory (resolving through its
// federation), discovery and federation mounted without its Run (no
// mirroring: only resolution may bring an agent here).
func resolvingRelay(t *testing.T, name string, peers ...string) *relaytest.Relay {
	t.Helper()
	fed, err := federation.NewModule(federation.Options{Peers: peers})
	if err != nil {
		t.Fatal(err)
	}
	dir := directory.NewModule().SetResolver(fed.ResolveProfile)
	return relaytest.Start(t, []relay.Module{dir, discovery.NewModule(), struct{ relay.Module }{fed}},
		func(c *relay.Config) { c.RelayKey = taskstest.NewAgent("relay-" + name).Key })
}

func agentName(t *testing.T, r *relaytest.Relay, path string) (relaytest.Answer, string) {
	t.Helper()
	ans := r.Do(t, "GET", path, "", nil)
	var row struct {
		Name string `json:"name"`
	}
	json.Unmarshal(ans.Body, &row)
	return ans, row.Name
}

// TestResolveAndCache (§12.9) with two real relays on loopback: home holds
// an agent's profiles; the resolver relay has home as its configured peer.
// An unknown agent is a cached 404 until ?resolve=true fetches its profile
// from home, verifies and stores it; within the profile's ttl_sec a
// resolve does not ask again, after it (or at once after the agent's
// kind 23) it fetches the newest from the home relays the profile names.
// A forged profile is never stored, a home relay that is neither a peer
// nor an announced relay is never contacted, and a new event ends a
// negative entry at once.
func TestResolveAndCache(t *testing.T) {
	home := resolvingRelay(t, "home")
	var forgedHits atomic.Int64
	agent, stranger, ghost := taskstest.NewAgent("roamer"), taskstest.NewAgent("stranger"), taskstest.NewAgent("ghost")
	now := int64(relaytest.VectorTime)
	forged := ghost.Sign(protocol.KindProfile, now-50, map[string]any{"name": "ghost"})
	forged.Content = `{"name":"not what ghost signed"}`
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		forgedHits.Add(1)
		w.Write([]byte("[" + string(protocol.AppendJSON(nil, forged)) + "]"))
	}))
	defer evil.Close()
	r := resolvingRelay(t, "resolver", evil.URL, home.URL)
	clocks := func(d time.Duration) { home.Clock.Add(d); r.Clock.Add(d) }

	home.PostAll(t, []*protocol.Event{agent.Sign(protocol.KindProfile, now-100, map[string]any{
		"name": "roamer-1", "ttl_sec": 120, "home_relays": []string{strings.Replace(home.URL, "http://", "ws://", 1) + "/"},
	})}, 1)
	path := "/agents/" + agent.ID
	if ans, _ := agentName(t, r, path); ans.Status != 404 || ans.Header.Get("Cache-Control") != "public, max-age=30" {
		t.Fatalf("unknown agent: %d %v", ans.Status, ans.Header)
	}
	ans, name := agentName(t, r, path+"?resolve=true")
	if ans.Status != 200 || name != "roamer-1" || ans.Header.Get("Cache-Control") != "public, max-age=120" {
		t.Fatalf("resolved: %d %v %s", ans.Status, ans.Header, ans.Body)
	}
	if r.Count(t) == 0 {
		t.Fatal("the resolved profile is not stored")
	}

	home.PostAll(t, []*protocol.Event{agent.Sign(protocol.KindProfile, now-90, map[string]any{
		"name": "roamer-2", "ttl_sec": 120, "home_relays": []string{home.URL},
	})}, 1)
	if _, name := agentName(t, r, path+"?resolve=true"); name != "roamer-1" {
		t.Fatalf("within the TTL a resolve asked again: %s", name)
	}
	clocks(121 * time.Second)
	if _, name := agentName(t, r, path+"?resolve=true"); name != "roamer-2" {
		t.Fatalf("after the TTL: %s", name)
	}
	// Kind 23 from the author ends the freshness at once.
	third := agent.Sign(protocol.KindProfile, now+30, map[string]any{"name": "roamer-3", "ttl_sec": 3600, "home_relays": []string{home.URL}})
	home.PostAll(t, []*protocol.Event{third}, 1)
	if _, name := agentName(t, r, path+"?resolve=true"); name != "roamer-2" {
		t.Fatalf("before the kind 23: %s", name)
	}
	r.PostAll(t, []*protocol.Event{agent.Sign(protocol.KindCacheInvalidate, now+40, map[string]any{"reason": "profile_updated"}, []string{"e", third.ID})}, 1)
	if _, name := agentName(t, r, path+"?resolve=true"); name != "roamer-3" {
		t.Fatalf("after the kind 23: %s", name)
	}

	// A forged profile from a peer: asked, never stored, a cached 404.
	gpath := "/agents/" + ghost.ID + "?resolve=true"
	before := forgedHits.Load() // the first resolution asked it too (peers in order)
	if ans, _ := agentName(t, r, gpath); ans.Status != 404 || forgedHits.Load() != before+1 {
		t.Fatalf("forged profile: %d %s (evil asked %d times)", ans.Status, ans.Body, forgedHits.Load())
	}
	if ans, _ := agentName(t, r, gpath); ans.Status != 404 || forgedHits.Load() != before+1 {
		t.Fatalf("a failed resolution is not cached: evil asked %d times", forgedHits.Load())
	}
	if _, err := r.Store.Get(t.Context(), forged.ID); err == nil {
		t.Fatal("the forged profile was stored")
	}

	// A home relay that is neither a peer nor announced is never asked.
	var lureHits atomic.Int64
	lure := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { lureHits.Add(1) }))
	defer lure.Close()
	r.PostAll(t, []*protocol.Event{stranger.Sign(protocol.KindProfile, now+50, map[string]any{"name": "s", "ttl_sec": 1, "home_relays": []string{lure.URL}})}, 1)
	clocks(2 * time.Second)
	if ans, name := agentName(t, r, "/agents/"+stranger.ID+"?resolve=true"); ans.Status != 200 || name != "s" || lureHits.Load() != 0 {
		t.Fatalf("stranger: %d %s, lure asked %d times", ans.Status, name, lureHits.Load())
	}

	// A new event ends a negative entry at once.
	late := taskstest.NewAgent("late")
	if ans, _ := agentName(t, r, "/agents/"+late.ID); ans.Status != 404 {
		t.Fatalf("late, unknown: %d", ans.Status)
	}
	r.PostAll(t, []*protocol.Event{late.Sign(protocol.KindPost, now+60, "hello")}, 1)
	if ans, _ := agentName(t, r, "/agents/"+late.ID); ans.Status != 200 {
		t.Fatalf("late, after a post: %d %s", ans.Status, ans.Body)
	}
	refuse(t, r, "/agents/"+late.ID+"?resolve=maybe", 400, "invalid_parameter")
}

// TestCapabilityTTL: /capabilities and /capabilities/search carry the
// smallest ttl_sec hint of the kind 4s they are built from, else 3600.
func TestCapabilityTTL(t *testing.T) {
	r := relaytest.Start(t, []relay.Module{directory.NewModule(), discovery.NewModule()})
	a := taskstest.Pool(2)
	now := int64(relaytest.VectorTime)
	r.PostAll(t, []*protocol.Event{a[0].Sign(protocol.KindCapability, now-10, map[string]any{}, []string{"cap", "x.y"})}, 1)
	for _, p := range []string{"/capabilities", "/capabilities/search?cap=x"} {
		if got := r.Do(t, "GET", p, "", nil); got.Header.Get("Cache-Control") != "public, max-age=3600" || got.Header.Get("ETag") == "" {
			t.Fatalf("%s: %v", p, got.Header)
		}
	}
	r.PostAll(t, []*protocol.Event{a[1].Sign(protocol.KindCapability, now-5, map[string]any{"ttl_sec": 600}, []string{"cap", "x.z"})}, 1)
	for _, p := range []string{"/capabilities", "/capabilities/search?cap=x"} {
		got := r.Do(t, "GET", p, "", nil)
		if got.Header.Get("Cache-Control") != "public, max-age=600" {
			t.Fatalf("%s: %v", p, got.Header)
		}
		if again := r.Do(t, "GET", p, "", nil, "If-None-Match", got.Header.Get("ETag")); again.Status != 304 {
			t.Fatalf("%s revalidated: %d", p, again.Status)
		}
	}
}

// TestResolveRateLimited: one address may cause ResolvesPerMinute
// resolutions a minute; the next is 429 rate_limited with Retry-After,
// and a failed resolution is remembered (asking again costs nothing).
func TestResolveRateLimited(t *testing.T) {
	r := resolvingRelay(t, "lonely") // no peers: every resolution fails at once
	pool := taskstest.Pool(directory.ResolvesPerMinute + 1)
	for _, a := range pool[:directory.ResolvesPerMinute] {
		if ans := r.Do(t, "GET", "/agents/"+a.ID+"?resolve=true", "", nil); ans.Status != 404 {
			t.Fatalf("resolve: %d %s", ans.Status, ans.Body)
		}
	}
	if ans := r.Do(t, "GET", "/agents/"+pool[0].ID+"?resolve=true", "", nil); ans.Status != 404 {
		t.Fatalf("a cached failure was charged: %d %s", ans.Status, ans.Body)
	}
	ans := r.Do(t, "GET", "/agents/"+pool[directory.ResolvesPerMinute].ID+"?resolve=true", "", nil)
	if ans.Status != 429 || ans.Code(t) != relay.CodeRateLimited || ans.Header.Get("Retry-After") == "" {
		t.Fatalf("past the limit: %d %v %s", ans.Status, ans.Header, ans.Body)
	}
}
