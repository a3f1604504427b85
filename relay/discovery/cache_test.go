package discovery_test

import (
	"testing"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/relaytest"
	"github.com/anp2net/relay/tasks/taskstest"
)

// TestConditionalGet: a view answers 304 to its own ETag and 200 with a new
// one once an event changes it — here a kind 23 naming the post follows
// the revocation of the claim that cited it.
func TestConditionalGet(t *testing.T) {
	r, _ := start(t)
	a := taskstest.Pool(2)
	alice, bob := a[0], a[1]
	now := int64(relaytest.VectorTime)
	post := alice.Sign(protocol.KindPost, now-100, "tide tables", []string{"t", "tides"})
	claim := bob.Sign(protocol.KindKnowledge, now-90, map[string]any{"claim": "high tide at 6", "derived_from": post.ID})
	r.PostAll(t, []*protocol.Event{post, claim}, 1)

	path := "/citations/" + post.ID
	first := r.Do(t, "GET", path, "", nil)
	etag := first.Header.Get("ETag")
	if first.Status != 200 || len(etag) != 34 || first.Header.Get("Cache-Control") != "public, max-age=60" {
		t.Fatalf("first: %d %v", first.Status, first.Header)
	}
	if again := r.Do(t, "GET", path, "", nil, "If-None-Match", etag); again.Status != 304 || len(again.Body) != 0 {
		t.Fatalf("conditional: %d %s", again.Status, again.Body)
	}
	if other := r.Do(t, "GET", path, "", nil, "If-None-Match", `"0000", W/`+etag); other.Status != 304 {
		t.Fatalf("weak tag in a list: %d", other.Status)
	}
	if stale := r.Do(t, "GET", path, "", nil, "If-None-Match", `"deadbeef"`); stale.Status != 200 {
		t.Fatalf("unknown tag: %d", stale.Status)
	}
	if bad := r.Post(t, bob.Sign(protocol.KindCacheInvalidate, now, `{"reason":"revoked"}`)); bad.Status != 400 || bad.Code(t) != protocol.CodeMissingTag {
		t.Fatalf("kind 23 without e tag: %d %s", bad.Status, bad.Body)
	}
	r.PostAll(t, []*protocol.Event{
		bob.Sign(protocol.KindRevoke, now-5, "", []string{"e", claim.ID}),
		bob.Sign(protocol.KindCacheInvalidate, now, map[string]any{"reason": "claim_revoked"}, []string{"e", claim.ID}),
	}, 1)
	after := r.Do(t, "GET", path, "", nil, "If-None-Match", etag)
	if after.Status != 200 || after.Header.Get("ETag") == etag || after.JSON(t)["incoming_count"].(float64) != 0 {
		t.Fatalf("after the change: %d %s %v", after.Status, after.Body, after.Header)
	}
}
