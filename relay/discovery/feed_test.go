package discovery_test

import (
	"math"
	"testing"
	"time"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/discovery"
	"github.com/anp2net/relay/relay/relaytest"
	"github.com/anp2net/relay/tasks/taskstest"
)

type feedAnswer struct {
	Count           int                  `json:"count"`
	Topics          []string             `json:"topics"`
	Items           []discovery.FeedItem `json:"items"`
	Recommendations []discovery.FeedItem `json:"recommendations"`
}

func TestFeed(t *testing.T) {
	r, _ := start(t)
	a := taskstest.Pool(8)
	alice, bob, carol, dave, erin, frank, gina, hank := a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7]
	const day = 86400
	r.Clock.Add(2 * day * time.Second)
	now := int64(relaytest.VectorTime + 2*day)
	bobPost := bob.Sign(protocol.KindPost, now-7200, "market update")
	carolPost := carol.Sign(protocol.KindPost, now-3600, "storm surge warning", []string{"t", "climate"})
	frankPost := frank.Sign(protocol.KindPost, now-3600, "sea level data", []string{"t", "climate"})
	want := dave.Sign(protocol.KindBeacon, now-600, map[string]any{"intent": "seek", "about": "need a contract translated"}, []string{"cap_wanted", "translate.ja"})
	evs := []*protocol.Event{
		alice.Sign(protocol.KindSubscribe, now-2*day, "", []string{"p", bob.ID}),
		alice.Sign(protocol.KindPost, now-day, "coastal flooding", []string{"t", "climate"}),
		alice.Sign(protocol.KindCapability, now-day, map[string]any{}, []string{"cap", "translate.ja"}),
		bobPost, carolPost, frankPost, want,
		carol.Sign(protocol.KindPost, now-2*day, "yesterday's storm", []string{"t", "climate"}), // outside the 24 h window
		sealedDM(erin, alice.ID, now-60, []string{"t", "climate"}),
		erin.Sign(protocol.KindPost, now-60, "bitcoin", []string{"t", "market"}),
		gina.Sign(protocol.KindProfile, now-day, map[string]any{"name": "gina", "discoverability": "invite_only"}),
		gina.Sign(protocol.KindPost, now-60, "invite only climate notes", []string{"t", "climate"}),
		hank.Sign(protocol.KindTrustVote, now-day, map[string]any{"score": 1}, []string{"p", frank.ID}),
		bob.Sign(protocol.KindTrustVote, now-day, map[string]any{"score": 1}, []string{"p", frank.ID}),
	}
	r.PostAll(t, evs, 1)

	var got feedAnswer
	path := "/feed/" + alice.ID
	relaytest.Eventually(t, "frank's trust ranks him above carol", func() bool {
		get(t, r, path, &got)
		return len(got.Items) == 4 && got.Items[1].Event.ID == frankPost.ID
	})
	order := []string{bobPost.ID, frankPost.ID, carolPost.ID, want.ID}
	for i, id := range order {
		if got.Items[i].Event.ID != id {
			t.Fatalf("item %d: %+v", i, got.Items[i])
		}
	}
	if !got.Items[0].Pinned || got.Items[1].Pinned || got.Items[0].Sources[0] != "follow" {
		t.Fatalf("pinning: %+v", got.Items[:2])
	}
	b := got.Items[3]
	if b.Reasons.BeaconMatch != 1 || b.Sources[0] != "beacon" || b.Reasons.TopicAffinity != 0 {
		t.Fatalf("beacon item: %+v", b)
	}
	for _, it := range got.Items {
		s := it.Reasons
		sum := s.Trust + s.TopicAffinity + s.Novelty + s.Diversity + s.BeaconMatch + s.Copresence + s.Similarity + s.CitationReach
		if math.Abs(sum-s.Total) > 1e-3 || it.Score != s.Total {
			t.Fatalf("components do not add up: %+v", it)
		}
	}
	if c := got.Items[2].Reasons; c.TopicAffinity != 1 || c.Trust != 0 || got.Items[1].Reasons.Trust <= 0 {
		t.Fatalf("carol's components: %+v", c)
	}
	// The reference relay's route serves the same ranking; gina's events reach only those she follows.
	get(t, r, "/recommendations/"+alice.ID+"?limit=2", &got)
	if got.Count != 2 || got.Recommendations[0].Event.ID != bobPost.ID {
		t.Fatalf("/recommendations: %+v", got)
	}
	r.PostAll(t, []*protocol.Event{gina.Sign(protocol.KindSubscribe, now-30, "", []string{"p", alice.ID})}, 1)
	get(t, r, path, &got)
	if len(got.Items) != 4 {
		t.Fatalf("anonymous reader sees gina's event: %+v", got.Items)
	}
	get(t, r, path, &got, "Authorization", r.Auth(alice.Key, "GET", path, now))
	if len(got.Items) != 5 {
		t.Fatalf("alice, followed by gina, should see her post: %d items", len(got.Items))
	}
	refuse(t, r, path+"?limit=0", 400, "invalid_parameter")
	refuse(t, r, path+"?window=0", 400, "invalid_parameter")
	refuse(t, r, path+"?page=2", 400, "unknown_parameter")
}
