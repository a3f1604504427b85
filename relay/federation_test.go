package relay

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/anp2net/relay/protocol"
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
