package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay"
	"github.com/anp2net/relay/tasks/taskstest"
	"github.com/coder/websocket"
)

// dropinMine gives a kind 0 or 50 the proof of work a relay process
// demands (12 bits) and signs it again.
func dropinMine(t *testing.T) func(*protocol.Event, taskstest.Agent) *protocol.Event {
	return func(e *protocol.Event, a taskstest.Agent) *protocol.Event {
		e.AgentID = a.ID
		if err := protocol.Mine(context.Background(), e, 12); err != nil {
			t.Fatal(err)
		}
		e.Sign(a.Key)
		return e
	}
}

func dropinWarnings(ws []protocol.Warning) []string {
	var out []string
	for _, w := range ws {
		out = append(out, w.Code)
	}
	return out
}

// dropinGet decodes GET base+path into v.
func dropinGet(t *testing.T, base, path string, v any) {
	t.Helper()
	status, _, body := httpDo(t, "GET", base+path, nil)
	if status != 200 || json.Unmarshal(body, v) != nil {
		t.Fatalf("GET %s: %d %s", path, status, body)
	}
}

// dropinReadBack checks what the network's clients read back from a relay
// process: each task's status and events, the balances, /stats and
// /agents.
func dropinReadBack(t *testing.T, base string, flows []taskstest.ClientFlow, named taskstest.Agent, profile string, stored int) {
	t.Helper()
	fees := 0
	for _, f := range flows {
		var task struct {
			Status string
			Events []protocol.Event `json:"events"`
		}
		dropinGet(t, base, "/task/"+f.Task.ID, &task)
		if task.Status != f.Status || len(task.Events) != len(f.Steps) || task.Events[0].ID != f.Task.ID || task.Events[0].Content != f.Task.Content {
			t.Errorf("%s: /task status %q with %d events, want %q with %d", f.Name, task.Status, len(task.Events), f.Status, len(f.Steps))
		}
		for who, want := range map[string]string{f.Requester.ID: f.RequesterCredit, f.Provider.ID: f.ProviderCredit} {
			var acc struct{ Balance json.Number }
			if dropinGet(t, base, "/agents/"+who+"/credit", &acc); acc.Balance.String() != want {
				t.Errorf("%s: balance of %.8s %s, want %s", f.Name, who, acc.Balance, want)
			}
		}
		if f.ProviderCredit == "9" {
			fees++
		}
	}
	var acc struct{ Balance json.Number }
	if dropinGet(t, base, "/agents/53f0e3e0485ccdf48ba1854908a8460e13fe0e078d9066ac65aa2b597c9d7916/credit", &acc); acc.Balance.String() != strconv.Itoa(fees) {
		t.Errorf("treasury balance %s, want %d", acc.Balance, fees)
	}
	var stats struct {
		TotalEvents  int            `json:"total_events"`
		UniqueAgents int            `json:"unique_agents"`
		ProfileNodes int            `json:"profile_nodes"`
		VisitorsOnly int            `json:"visitors_only"`
		ByKind       map[string]int `json:"by_kind"`
	}
	dropinGet(t, base, "/stats", &stats)
	// The relay process stores events of its own too (its announcement).
	if stats.TotalEvents < stored || stats.ProfileNodes < 1 || stats.VisitorsOnly != stats.UniqueAgents-1 || stats.ByKind["50"] != len(flows) {
		t.Errorf("/stats: %+v, want %d events", stats, stored)
	}
	var agents struct {
		Agents []struct {
			AgentID       string  `json:"agent_id"`
			LatestProfile *string `json:"latest_profile"`
			FirstSeen     int64   `json:"first_seen"`
			LastSeen      int64   `json:"last_seen"`
		}
	}
	dropinGet(t, base, "/agents?limit=1000", &agents)
	i := slices.IndexFunc(agents.Agents, func(a struct {
		AgentID       string  `json:"agent_id"`
		LatestProfile *string `json:"latest_profile"`
		FirstSeen     int64   `json:"first_seen"`
		LastSeen      int64   `json:"last_seen"`
	}) bool {
		return a.AgentID == named.ID
	})
	if i < 0 || agents.Agents[i].LatestProfile == nil || *agents.Agents[i].LatestProfile != profile || agents.Agents[i].FirstSeen == 0 {
		t.Errorf("/agents lacks the named agent's profile string: %+v", agents.Agents)
	}
}

