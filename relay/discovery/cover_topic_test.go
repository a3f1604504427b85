package discovery_test

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay"
	"github.com/anp2net/relay/relay/directory"
	"github.com/anp2net/relay/relay/federation"
	"github.com/anp2net/relay/relay/relaytest"
	"github.com/anp2net/relay/tasks/taskstest"
)

// TestTopicRelayResolution (seed §12.9.2) with real relays on loopback: a
// relay started with topics announces them in its kind 10 (GET /relays
// lists them); a resolver that holds that announcement asks the topic
// relay first when it resolves an agent whose kind 4 declares one of the
// topics, and gets the newer profile there even though the agent's home
// relays are unreachable; an agent with no such capability is not looked
// up on it. The topic relay is the resolver's configured peer only so the
// loopback test may reach it (an announced relay is dialled through the
// netguard dialer, which refuses loopback).
func TestTopicRelayResolution(t *testing.T) {
	const topic = "translate.fr-en"
	fedT, err := federation.NewModule(federation.Options{Topics: []string{topic, "ocr", topic}})
	if err != nil {
		t.Fatal(err)
	}
	topicRelay := relaytest.Start(t, []relay.Module{directory.NewModule(), struct{ relay.Module }{fedT}},
		func(c *relay.Config) { c.RelayKey = taskstest.NewAgent("relay-topic").Key })
	if err := fedT.Announce(t.Context()); err != nil {
		t.Fatal(err)
	}
	ans := topicRelay.Do(t, "GET", "/events?kinds=10", "", nil)
	var announces []*protocol.Event
	if json.Unmarshal(ans.Body, &announces) != nil || len(announces) != 1 {
		t.Fatalf("the topic relay's kind 10: %s", ans.Body)
	}
	var content struct {
		Topics []string `json:"topics"`
	}
	if json.Unmarshal([]byte(announces[0].Content), &content) != nil || !slices.Equal(content.Topics, []string{"ocr", topic}) {
		t.Fatalf("announced topics: %s", announces[0].Content)
	}

	r := resolvingRelay(t, "resolver", topicRelay.URL)
	now := int64(relaytest.VectorTime)
	specialist, generalist := taskstest.NewAgent("specialist"), taskstest.NewAgent("generalist")
	profile := func(a taskstest.Agent, at int64, name string) *protocol.Event {
		return a.Sign(protocol.KindProfile, at, map[string]any{"name": name, "ttl_sec": 60, "home_relays": []string{"https://home.invalid"}})
	}
	r.PostAll(t, []*protocol.Event{
		announces[0],
		profile(specialist, now-100, "old"),
		specialist.Sign(protocol.KindCapability, now-99, map[string]any{"capabilities": []any{}}, []string{"cap", topic}),
		profile(generalist, now-100, "old"),
		generalist.Sign(protocol.KindCapability, now-99, map[string]any{"capabilities": []any{}}, []string{"cap", "weather"}),
	}, 1)
	topicRelay.PostAll(t, []*protocol.Event{profile(specialist, now-50, "new"), profile(generalist, now-50, "new")}, 1)

	var relays struct {
		Relays []struct {
			URL    string   `json:"url"`
			Topics []string `json:"topics"`
		} `json:"relays"`
	}
	if a := r.Do(t, "GET", "/relays", "", nil); a.Status != 200 || json.Unmarshal(a.Body, &relays) != nil ||
		!slices.ContainsFunc(relays.Relays, func(x struct {
			URL    string   `json:"url"`
			Topics []string `json:"topics"`
		}) bool {
			return x.URL == topicRelay.URL && slices.Contains(x.Topics, topic)
		}) {
		t.Fatalf("GET /relays does not list the topic relay's topics: %s", a.Body)
	}

	r.Clock.Add(61 * time.Second) // both profiles' TTLs have run out
	topicRelay.Clock.Add(61 * time.Second)
	if _, name := agentName(t, r, "/agents/"+specialist.ID+"?resolve=true"); name != "new" {
		t.Fatalf("specialist resolved to %q; want the topic relay's newer profile", name)
	}
	if _, name := agentName(t, r, "/agents/"+generalist.ID+"?resolve=true"); name != "old" {
		t.Fatalf("generalist resolved to %q; no topic relay serves its capability", name)
	}
}

// TestTopicsChecked: a relay's topics are bounded and plain.
func TestTopicsChecked(t *testing.T) {
	many := make([]string, federation.MaxTopics+1)
	for i := range many {
		many[i] = string(rune('a' + i))
	}
	for _, bad := range [][]string{{""}, {"has space"}, {"a,b"}, {string(make([]byte, federation.MaxTopicLen+1))}, many} {
		if _, err := federation.NewModule(federation.Options{Topics: bad}); err == nil {
			t.Errorf("topics %q accepted", bad)
		}
	}
}
