package federation

import (
	"encoding/json"
	"testing"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/tasks/taskstest"
)

// TestGossipRefusesNull: a null body is not an array of events, from a
// chosen peer or from anyone: 400 with its code, not an empty batch
// answered 200.
func TestGossipRefusesNull(t *testing.T) {
	peer := taskstest.NewAgent("peer relay")
	r := startRelay(t, Options{PeerKeys: []string{peer.ID}})
	for name, ans := range map[string]answer{
		"peer json":      r.gossipAs(t, peer.Key, "/gossip", "application/json", []byte("null")),
		"peer cbor":      r.gossipAs(t, peer.Key, "/gossip", protocol.ContentTypeCBOR, []byte{0xf6}),
		"anonymous json": r.do(t, "POST", "/gossip", "application/json", []byte(" null ")),
		"anonymous cbor": r.do(t, "POST", "/api/gossip", protocol.ContentTypeCBOR, []byte{0xf7}),
	} {
		var e struct{ Code, Detail string }
		if ans.status != 400 || json.Unmarshal(ans.body, &e) != nil || e.Code == "" || e.Detail == "" {
			t.Errorf("%s: %d %s, want 400 with a code", name, ans.status, ans.body)
		}
	}
}
