package explorer_test

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"testing"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay"
	"github.com/anp2net/relay/relay/discovery"
	"github.com/anp2net/relay/relay/explorer"
	"github.com/anp2net/relay/relay/relaytest"
	"github.com/anp2net/relay/tasks/taskstest"
)

// TestDMCountReaderRuleAndCap: an invite_only agent's DMs count only for
// itself and the agents it follows (anonymous readers saw them all
// before), and the sent count is capped like the received one (before,
// it scanned every DM of the agent).
func TestDMCountReaderRuleAndCap(t *testing.T) {
	// The reader rule (§12.8 invite_only) is discovery's.
	r := relaytest.Start(t, []relay.Module{explorer.NewModule(), discovery.NewModule()})
	now := r.Clock.Now().Unix()
	erin, bob, zed := taskstest.NewAgent("erin"), taskstest.NewAgent("bob"), taskstest.NewAgent("zed")
	dm := func(from, to taskstest.Agent, at int64) *protocol.Event {
		box, nonce := make([]byte, 48), make([]byte, 24)
		rand.Read(box)
		rand.Read(nonce)
		return from.Sign(protocol.KindDM, at, base64.StdEncoding.EncodeToString(box), []string{"p", to.ID}, []string{"nonce", hex.EncodeToString(nonce)})
	}
	evs := []*protocol.Event{
		erin.Sign(protocol.KindProfile, now-100, map[string]any{"name": "erin", "discoverability": "invite_only"}),
		bob.Sign(protocol.KindProfile, now-100, map[string]any{"name": "bob"}),
		dm(erin, bob, now-50), dm(erin, bob, now-49), dm(bob, erin, now-48),
	}
	r.PostAll(t, evs, 4)
	type counts struct {
		Sent, Received int
		SentCapped     bool `json:"sent_capped"`
		Capped         bool `json:"received_capped"`
	}
	read := func(agent string, as *taskstest.Agent) counts {
		t.Helper()
		path := "/explorer/api/dm_count/" + agent
		var hdr []string
		if as != nil {
			hdr = []string{"Authorization", r.Auth(as.Key, http.MethodGet, path, now)}
		}
		a := r.Do(t, http.MethodGet, path, "", nil, hdr...)
		var c counts
		if a.Status != http.StatusOK {
			t.Fatalf("%s: %d %s", path, a.Status, a.Body)
		}
		m := a.JSON(t)
		c.Sent, c.Received = int(m["sent"].(float64)), int(m["received"].(float64))
		c.SentCapped, _ = m["sent_capped"].(bool)
		c.Capped, _ = m["received_capped"].(bool)
		return c
	}
	for _, c := range []struct {
		name  string
		agent string
		as    *taskstest.Agent
		sent  int
		recvd int
	}{
		{"erin, anonymous", erin.ID, nil, 0, 1},
		{"bob, anonymous", bob.ID, nil, 1, 0},
		{"erin, by a stranger", erin.ID, &zed, 0, 1},
		{"erin, by herself", erin.ID, &erin, 2, 1},
		{"bob, by erin", bob.ID, &erin, 1, 2},
	} {
		if got := read(c.agent, c.as); got.Sent != c.sent || got.Received != c.recvd || got.SentCapped || got.Capped {
			t.Errorf("%s: %+v, want %d sent %d received", c.name, got, c.sent, c.recvd)
		}
	}
	if a := r.Do(t, http.MethodGet, "/explorer/api/dm_count/"+bob.ID, "", nil, "Authorization", "ANP2 garbage"); a.Status != http.StatusUnauthorized {
		t.Errorf("a bad Authorization: %d, want 401", a.Status)
	}
	// The sent count stops at 1000, like received.
	many := make([]*protocol.Event, 0, 1003)
	for i := range 1003 {
		many = append(many, dm(bob, zed, now-40+int64(i%30)))
	}
	r.PostAll(t, many, 4)
	if got := read(bob.ID, nil); got.Sent != 1000 || !got.SentCapped {
		t.Errorf("bob after 1004 sent: %+v, want 1000 capped", got)
	}
	if got := read(zed.ID, nil); got.Received != 1000 || !got.Capped {
		t.Errorf("zed after 1003 received: %+v, want 1000 capped", got)
	}
}
