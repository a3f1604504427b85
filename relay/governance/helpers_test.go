package governance_test

import (
	"encoding/json"
	"testing"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay"
	"github.com/anp2net/relay/relay/governance"
	"github.com/anp2net/relay/relay/relaytest"
	"github.com/anp2net/relay/relay/state"
	"github.com/anp2net/relay/tasks/taskstest"
)

// keys are the test network's governance keys: seed 2-of-3, sovereign
// 2-of-2.
type keys struct {
	seed, sov []taskstest.Agent
	opts      governance.Options
}

func newKeys() keys {
	k := keys{}
	for _, n := range []string{"seed-a", "seed-b", "seed-c"} {
		k.seed = append(k.seed, taskstest.NewAgent(n))
	}
	for _, n := range []string{"sov-a", "sov-b"} {
		k.sov = append(k.sov, taskstest.NewAgent(n))
	}
	for _, a := range k.seed {
		k.opts.SeedKeys = append(k.opts.SeedKeys, a.ID)
	}
	for _, a := range k.sov {
		k.opts.SovereignKeys = append(k.opts.SovereignKeys, a.ID)
	}
	k.opts.SeedThreshold, k.opts.SovereignThreshold = 2, 2
	return k
}

func (k keys) module(t testing.TB) *governance.Module {
	t.Helper()
	m, err := governance.NewModule(k.opts)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// act returns a kind 30 by author at time at with content, cosigned by
// cosigners, with extra tags.
func act(t testing.TB, author taskstest.Agent, at int64, content map[string]any, cosigners []taskstest.Agent, tags ...[]string) *protocol.Event {
	t.Helper()
	b, _ := json.Marshal(content)
	for _, c := range cosigners {
		tag, err := protocol.Cosign(c.Key, governance.KindSovereignAct, string(b))
		if err != nil {
			t.Fatal(err)
		}
		tags = append(tags, tag)
	}
	return author.Sign(governance.KindSovereignAct, at, string(b), tags...)
}

func post(t testing.TB, r *relaytest.Relay, e *protocol.Event, status int, code string) relaytest.Answer {
	t.Helper()
	ans := r.Post(t, e)
	if ans.Status != status || (code != "" && ans.Code(t) != code) {
		t.Fatalf("post kind %d: want %d %s, got %d %s", e.Kind, status, code, ans.Status, ans.Body)
	}
	return ans
}

func getJSON(t testing.TB, r *relaytest.Relay, path string, v any) {
	t.Helper()
	ans := r.Do(t, "GET", path, "", nil)
	if ans.Status != 200 {
		t.Fatalf("GET %s: %d %s", path, ans.Status, ans.Body)
	}
	if err := json.Unmarshal(ans.Body, v); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
}

func stateOf(t testing.TB, r *relaytest.Relay) state.Digest {
	var d state.Digest
	getJSON(t, r, "/state", &d)
	return d
}

func start(t testing.TB, k keys) *relaytest.Relay {
	return relaytest.Start(t, []relay.Module{k.module(t)})
}

// logEntry is a row of GET /sovereign_log.
type logEntry struct {
	ID        string   `json:"id"`
	Act       string   `json:"act"`
	Valid     bool     `json:"valid"`
	Ignored   string   `json:"ignored"`
	Authority string   `json:"authority"`
	ReplayOf  string   `json:"replay_of"`
	Targets   []string `json:"targets"`
}

func sovLog(t testing.TB, r *relaytest.Relay) map[string]logEntry {
	var rows []logEntry
	getJSON(t, r, "/sovereign_log", &rows)
	out := map[string]logEntry{}
	for _, row := range rows {
		out[row.ID] = row
	}
	return out
}