// TestDropInClientsAgainstAProcess replays the network's clients' requests,
// shaped exactly as they send them, against real `anp2 serve` processes
// (default limits, mandatory proof of work): one by one through POST
// /events, and all at once through POST /events/batch to a second process.
// Every request is stored with its warnings, and both processes serve the
// task statuses, balances, /stats, /agents and /task the clients read.
func TestDropInClientsAgainstAProcess(t *testing.T) {
	at := time.Now().Unix() - 120 // the LangChain task's 600 s have not run out
	mine := dropinMine(t)
	flows := taskstest.ClientFlows(at, mine)
	named := taskstest.NewAgent("dropin-e2e-named")
	profile := `{"name":"ANP2Herald","description":"heartbeats"}`
	all := []*protocol.Event{mine(named.Sign(protocol.KindProfile, at, profile), named),
		taskstest.HeraldHeartbeat(named, at+1)}
	want := [][]string{nil, {protocol.WarnSchema}}
	for _, f := range flows {
		for _, s := range f.Steps {
			all, want = append(all, s.Event), append(want, s.Warnings)
		}
	}

	dir := t.TempDir()
	pub := startProc(t, filepath.Join(dir, "pub.db"))
	for i, e := range all {
		status, _, body := httpDo(t, "POST", pub.base+"/events", protocol.AppendJSON(nil, e))
		var pa relay.PublishAnswer
		if status != 200 || json.Unmarshal(body, &pa) != nil || !pa.Stored {
			t.Fatalf("event %d (kind %d): %d %s", i, e.Kind, status, body)
		}
		if got := dropinWarnings(pa.Warnings); !slices.Equal(got, want[i]) {
			t.Errorf("event %d (kind %d): warnings %v, want %v", i, e.Kind, got, want[i])
		}
	}
	dropinReadBack(t, pub.base, flows, named, profile, len(all))
	// The landing resources the network's agents discover a relay by.
	for _, path := range []string{"/openapi.json", "/.well-known/openapi.json", "/llms.txt", "/heartbeat.md", "/api/openapi.json"} {
		if status, _, b := httpDo(t, "GET", pub.base+path, nil); status != 200 || len(b) == 0 {
			t.Errorf("GET %s: %d", path, status)
		}
	}

	// A client written from the seed's §5.3 reads the tasks back over
	// /subscribe.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(pub.base, "http")+"/subscribe", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	if err := ws.Write(ctx, websocket.MessageText, []byte(`{"action":"sub","id":"tasks","filter":{"kinds":[50]}}`)); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for {
		_, b, err := ws.Read(ctx)
		var m struct {
			Action string
			Event  *protocol.Event
		}
		if err != nil || json.Unmarshal(b, &m) != nil {
			t.Fatalf("/subscribe: %s %v", b, err)
		}
		if m.Action == "eose" {
			break
		}
		if m.Action != "event" || m.Event == nil {
			t.Fatalf("/subscribe frame %s", b)
		}
		seen[m.Event.ID] = true
	}
	for _, f := range flows {
		if !seen[f.Task.ID] {
			t.Errorf("/subscribe did not deliver the %s task", f.Name)
		}
	}

	bat := startProc(t, filepath.Join(dir, "batch.db"))
	body, _ := json.Marshal(all)
	var ba struct {
		Accepted int
		Results  []relay.BatchResult
	}
	if status, _, b := httpDo(t, "POST", bat.base+"/events/batch", body); status != 200 || json.Unmarshal(b, &ba) != nil || ba.Accepted != len(all) {
		t.Fatalf("batch: %d %s", status, b)
	}
	for i, r := range ba.Results {
		// A quote is compared at publish only with a request already stored.
		w := slices.DeleteFunc(slices.Clone(want[i]), func(c string) bool { return c == protocol.WarnQuoteUnbounded })
		if got := dropinWarnings(r.Warnings); !slices.Equal(got, w) {
			t.Errorf("batch item %d: warnings %v, want %v", i, got, w)
		}
	}
	dropinReadBack(t, bat.base, flows, named, profile, len(all))
}
