package discovery_test

import (
	"strings"
	"testing"
	"time"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/discovery"
	"github.com/anp2net/relay/relay/relaytest"
	"github.com/anp2net/relay/tasks/taskstest"
)

type copresenceAnswer struct {
	WindowSec  int64           `json:"window_sec"`
	Copresence []discovery.Met `json:"copresence"`
}

type neighborsAnswer struct {
	Schema    string               `json:"schema"`
	Method    string               `json:"method"`
	Neighbors []discovery.Neighbor `json:"neighbors"`
}

func TestCopresenceAndNeighbors(t *testing.T) {
	r, _ := start(t)
	a := taskstest.Pool(6)
	alice, bob, carol, dave, erin, frank := a[0], a[1], a[2], a[3], a[4], a[5]
	const day = 86400
	now := int64(relaytest.VectorTime + 12*day) // the events span 12 days; the relay takes 7 days back

	elsewhere := strings.Repeat("ef", 32)
	post := alice.Sign(protocol.KindPost, now-3*day, "coastal harbor temperature rising", []string{"t", "climate"})
	old := alice.Sign(protocol.KindPost, now-12*day, "tide tables", []string{"t", "tides"})
	r.PostAll(t, []*protocol.Event{old}, 1)
	r.Clock.Add(day * time.Second)
	r.PostAll(t, []*protocol.Event{frank.Sign(protocol.KindReply, now-11*day, "thanks", []string{"e", old.ID, "root"})}, 1)
	r.Clock.Add(11 * day * time.Second)
	evs := []*protocol.Event{
		post,
		dave.Sign(protocol.KindProfile, now-4*day, map[string]any{"name": "dave", "discoverability": "topic_only"}),
		bob.Sign(protocol.KindReply, now-2*day, "which harbor?", []string{"e", post.ID, "root"}),
		dave.Sign(protocol.KindReply, now-2*day, "coastal harbor temperature rising fast", []string{"e", post.ID, "root"}),
		carol.Sign(protocol.KindPost, now-day, "harbor temperature coastal sensors", []string{"t", "climate"}),
		alice.Sign(protocol.KindPost, now-day+3600, "coastal temperature again", []string{"t", "climate"}),
		alice.Sign(protocol.KindKnowledge, now-day, map[string]any{"claim": "harbor warming"}, []string{"e", elsewhere}),
		carol.Sign(protocol.KindKnowledge, now-day, map[string]any{"claim": "harbor warming too"}, []string{"e", elsewhere}),
		alice.Sign(protocol.KindCapability, now-5*day, map[string]any{}, []string{"cap", "weather.obs"}),
		erin.Sign(protocol.KindCapability, now-5*day, map[string]any{}, []string{"cap", "weather.obs"}),
		erin.Sign(protocol.KindPost, now-day, "bitcoin price in yen", []string{"t", "market"}),
		sealedDM(erin, alice.ID, now-day, []string{"t", "climate"}),
	}
	r.PostAll(t, evs, 1)

	var got copresenceAnswer
	get(t, r, "/copresence/"+alice.ID+"?window=7d", &got)
	want := []struct {
		agent string
		score float64
		ctxs  string
	}{
		{carol.ID, 0.5652, "citation:" + elsewhere + " topic:climate"},
		{bob.ID, 0.5, "thread:" + post.ID},
		{erin.ID, 0.2308, "capability:weather.obs"},
	}
	if got.WindowSec != 7*day || len(got.Copresence) != len(want) {
		t.Fatalf("copresence: %+v", got)
	}
	for i, w := range want {
		m := got.Copresence[i]
		var ctxs []string
		for _, c := range m.Contexts {
			ctxs = append(ctxs, c.Type+":"+c.Ref)
		}
		if m.AgentID != w.agent || m.Score != w.score || strings.Join(ctxs, " ") != w.ctxs {
			t.Fatalf("row %d: %+v, want %+v", i, m, w)
		}
	}
	get(t, r, "/copresence/"+alice.ID+"?window=30d", &got)
	if len(got.Copresence) != 4 || !strings.Contains(string(r.Do(t, "GET", "/copresence/"+alice.ID+"?window=30d", "", nil).Body), frank.ID) {
		t.Fatalf("30 days: %+v", got)
	}
	// dave is topic_only: absent from others' lists, and his own list is his alone.
	get(t, r, "/copresence/"+dave.ID, &got)
	if len(got.Copresence) != 0 {
		t.Fatalf("dave's list to an anonymous reader: %+v", got)
	}
	path := "/copresence/" + dave.ID
	get(t, r, path, &got, "Authorization", r.Auth(dave.Key, "GET", path, now))
	if len(got.Copresence) != 2 {
		t.Fatalf("dave's own list: %+v", got)
	}

	var nb neighborsAnswer
	get(t, r, "/neighbors/"+alice.ID+"?k=20", &nb)
	if nb.Schema != discovery.EmbeddingSchema || nb.Method != "embedding" || len(nb.Neighbors) < 2 {
		t.Fatalf("neighbors: %+v", nb)
	}
	if n := nb.Neighbors[0]; n.AgentID != carol.ID || n.Sim <= nb.Neighbors[1].Sim || len(n.SampleTopics) != 1 || n.SampleTopics[0] != "climate" {
		t.Fatalf("nearest: %+v", nb.Neighbors)
	}
	for _, n := range nb.Neighbors {
		if n.AgentID == dave.ID || n.AgentID == erin.ID {
			t.Fatalf("dave is topic_only and erin shares no word (her DM never counts): %+v", nb.Neighbors)
		}
	}
	get(t, r, "/neighbors/"+alice.ID+"?k=1&method=co-occurrence", &nb)
	if len(nb.Neighbors) != 1 || nb.Neighbors[0].AgentID != carol.ID || nb.Neighbors[0].Sim != 0.5652 {
		t.Fatalf("co-occurrence: %+v", nb)
	}

	refuse(t, r, "/copresence/"+alice.ID+"?window=91d", 400, "invalid_parameter")
	refuse(t, r, "/copresence/"+alice.ID+"?window=-1", 400, "invalid_parameter")
	refuse(t, r, "/copresence/"+alice.ID+"?window=7w", 400, "invalid_parameter")
	refuse(t, r, "/neighbors/"+alice.ID+"?k=0", 400, "invalid_parameter")
	refuse(t, r, "/neighbors/"+alice.ID+"?method=bert", 400, "invalid_parameter")
}

func FuzzParseWindow(f *testing.F) {
	for _, s := range []string{"7d", "24h", "30m", "90s", "3600", "", "d", "-1d", "+1d", "99999999999999999999d", "7776000"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if n, err := discovery.ParseWindow(s); err == nil && (n < 1 || n > 90*86400) {
			t.Fatalf("%q → %d", s, n)
		}
	})
}
