package relay

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/reconcile"
	"github.com/anp2net/relay/tasks/taskstest"
)

// TestGossipJudgesEachEvent pushes batches with old, forged, kind 11 and
// duplicate events, as JSON and as CBOR: each is judged alone and the
// peer's counts show up in /relays.
func TestGossipJudgesEachEvent(t *testing.T) {
	r := viewsRelay(t, filepath.Join(t.TempDir(), "r.db"))
	a := taskstest.NewAgent("author")
	old := a.Sign(protocol.KindPost, vectorTime-30*86400, "a month old") // outside the publish window
	forged := *a.Sign(protocol.KindPost, vectorTime-5, "original")
	forged.Content = "tampered"
	beat := a.Sign(protocol.KindHealth, vectorTime-5, `{"status":"ok"}`)
	fresh := a.Sign(protocol.KindPost, vectorTime-4, "fresh")
	if ans := r.post(t, old); ans.status != 400 {
		t.Fatalf("an old event must be refused at publish: %d", ans.status)
	}
	batch := []*protocol.Event{old, &forged, beat, fresh, fresh}
	body, _ := json.Marshal(batch)
	ans := r.do(t, "POST", "/gossip", "application/json", body)
	var g gossipAnswer
	if ans.status != 200 || json.Unmarshal(ans.body, &g) != nil {
		t.Fatalf("gossip: %d %s", ans.status, ans.body)
	}
	if g.Accepted != 2 || g.Duplicate != 1 || len(g.Rejected) != 2 ||
		g.Rejected[0].Code != protocol.CodeIDMismatch || g.Rejected[1].Code != CodeNotMirrored {
		t.Fatalf("gossip answer: %+v", g)
	}
	// The same batch as CBOR: everything is now a duplicate or rejected.
	cb, err := protocol.EncodeCBORList(batch)
	if err != nil {
		t.Fatal(err)
	}
	ans = r.do(t, "POST", "/api/gossip", protocol.ContentTypeCBOR, cb)
	if json.Unmarshal(ans.body, &g) != nil || g.Accepted != 0 || g.Duplicate != 3 || len(g.Rejected) != 2 {
		t.Fatalf("cbor gossip: %d %s", ans.status, ans.body)
	}
	if ans := r.do(t, "POST", "/gossip", "application/json", []byte(`{"not":"a list"}`)); ans.status != 400 {
		t.Fatalf("non-array gossip: %d", ans.status)
	}
	var rel struct {
		Peers []peerStats `json:"peers"`
	}
	json.Unmarshal(r.do(t, "GET", "/relays", "", nil).body, &rel)
	if len(rel.Peers) != 1 || rel.Peers[0].Received != 10 || rel.Peers[0].Invalid != 4 || rel.Peers[0].Accepted != 2 {
		t.Fatalf("relays: %+v", rel)
	}
}

// TestPeerLimits holds one peer address to its gossip and sync allowances
// (tiny ones here): a batch over the gossip allowance, and a sync message
// past the sync allowance, where a filtered message counts
// SyncFilterCost, are 429 rate_limited with Retry-After, and go through
// again once the window has passed.
func TestPeerLimits(t *testing.T) {
	r := startRelay(t, func(c *Config) { c.PeerRate, c.SyncRate = 5, SyncFilterCost+2 })
	a := taskstest.NewAgent("author")
	var batch []*protocol.Event
	for i := range 6 {
		batch = append(batch, a.Sign(protocol.KindPost, vectorTime-10+int64(i), fmt.Sprint("post ", i)))
	}
	gossip := func(evs []*protocol.Event) answer {
		body, _ := json.Marshal(evs)
		return r.do(t, "POST", "/gossip", "application/json", body)
	}
	limited := func(what string, ans answer) {
		t.Helper()
		var e struct{ Code string }
		json.Unmarshal(ans.body, &e)
		if ans.status != 429 || e.Code != CodeRateLimited || ans.header.Get("Retry-After") == "" {
			t.Fatalf("%s: %d %s (Retry-After %q), want 429 rate_limited", what, ans.status, ans.body, ans.header.Get("Retry-After"))
		}
	}
	limited("6 events against an allowance of 5", gossip(batch))
	if ans := gossip(batch[:5]); ans.status != 200 {
		t.Fatalf("5 events: %d %s", ans.status, ans.body)
	}
	msg := reconcile.NewSession(reconcile.NewIndex(nil)).Initiate()
	sync := func(query string) answer {
		return r.do(t, "POST", "/sync"+query, ContentTypeSync, msg)
	}
	for i, q := range []string{"?kinds=1", "", ""} {
		if ans := sync(q); ans.status != 200 {
			t.Fatalf("sync %d (%q): %d %s", i, q, ans.status, ans.body)
		}
	}
	limited("a sync message past the allowance", sync(""))
	r.clock.add(2 * time.Minute)
	if ans := sync("?kinds=1"); ans.status != 200 {
		t.Fatalf("sync after the window: %d %s", ans.status, ans.body)
	}
	if ans := gossip(batch[5:]); ans.status != 200 {
		t.Fatalf("gossip after the window: %d %s", ans.status, ans.body)
	}
}
