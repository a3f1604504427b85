package federation

import (
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay"
	"github.com/anp2net/relay/relay/reconcile"
	"github.com/anp2net/relay/tasks/taskstest"
)

// TestGossipJudgesEachEvent pushes batches with old, forged, kind 11 and
// duplicate events, as JSON and as CBOR: each is judged alone and the
// peer's counts show up in /relays.
func TestGossipJudgesEachEvent(t *testing.T) {
	peer := taskstest.NewAgent("peer relay")
	r := startRelay(t, Options{PeerKeys: []string{peer.ID}})
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
	ans := r.gossipAs(t, peer.Key, "/gossip", "application/json", body)
	var g gossipAnswer
	if ans.status != 200 || json.Unmarshal(ans.body, &g) != nil {
		t.Fatalf("gossip: %d %s", ans.status, ans.body)
	}
	if g.Accepted != 2 || g.Duplicate != 1 || len(g.Rejected) != 2 ||
		g.Rejected[0].Code != protocol.CodeIDMismatch || g.Rejected[1].Code != relay.CodeNotMirrored {
		t.Fatalf("gossip answer: %+v", g)
	}
	// The same batch as CBOR: everything is now a duplicate or rejected.
	cb, err := protocol.EncodeCBORList(batch)
	if err != nil {
		t.Fatal(err)
	}
	ans = r.gossipAs(t, peer.Key, "/api/gossip", protocol.ContentTypeCBOR, cb)
	if json.Unmarshal(ans.body, &g) != nil || g.Accepted != 0 || g.Duplicate != 3 || len(g.Rejected) != 2 {
		t.Fatalf("cbor gossip: %d %s", ans.status, ans.body)
	}
	if ans := r.gossipAs(t, peer.Key, "/gossip", "application/json", []byte(`{"not":"a list"}`)); ans.status != 400 {
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
	peer := taskstest.NewAgent("peer relay")
	r := startRelay(t, Options{PeerRate: 5, SyncRate: SyncFilterCost + 2, PeerKeys: []string{peer.ID}})
	a := taskstest.NewAgent("author")
	var batch []*protocol.Event
	for i := range 6 {
		batch = append(batch, a.Sign(protocol.KindPost, vectorTime-10+int64(i), fmt.Sprint("post ", i)))
	}
	gossip := func(evs []*protocol.Event) answer {
		body, _ := json.Marshal(evs)
		return r.gossipAs(t, peer.Key, "/gossip", "application/json", body)
	}
	limited := func(what string, ans answer) {
		t.Helper()
		var e struct{ Code string }
		json.Unmarshal(ans.body, &e)
		if ans.status != 429 || e.Code != relay.CodeRateLimited || ans.header.Get("Retry-After") == "" {
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
	r.Clock.Add(2 * time.Minute)
	if ans := sync("?kinds=1"); ans.status != 200 {
		t.Fatalf("sync after the window: %d %s", ans.status, ans.body)
	}
	if ans := gossip(batch[5:]); ans.status != 200 {
		t.Fatalf("gossip after the window: %d %s", ans.status, ans.body)
	}
}

// gossipAs posts body to path signed by key as a peer relay would (a D4
// header whose payload tag binds the body).
func (r *testRelay) gossipAs(t *testing.T, key ed25519.PrivateKey, path, ct string, body []byte) answer {
	t.Helper()
	auth := protocol.HTTPAuth(key, "POST", r.URL+path, body, r.Clock.Now().Unix())
	return r.do(t, "POST", path, ct, body, "Authorization", auth)
}

// TestGossipFromStrangersGetsPublishRules closes the hole where POST
// /gossip skipped the publish guards: a backdated kind 0 and kind 50 with
// no proof of work, pushed anonymously, by an authenticated relay nobody
// chose as a peer, or by a chosen peer whose header does not bind the
// body, are refused exactly as POST /events refuses them, and so is a
// stranger's burst past the address allowance. The same events from a
// chosen peer are stored (they predate PoW's activation).
func TestGossipFromStrangersGetsPublishRules(t *testing.T) {
	peer, stranger := taskstest.NewAgent("peer relay"), taskstest.NewAgent("stranger relay")
	r := startRelay(t, Options{PeerKeys: []string{peer.ID}}, func(c *relay.Config) {
		c.RatePerIP = 4
		c.Checker.PoW.ActiveFrom = vectorTime - 86400 // PoW mandatory from yesterday
	})
	a := taskstest.NewAgent("sybil")
	backdated := int64(vectorTime - 30*86400) // before PoW's activation, outside the window
	profile := a.Sign(protocol.KindProfile, backdated, `{"name":"sybil"}`)
	task := taskstest.Request(a, backdated, backdated+86400, taskstest.Reward{}, false)
	body, _ := json.Marshal([]*protocol.Event{profile, task})
	if got := r.post(t, profile); got.status != 400 {
		t.Fatalf("POST /events took the backdated profile: %d %s", got.status, got.body)
	}
	// A peer's header that does not bind the body is refused outright,
	// as on every route that takes a body.
	asPeerNoPayload := protocol.HTTPAuth(peer.Key, "POST", r.URL+"/gossip", nil, r.Clock.Now().Unix())
	if ans := r.do(t, "POST", "/gossip", "application/json", body, "Authorization", asPeerNoPayload); ans.status != 401 || !strings.Contains(string(ans.body), relay.CodeAuthPayloadRequired) {
		t.Fatalf("peer, body unbound: %d %s", ans.status, ans.body)
	}
	for name, ans := range map[string]answer{
		"anonymous":      r.do(t, "POST", "/gossip", "application/json", body),
		"stranger relay": r.gossipAs(t, stranger.Key, "/gossip", "application/json", body),
	} {
		var g gossipAnswer
		if ans.status != 200 || json.Unmarshal(ans.body, &g) != nil {
			t.Fatalf("%s: %d %s", name, ans.status, ans.body)
		}
		if g.Accepted != 0 || len(g.Rejected) != 2 || g.Rejected[0].Code != protocol.CodeTooFarPast {
			t.Fatalf("%s: gossip bypassed the publish rules: %+v", name, g)
		}
	}
	if n := r.count(t); n != 0 {
		t.Fatalf("%d events stored from strangers", n)
	}
	// The address allowance applies to a stranger's pushes too: six fresh
	// posts against an allowance of four (some already spent above).
	var fresh []*protocol.Event
	for i := range 6 {
		fresh = append(fresh, a.Sign(protocol.KindPost, vectorTime-int64(i), fmt.Sprint("fresh ", i)))
	}
	body, _ = json.Marshal(fresh)
	var g gossipAnswer
	json.Unmarshal(r.do(t, "POST", "/gossip", "application/json", body).body, &g)
	limited := 0
	for _, rej := range g.Rejected {
		if rej.Code == relay.CodeRateLimited {
			limited++
		}
	}
	if limited == 0 || g.Accepted+limited != 6 {
		t.Fatalf("a stranger's burst was not rate limited: %+v", g)
	}
	// The chosen peer's push of the old events is mirrored history.
	body, _ = json.Marshal([]*protocol.Event{profile, task})
	json.Unmarshal(r.gossipAs(t, peer.Key, "/gossip", "application/json", body).body, &g)
	if g.Accepted != 2 {
		t.Fatalf("a chosen peer's history was refused: %+v", g)
	}
}

// TestRevokedRelayIsNoPeer: once governance revokes a chosen peer's relay
// key (revoke_relay), its pushes get POST /events' rules like anyone's:
// the old history it could push before is refused.
func TestRevokedRelayIsNoPeer(t *testing.T) {
	peer := taskstest.NewAgent("peer relay")
	var revoked atomic.Bool
	r := startRelay(t, Options{PeerKeys: []string{peer.ID}, RevokedRelay: func(k string, _ int64) bool { return revoked.Load() && k == peer.ID }})
	a := taskstest.NewAgent("author")
	push := func(e *protocol.Event) gossipAnswer {
		body, _ := json.Marshal([]*protocol.Event{e})
		var g gossipAnswer
		if ans := r.gossipAs(t, peer.Key, "/gossip", "application/json", body); ans.status != 200 || json.Unmarshal(ans.body, &g) != nil {
			t.Fatalf("gossip: %d %s", ans.status, ans.body)
		}
		return g
	}
	if g := push(a.Sign(protocol.KindPost, vectorTime-30*86400, "old history, peer")); g.Accepted != 1 {
		t.Fatalf("a chosen peer's history was refused: %+v", g)
	}
	if g := push(peer.Sign(protocol.KindRelayAnnounce, vectorTime-10, `{"url":"http://peer.test","preferred_branch":"main","served_branches":["main"]}`)); g.Accepted != 1 {
		t.Fatalf("the peer's announcement: %+v", g)
	}
	relays := func() int {
		var rel struct {
			Relays []struct {
				AgentID string `json:"agent_id"`
			} `json:"relays"`
		}
		json.Unmarshal(r.do(t, "GET", "/relays", "", nil).body, &rel)
		return len(rel.Relays)
	}
	if n := relays(); n != 1 {
		t.Fatalf("/relays lists %d relays, want the peer", n)
	}
	revoked.Store(true)
	if n := relays(); n != 0 {
		t.Fatalf("/relays still lists a revoked relay (%d)", n)
	}
	if g := push(a.Sign(protocol.KindPost, vectorTime-30*86400, "old history, revoked")); g.Accepted != 0 || len(g.Rejected) != 1 || g.Rejected[0].Code != protocol.CodeTooFarPast {
		t.Fatalf("a revoked relay's push kept a peer's rules: %+v", g)
	}
}
