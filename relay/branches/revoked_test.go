package branches_test

import (
	"testing"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/branches"
	"github.com/anp2net/relay/tasks/taskstest"
)

// TestRevokedRelaysLeaveTheShares: a relay governance revoked (by key or
// by URL) no longer counts among the relays whose announced preferred
// branch GET /branches weighs.
func TestRevokedRelaysLeaveTheShares(t *testing.T) {
	a, b, c := taskstest.NewAgent("relay a"), taskstest.NewAgent("relay b"), taskstest.NewAgent("relay c")
	revoked := map[string]bool{b.ID: true, "http://c.test": true}
	m := branches.NewModule(branches.Options{RevokedRelay: func(k string, _ int64) bool { return revoked[k] }})
	f := m.Fold().(*branches.Fold)
	for _, r := range []struct {
		agent taskstest.Agent
		url   string
	}{{a, "http://a.test"}, {b, "http://b.test"}, {c, "http://c.test/"}} {
		f.Add(r.agent.Sign(protocol.KindRelayAnnounce, 100, `{"url":"`+r.url+`","preferred_branch":"main","served_branches":["main"]}`))
	}
	prefs := f.Preferences(200)
	if len(prefs) != 1 || prefs[a.ID] != "main" {
		t.Fatalf("preferences %v, want relay a alone", prefs)
	}
	all := branches.NewFold()
	all.Add(a.Sign(protocol.KindRelayAnnounce, 100, `{"url":"http://a.test"}`))
	all.Add(b.Sign(protocol.KindRelayAnnounce, 100, `{"url":"http://b.test"}`))
	if len(all.Preferences(200)) != 2 {
		t.Fatal("without governance every relay counts")
	}
}
