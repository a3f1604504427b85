package discovery_test

import (
	"slices"
	"testing"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/discovery"
	"github.com/anp2net/relay/relay/relaytest"
	"github.com/anp2net/relay/tasks/taskstest"
)

type citationsAnswer struct {
	Incoming      []discovery.Citation `json:"incoming"`
	IncomingCount int                  `json:"incoming_count"`
	CitingAgents  int                  `json:"citing_agents"`
	Outgoing      []discovery.Citation `json:"outgoing"`
	Count         int                  `json:"count"`
}

func TestCitations(t *testing.T) {
	r, _ := start(t)
	a := taskstest.Pool(6)
	alice, bob, carol, dave, erin, frank := a[0], a[1], a[2], a[3], a[4], a[5]
	now := int64(relaytest.VectorTime)
	post := alice.Sign(protocol.KindPost, now-100, "harbor temperature 1.2C above average", []string{"t", "climate"})
	claim := bob.Sign(protocol.KindKnowledge, now-90, map[string]any{"claim": "warmer harbor", "derived_from": []string{post.ID}},
		[]string{"e", post.ID, "derived"})
	reply := carol.Sign(protocol.KindReply, now-80, "source?", []string{"e", post.ID, "root"})
	dm := sealedDM(dave, alice.ID, now-70, []string{"e", post.ID})
	flag := dave.Sign(protocol.KindFlag, now-60, map[string]any{"category": "spam"}, []string{"e", post.ID})
	hermit := erin.Sign(protocol.KindProfile, now-200, map[string]any{"name": "erin", "discoverability": "invite_only"})
	erinFollowsFrank := erin.Sign(protocol.KindSubscribe, now-199, "", []string{"p", frank.ID})
	secret := erin.Sign(protocol.KindPost, now-50, "quiet note", []string{"e", post.ID})
	r.PostAll(t, []*protocol.Event{post, claim, reply, dm, flag, hermit, erinFollowsFrank, secret}, 1)

	var got citationsAnswer
	get(t, r, "/citations/"+post.ID+"?direction=incoming", &got)
	if got.IncomingCount != 2 || got.CitingAgents != 2 || got.Count != 2 || got.Incoming[0].Citing != reply.ID || got.Incoming[1].Citing != claim.ID {
		t.Fatalf("incoming: %+v", got)
	}
	if rel := got.Incoming[1].Relations; len(rel) != 2 || rel[0] != "derived" || rel[1] != "derived_from" || got.Incoming[0].Relations[0] != "root" {
		t.Fatalf("relations: %+v", got.Incoming)
	}
	if got.Outgoing != nil {
		t.Fatalf("direction=incoming answered outgoing: %+v", got.Outgoing)
	}
	// erin is invite_only: her citation shows only to herself and to agents she follows.
	path := "/citations/" + post.ID + "?direction=incoming"
	ans := get(t, r, path, &got, "Authorization", r.Auth(frank.Key, "GET", path, now))
	if got.IncomingCount != 3 || got.Incoming[0].Citing != secret.ID {
		t.Fatalf("frank, followed by erin: %+v", got)
	}
	// What only frank may see must not be kept by a shared cache for
	// another reader (httpx.Cached).
	if cc, vary := ans.Header.Get("Cache-Control"), ans.Header.Values("Vary"); cc != "private, max-age=60" || !slices.Contains(vary, "Authorization") {
		t.Fatalf("frank's answer: Cache-Control %q, Vary %q", cc, vary)
	}
	get(t, r, path, &got, "Authorization", r.Auth(bob.Key, "GET", path, now))
	if got.IncomingCount != 2 {
		t.Fatalf("bob, not followed by erin: %+v", got)
	}

	get(t, r, "/citations/"+claim.ID+"?direction=outgoing", &got)
	if len(got.Outgoing) != 1 || got.Outgoing[0].Target != post.ID || got.Incoming != nil {
		t.Fatalf("outgoing: %+v", got)
	}
	get(t, r, "/citations/"+claim.ID, &got) // both directions by default
	if len(got.Outgoing) != 1 || got.IncomingCount != 0 || got.Incoming == nil {
		t.Fatalf("both: %+v", got)
	}
	get(t, r, "/citations/"+dm.ID+"?direction=outgoing", &got)
	if len(got.Outgoing) != 0 {
		t.Fatalf("a DM's references are private: %+v", got)
	}

	// Revoking the claim withdraws its edges.
	r.PostAll(t, []*protocol.Event{bob.Sign(protocol.KindRevoke, now, "", []string{"e", claim.ID})}, 1)
	get(t, r, "/citations/"+post.ID+"?direction=incoming", &got)
	if got.IncomingCount != 1 || got.Incoming[0].Citing != reply.ID {
		t.Fatalf("after revocation: %+v", got)
	}
	refuse(t, r, "/citations/"+post.ID+"?direction=sideways", 400, "invalid_parameter")
	refuse(t, r, "/citations/nothex", 400, "invalid_parameter")
	refuse(t, r, "/citations/"+post.ID+"?limit=1001", 400, "invalid_parameter")
}
