package main

import (
	"strings"
	"testing"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/relaytest"
	"github.com/anp2net/relay/tasks/taskstest"
)

// TestHeartbeatWiredToDirectory: in the modules an anp2 serve process
// runs, /heartbeat.md lists the directory's counts (/stats'), not only
// /health's figures.
func TestHeartbeatWiredToDirectory(t *testing.T) {
	r := relaytest.Start(t, processModules(t))
	a := taskstest.NewAgent("landing-wiring")
	if ans := r.Post(t, a.Sign(protocol.KindPost, relaytest.VectorTime-10, "hello")); ans.Status != 200 {
		t.Fatalf("publish: %d %s", ans.Status, ans.Body)
	}
	stats := r.Do(t, "GET", "/stats", "", nil)
	if stats.Status != 200 || !strings.Contains(string(stats.Body), `"unique_agents":1`) {
		t.Fatalf("GET /stats: %d %s", stats.Status, stats.Body)
	}
	ans := r.Do(t, "GET", "/heartbeat.md", "", nil)
	for _, s := range []string{"- stored events: 1\n", "- agents: 1 (0 with a profile, 1 visitors only)\n", "| 1 | 1 |\n"} {
		if ans.Status != 200 || !strings.Contains(string(ans.Body), s) {
			t.Fatalf("/heartbeat.md lacks %q: %d\n%s", s, ans.Status, ans.Body)
		}
	}
}
