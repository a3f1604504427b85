package dropin_test

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay"
	"github.com/anp2net/relay/relay/directory"
	"github.com/anp2net/relay/relay/federation"
	"github.com/anp2net/relay/relay/governance"
	"github.com/anp2net/relay/relay/offline"
	"github.com/anp2net/relay/relay/relaytest"
	"github.com/anp2net/relay/relay/sqlite"
	"github.com/anp2net/relay/relay/ws"
	tt "github.com/anp2net/relay/tasks/taskstest"
	"github.com/coder/websocket"
)

const treasury = "53f0e3e0485ccdf48ba1854908a8460e13fe0e078d9066ac65aa2b597c9d7916"

type flow = tt.ClientFlow

func w(codes ...string) []string { return codes }

func flows(at int64) []flow { return tt.ClientFlows(at, nil) }

func modules(t *testing.T) []relay.Module {
	g, err := governance.NewModule(governance.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return []relay.Module{directory.NewModule(), g}
}

func warningCodes(ws []protocol.Warning) []string {
	var out []string
	for _, x := range ws {
		out = append(out, x.Code)
	}
	return out
}

// readBack checks what the clients read back from r: each task's status
// and the balances of its requester and provider, and the treasury's.
func readBack(t *testing.T, r *relaytest.Relay, fs []flow) {
	t.Helper()
	fees := 0
	for _, f := range fs {
		var task struct{ Status string }
		if ans := r.Do(t, "GET", "/task/"+f.Task.ID, "", nil); ans.Status != 200 || json.Unmarshal(ans.Body, &task) != nil {
			t.Fatalf("%s: GET /task: %d %s", f.Name, ans.Status, ans.Body)
		}
		if task.Status != f.Status {
			t.Errorf("%s: task status %q, want %q", f.Name, task.Status, f.Status)
		}
		for who, want := range map[string]string{f.Requester.ID: f.RequesterCredit, f.Provider.ID: f.ProviderCredit} {
			if got := balance(t, r, who); got != want {
				t.Errorf("%s: balance of %.8s %s, want %s", f.Name, who, got, want)
			}
		}
		if f.ProviderCredit == "9" {
			fees++
		}
	}
	if got, want := balance(t, r, treasury), strconv.Itoa(fees); got != want {
		t.Errorf("treasury balance %s, want %s", got, want)
	}
}

func balance(t *testing.T, r *relaytest.Relay, agent string) string {
	t.Helper()
	var acc struct{ Balance json.Number }
	if ans := r.Do(t, "GET", "/agents/"+agent+"/credit", "", nil); ans.Status != 200 || json.Unmarshal(ans.Body, &acc) != nil {
		t.Fatalf("GET credit: %d %s", ans.Status, ans.Body)
	}
	return acc.Balance.String()
}

// TestClientRequestsThroughPublishBatchAndImport sends every client's
// requests, shaped exactly as the clients send them, through POST /events
// (one by one), POST /events/batch (all at once) and an import of the
// same events: each is stored with 200 and the warnings naming its
// departures from the seed, and the three relays read back the same task
// statuses and credit balances, those the clients intend.
func TestClientRequestsThroughPublishBatchAndImport(t *testing.T) {
	at := int64(relaytest.VectorTime - 600)
	fs := flows(at)
	herald := tt.HeraldHeartbeat(tt.NewAgent("dropin-herald"), at+50)
	var all []*protocol.Event
	var want [][]string

	pub := relaytest.Start(t, modules(t))
	for _, f := range fs {
		for _, s := range f.Steps {
			all, want = append(all, s.Event), append(want, s.Warnings)
		}
	}
	all, want = append(all, herald), append(want, w(protocol.WarnSchema))
	for i, e := range all {
		ans := pub.Post(t, e)
		var pa relay.PublishAnswer
		if ans.Status != 200 || json.Unmarshal(ans.Body, &pa) != nil || !pa.Stored {
			t.Fatalf("kind %d (%d): %d %s", e.Kind, i, ans.Status, ans.Body)
		}
		if got := warningCodes(pa.Warnings); !slices.Equal(got, want[i]) {
			t.Errorf("kind %d (%d): warnings %v, want %v (%s)", e.Kind, i, got, want[i], ans.Body)
		}
	}
	readBack(t, pub, fs)

	bat := relaytest.Start(t, modules(t))
	body, _ := json.Marshal(all)
	var ba struct {
		Accepted int
		Results  []relay.BatchResult
	}
	if ans := bat.Do(t, "POST", "/events/batch", "application/json", body); ans.Status != 200 || json.Unmarshal(ans.Body, &ba) != nil || ba.Accepted != len(all) {
		t.Fatalf("batch: %d %s", ans.Status, ans.Body)
	}
	for i, r := range ba.Results {
		// A quote is compared at publish only with a request already
		// stored; this one's request is in the same batch (the fold
		// judges it all the same).
		want := slices.DeleteFunc(slices.Clone(want[i]), func(c string) bool { return c == protocol.WarnQuoteUnbounded })
		if got := warningCodes(r.Warnings); !slices.Equal(got, want) {
			t.Errorf("batch item %d: warnings %v, want %v", i, got, want)
		}
	}
	readBack(t, bat, fs)

	st, err := sqlite.Open(t.TempDir()+"/import.db", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	var lines bytes.Buffer
	for _, e := range all {
		lines.Write(protocol.AppendJSON(nil, e))
		lines.WriteByte('\n')
	}
	im := &offline.Importer{Store: st, Checker: protocol.DefaultChecker(), Now: relaytest.VectorTime}
	if ist, err := im.Import(context.Background(), &lines); err != nil || ist.Accepted != len(all) {
		t.Fatalf("import: %+v %v", ist, err)
	}
	readBack(t, relaytest.On(t, st, modules(t)), fs)
}

// TestStructuredSchemaFailureIs400: on a structured-intent kind a content
// that breaks its s tag's schema is a 400 schema_violation (seed §5.1),
// and nothing is stored.
func TestStructuredSchemaFailureIs400(t *testing.T) {
	r := relaytest.Start(t, modules(t))
	a := tt.NewAgent("dropin-structured")
	before := r.Count(t)
	ans := r.Post(t, a.Sign(1001, relaytest.VectorTime-10, "ANP2 heartbeat: plain text", []string{"s", "anp.heartbeat.v1"}))
	if ans.Status != 400 || ans.Code(t) != governance.CodeSchemaViolation {
		t.Fatalf("kind 1001 with a failing schema: %d %s", ans.Status, ans.Body)
	}
	if r.Count(t) != before {
		t.Fatal("a refused event was stored")
	}
}

// TestReadsTheClientsMake: GET /stats answers the reference relay's
// counters, GET /task/{id} serves events[] as full events (hf-space reads
// their content) with the summaries under event_refs, and GET /agents rows
// carry latest_profile as the kind 0 content string, first_seen and
// last_seen, with the parsed profile under profile.
func TestReadsTheClientsMake(t *testing.T) {
	r := relaytest.Start(t, modules(t))
	at := int64(relaytest.VectorTime - 600)
	named, visitor := tt.NewAgent("dropin-named"), tt.NewAgent("dropin-visitor")
	profile := `{"name":"ANP2Translator","description":"translates"}`
	f := flows(at)[0]
	evs := []*protocol.Event{named.Sign(protocol.KindProfile, at, profile), named.Sign(protocol.KindPost, at+5, "hello"),
		visitor.Sign(protocol.KindPost, at+6, "hi")}
	for _, s := range f.Steps {
		evs = append(evs, s.Event)
	}
	for _, e := range evs {
		if ans := r.Post(t, e); ans.Status != 200 {
			t.Fatalf("kind %d: %d %s", e.Kind, ans.Status, ans.Body)
		}
	}
	authors := map[string]bool{}
	for _, e := range evs {
		authors[e.AgentID] = true
	}

	var stats struct {
		TotalEvents  int            `json:"total_events"`
		UniqueAgents int            `json:"unique_agents"`
		ProfileNodes int            `json:"profile_nodes"`
		VisitorsOnly int            `json:"visitors_only"`
		ByKind       map[string]int `json:"by_kind"`
	}
	getJSON(t, r, "/stats", &stats)
	if stats.TotalEvents != len(evs) || stats.UniqueAgents != len(authors) || stats.ProfileNodes != 1 ||
		stats.VisitorsOnly != len(authors)-1 || stats.ByKind["1"] != 2 || stats.ByKind["0"] != 1 || stats.ByKind["50"] != 1 {
		t.Fatalf("/stats: %+v (%d events, %d authors)", stats, len(evs), len(authors))
	}

	var task struct {
		Events    []protocol.Event `json:"events"`
		EventRefs []struct {
			EventID string `json:"event_id"`
			Counts  bool   `json:"counts"`
		} `json:"event_refs"`
		Request *protocol.Event `json:"request"`
	}
	getJSON(t, r, "/task/"+f.Task.ID, &task)
	if len(task.Events) != len(f.Steps) || len(task.EventRefs) != len(f.Steps) || task.Request == nil || task.Request.ID != f.Task.ID {
		t.Fatalf("/task: %d events, %d refs", len(task.Events), len(task.EventRefs))
	}
	for i, e := range task.Events {
		if e.ID != task.EventRefs[i].EventID || e.CheckID() != nil || e.CheckSig() != nil || e.Content == "" {
			t.Fatalf("/task events[%d] is not the stored event: %+v", i, e)
		}
	}

	var agents struct {
		Agents []struct {
			AgentID       string          `json:"agent_id"`
			Name          string          `json:"name"`
			LatestProfile *string         `json:"latest_profile"`
			Profile       json.RawMessage `json:"profile"`
			FirstSeen     int64           `json:"first_seen"`
			LastSeen      int64           `json:"last_seen"`
			EventCount    int             `json:"event_count"`
		} `json:"agents"`
	}
	getJSON(t, r, "/agents", &agents)
	seen := 0
	for _, a := range agents.Agents {
		switch a.AgentID {
		case named.ID:
			seen++
			if a.LatestProfile == nil || *a.LatestProfile != profile || a.Name != "ANP2Translator" || a.FirstSeen != at || a.LastSeen != at+5 ||
				a.EventCount != 2 || !bytes.Contains(a.Profile, []byte(`"ANP2Translator"`)) {
				t.Fatalf("/agents row of a named agent: %+v", a)
			}
		case visitor.ID:
			seen++
			if a.LatestProfile != nil || string(a.Profile) != "null" || a.FirstSeen != at+6 || a.LastSeen != at+6 {
				t.Fatalf("/agents row of a visitor: %+v", a)
			}
		}
	}
	if seen != 2 {
		t.Fatalf("/agents lists %d of the 2 agents", seen)
	}
	var one map[string]any
	getJSON(t, r, "/agents/"+named.ID, &one)
	if one["latest_profile"] != profile || one["first_seen"] != float64(at) {
		t.Fatalf("/agents/{id}: %v", one)
	}
}

func getJSON(t *testing.T, r *relaytest.Relay, path string, v any) {
	t.Helper()
	ans := r.Do(t, "GET", path, "", nil)
	if ans.Status != 200 || json.Unmarshal(ans.Body, v) != nil {
		t.Fatalf("GET %s: %d %s", path, ans.Status, ans.Body)
	}
}

// fedRelay is a relay with the federation module mounted (not run: the
// test drives mirroring), trusting peers' gossip.
func fedRelay(t *testing.T, opts federation.Options) (*relaytest.Relay, *federation.Module) {
	t.Helper()
	fed, err := federation.NewModule(opts)
	if err != nil {
		t.Fatal(err)
	}
	mods := append(modules(t), struct{ relay.Module }{fed})
	return relaytest.Start(t, mods), fed
}

// TestClientRequestsThroughGossipAndMirror: the same requests reach a relay
// by POST /gossip from a chosen peer and another by mirroring the first;
// both store them all and read back what the clients intend (mirrored
// events are judged as published ones).
func TestClientRequestsThroughGossipAndMirror(t *testing.T) {
	at := int64(relaytest.VectorTime - 600)
	fs := flows(at)
	var all []*protocol.Event
	for _, f := range fs {
		for _, s := range f.Steps {
			all = append(all, s.Event)
		}
	}
	peer := tt.NewAgent("dropin-peer-relay")
	g, _ := fedRelay(t, federation.Options{PeerKeys: []string{peer.ID}})
	body, _ := json.Marshal(all)
	auth := protocol.HTTPAuth(peer.Key, "POST", g.URL+"/gossip", body, g.Clock.Now().Unix())
	var ga struct {
		Accepted int
		Rejected []any
	}
	if ans := g.Do(t, "POST", "/gossip", "application/json", body, "Authorization", auth); ans.Status != 200 ||
		json.Unmarshal(ans.Body, &ga) != nil || ga.Accepted != len(all) || len(ga.Rejected) != 0 {
		t.Fatalf("gossip: %d %s", ans.Status, ans.Body)
	}
	readBack(t, g, fs)

	m, mf := fedRelay(t, federation.Options{})
	if res, err := mf.MirrorOnce(context.Background(), g.URL, nil); err != nil || res.Rejected != 0 {
		t.Fatalf("mirror: %+v %v", res, err)
	}
	if m.Count(t) != int64(len(all)) {
		t.Fatalf("the mirror holds %d of %d events", m.Count(t), len(all))
	}
	readBack(t, m, fs)
}

// TestClientRequestsThroughWebSocket: the same requests published as /ws
// EVENT frames are each answered OK accepted, and read back alike.
func TestClientRequestsThroughWebSocket(t *testing.T) {
	at := int64(relaytest.VectorTime - 600)
	fs := flows(at)
	r := relaytest.Start(t, append(modules(t), ws.NewModule(ws.Options{})))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(r.URL, "http")+"/ws", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	for _, f := range fs {
		for _, s := range f.Steps {
			frame, _ := json.Marshal([]any{"EVENT", s.Event})
			if err := c.Write(ctx, websocket.MessageText, frame); err != nil {
				t.Fatal(err)
			}
			_, b, err := c.Read(ctx)
			var ok []any
			if err != nil || json.Unmarshal(b, &ok) != nil || len(ok) != 4 || ok[0] != "OK" || ok[1] != s.Event.ID || ok[2] != true {
				t.Fatalf("%s kind %d over /ws: %s %v", f.Name, s.Event.Kind, b, err)
			}
			want := ""
			if len(s.Warnings) > 0 {
				want = "warning: " + strings.Join(s.Warnings, ", ")
			}
			if ok[3] != want {
				t.Errorf("%s kind %d over /ws: message %q, want %q", f.Name, s.Event.Kind, ok[3], want)
			}
		}
	}
	readBack(t, r, fs)
}

// TestDryRunListsWarnings: a dry run of a client's shape is valid and lists
// the warnings its publish would answer; a canonical event lists none.
func TestDryRunListsWarnings(t *testing.T) {
	r := relaytest.Start(t, modules(t))
	a := tt.NewAgent("dropin-dry")
	for _, c := range []struct {
		e    *protocol.Event
		want []string
	}{
		{tt.ExtensionRequest(a, relaytest.VectorTime-10, relaytest.VectorTime+3600), w(protocol.WarnTaskTags, protocol.WarnTaskTags)},
		{tt.SDKRequest(a, relaytest.VectorTime-10, relaytest.VectorTime+3600), nil},
		{tt.HeraldHeartbeat(a, relaytest.VectorTime-10), w(protocol.WarnSchema)},
	} {
		ans := r.Do(t, "POST", "/events/dry-run", "application/json", protocol.AppendJSON(nil, c.e))
		var d struct {
			Valid    bool
			Warnings []protocol.Warning
		}
		if ans.Status != 200 || json.Unmarshal(ans.Body, &d) != nil || !d.Valid || d.Warnings == nil ||
			!slices.Equal(warningCodes(d.Warnings), c.want) {
			t.Errorf("dry run of kind %d: %d %s, want warnings %v", c.e.Kind, ans.Status, ans.Body, c.want)
		}
	}
}
