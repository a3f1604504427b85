package federation

import (
	"encoding/json"
	"testing"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/tasks/taskstest"
)

// TestRelaysShowTlogAlarms: GET /relays shows the witness's alarms
// against an announced relay (Options.TlogAlarms, by its URL), and
// nothing for a relay without any.
func TestRelaysShowTlogAlarms(t *testing.T) {
	peer := taskstest.NewAgent("relay-split")
	other := taskstest.NewAgent("relay-honest")
	r := startRelay(t, Options{PeerKeys: []string{peer.ID}, TlogAlarms: func(url string) int {
		if url == "http://split.test" {
			return 2
		}
		return 0
	}})
	for _, a := range []struct {
		who taskstest.Agent
		url string
	}{{peer, "http://split.test"}, {other, "http://honest.test"}} {
		e := a.who.Sign(protocol.KindRelayAnnounce, vectorTime-10, `{"url":"`+a.url+`","preferred_branch":"main","served_branches":["main"]}`)
		if ans := r.post(t, e); ans.status != 200 && ans.status != 201 {
			t.Fatalf("announce %s: %d %s", a.url, ans.status, ans.body)
		}
	}
	var rel struct {
		Relays []map[string]any `json:"relays"`
	}
	if err := json.Unmarshal(r.do(t, "GET", "/relays", "", nil).body, &rel); err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, k := range rel.Relays {
		switch k["url"] {
		case "http://split.test":
			seen++
			if k["tlog_alarm"] != true || k["tlog_alarms"] != float64(2) {
				t.Fatalf("the split relay: %v", k)
			}
		case "http://honest.test":
			seen++
			if _, ok := k["tlog_alarm"]; ok {
				t.Fatalf("the honest relay shows an alarm: %v", k)
			}
		}
	}
	if seen != 2 {
		t.Fatalf("/relays lists %d of the 2 relays: %v", seen, rel.Relays)
	}
}
