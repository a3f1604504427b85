package branches_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anp2net/relay/a2a"
	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay"
	"github.com/anp2net/relay/relay/branches"
	"github.com/anp2net/relay/relay/directory"
	"github.com/anp2net/relay/relay/federation"
	"github.com/anp2net/relay/relay/relaytest"
	"github.com/anp2net/relay/relay/state"
	"github.com/anp2net/relay/relay/stream"
	"github.com/anp2net/relay/tasks/taskstest"
	"github.com/anp2net/relay/trust"
)

// newModule returns the module as cmd/anp2 wires it: its prefix states
// carry a fresh branches fold, as the live state does.
func newModule() *branches.Module {
	return branches.NewModule(branches.Options{Folds: func() []state.NamedFold {
		return relay.Folds([]relay.Module{branches.NewModule(branches.Options{})})
	}, LiveRebuildEvery: 20 * time.Millisecond}) // tests wait for rebuilds (awaitLive)
}

// world is a scenario under construction: its events in publish order.
type world struct {
	t   testing.TB
	r   *relaytest.Relay
	evs []*protocol.Event
}

func (w *world) now() int64 { return w.r.Clock.Now().Unix() }

func (w *world) post(evs ...*protocol.Event) {
	w.t.Helper()
	for _, e := range evs {
		if a := w.r.Post(w.t, e); a.Status != 200 {
			w.t.Fatalf("publish kind %d: %d %s", e.Kind, a.Status, a.Body)
		}
		w.evs = append(w.evs, e)
	}
}

func (w *world) get(path string, out any) {
	w.t.Helper()
	a := w.r.Do(w.t, "GET", path, "", nil)
	if a.Status != 200 {
		w.t.Fatalf("GET %s: %d %s", path, a.Status, a.Body)
	}
	if err := json.Unmarshal(a.Body, out); err != nil {
		w.t.Fatalf("GET %s: %v", path, err)
	}
}

func cosigns(t testing.TB, kind int64, content string, by ...taskstest.Agent) [][]string {
	var out [][]string
	for _, a := range by {
		tag, err := protocol.Cosign(a.Key, kind, content)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, tag)
	}
	return out
}

type checkpointRow struct {
	branches.CheckpointView
	Verification string `json:"verification"`
}

type branchRow struct {
	ID          string `json:"id"`
	HeadEventID string `json:"head_event_id"`
	EventCount  int64  `json:"event_count"`
	CreatedFrom string `json:"created_from"`
	Rollback    string `json:"rollback_proposal"`
	head        int64
}

// TestRollbackScenario is the scenario through a real relay: a
// trusted core, a checkpoint, a sybil attack, a proposal one cosigner
// short that expires, one cosigned by enough of the core that activates,
// forged and replayed cosignatures ignored, and a second relay mirroring
// the first and a third fed the same events in another order deriving the
// same branches and per-branch digests.
func TestRollbackScenario(t *testing.T) {
	first, _ := federated(t, "first")
	w := &world{t: t, r: first}
	core := make([]taskstest.Agent, 6)
	for i := range core {
		core[i] = taskstest.NewAgent(fmt.Sprintf("core-%d", i))
	}
	// The core vouch for each other.
	for i, a := range core {
		var tags [][]string
		for j, b := range core {
			if i != j {
				tags = append(tags, []string{"p", b.ID})
			}
		}
		w.post(a.Sign(6, w.now(), `{"score":1,"reason":"core"}`, tags...))
		w.post(a.Sign(1, w.now(), "hello from the core"))
	}
	w.r.Clock.Add(time.Hour)
	asOf := trust.EvalTime(w.now())
	w.r.Clock.Add(time.Minute)

	// The checkpoint: content from the relay, cosigned by two more of the
	// core, a forged cosignature (core 3's id, core 4's signature) and a
	// replayed one (core 5's cosignature of another checkpoint).
	var draft branches.Checkpoint
	w.get(fmt.Sprintf("/checkpoints/draft?as_of=%d&checkpoint_id=cp-1", asOf), &draft)
	if draft.EventCount != int64(len(w.evs)) || draft.AsOf != asOf {
		t.Fatalf("draft %+v, want %d events", draft, len(w.evs))
	}
	content, _ := json.Marshal(draft)
	tags := cosigns(t, 12, string(content), core[1], core[2])
	forged := cosigns(t, 12, string(content), core[4])[0]
	forged[1] = core[3].ID
	other := draft
	other.CheckpointID = "cp-other"
	otherContent, _ := json.Marshal(other)
	replayed := cosigns(t, 12, string(otherContent), core[5])[0]
	cp := core[0].Sign(12, w.now(), string(content), append(tags, forged, replayed)...)
	// A checkpoint endorsed by too few: the author and the forger.
	weak := core[5].Sign(12, w.now(), string(otherContent), forged)
	w.post(cp, weak)
	w.r.Clock.Add(time.Minute) // views are evaluated at the whole minute

	var cps []checkpointRow
	w.get("/checkpoints", &cps)
	if len(cps) != 2 || cps[0].ID != cp.ID || !cps[0].Valid || cps[0].Verification != branches.Matches || cps[0].Endorsed != 3 {
		t.Fatalf("checkpoints %+v", cps)
	}
	if cps[1].ID != weak.ID || cps[1].Valid || cps[1].Verification != branches.NotChecked {
		t.Fatalf("weak checkpoint %+v", cps[1])
	}
	reasons := map[string]string{}
	for _, e := range cps[0].Endorsers {
		reasons[e.AgentID] = e.Reason
	}
	if reasons[core[3].ID] != "bad_signature" || reasons[core[5].ID] != "bad_signature" {
		t.Fatalf("forged and replayed cosignatures: %+v", cps[0].Endorsers)
	}

	// The sybil attack: 150 agents post spam and vouch for each other.
	w.r.Clock.Add(time.Hour)
	sybils := make([]taskstest.Agent, 150)
	for i := range sybils {
		sybils[i] = taskstest.NewAgent(fmt.Sprintf("sybil-%d", i))
	}
	var attack []*protocol.Event
	for i, s := range sybils {
		attack = append(attack, s.Sign(1, w.now(), "buy now"),
			s.Sign(6, w.now(), `{"score":1}`, []string{"p", sybils[(i+1)%150].ID}, []string{"p", sybils[(i+2)%150].ID}, []string{"p", sybils[(i+3)%150].ID}))
	}
	corePost := w.evs[1]
	reply := sybils[1].Sign(1, w.now(), "reply spam", []string{"e", corePost.ID})
	sybilTask := taskstest.Request(sybils[2], w.now(), w.now()+86400, taskstest.Reward{}, false)
	sybilFlag := sybils[3].Sign(7, w.now(), `{"category":"spam"}`, []string{"e", corePost.ID}, []string{"p", corePost.AgentID})
	attack = append(attack, reply, sybilTask, sybilFlag)
	w.r.PostAll(t, attack, 8)
	w.evs = append(w.evs, attack...)
	w.get("/checkpoints", &cps)
	if cps[0].Verification != branches.Matches {
		t.Fatalf("the attack must not change the checkpoint's state: %+v", cps[0])
	}

	// A proposal one cosigner short (3 of 6 equal weights < 2/3), and one
	// cosigned by sybils only: neither ever activates.
	w.r.Clock.Add(time.Minute)
	shortContent := `{"target_checkpoint":"cp-1","reason":"sybil attack (short)"}`
	short := core[0].Sign(13, w.now(), shortContent, cosigns(t, 13, shortContent, core[1], core[2])...)
	sybilContent := `{"target_checkpoint":"cp-1","reason":"sybils vote"}`
	bySybils := sybils[0].Sign(13, w.now(), sybilContent, cosigns(t, 13, sybilContent, sybils[1], sybils[2], sybils[3], sybils[4])...)
	w.post(short, bySybils)
	w.r.Clock.Add(time.Minute)
	var rbs []branches.RollbackView
	w.get("/rollbacks", &rbs)
	if len(rbs) != 2 || rbs[0].State != "pending" || rbs[1].State != "pending" {
		t.Fatalf("rollbacks %+v", rbs)
	}
	byID := func() map[string]branches.RollbackView {
		m := map[string]branches.RollbackView{}
		for _, r := range rbs {
			m[r.ID] = r
		}
		return m
	}
	if r := byID()[bySybils.ID]; r.Weight != 0 {
		t.Fatalf("sybils weigh nothing at the checkpoint: %+v", r)
	}
	if r := byID()[short.ID]; r.Weight >= r.Threshold || r.Weight <= 0 {
		t.Fatalf("short proposal weight %v threshold %v", r.Weight, r.Threshold)
	}

	// The rollback cosigned by enough of the core (4 of 6); the core 3
	// cosignature replayed from the short proposal's content is ignored
	// there, so a fifth supporter comes only from a valid tag.
	w.r.Clock.Add(time.Minute)
	goodContent := `{"target_checkpoint":"cp-1","reason":"coordinated sybil attack"}`
	replayedRB := cosigns(t, 13, shortContent, core[4])[0]
	good := core[0].Sign(13, w.now(), goodContent, append(cosigns(t, 13, goodContent, core[1], core[2], core[3]), replayedRB)...)
	w.post(good)
	activatedAt := good.CreatedAt
	w.r.Clock.Add(time.Minute)
	w.get("/rollbacks", &rbs)
	g := byID()[good.ID]
	if g.State != "activated" || g.ActivatedAt != activatedAt || g.Weight < g.Threshold {
		t.Fatalf("good rollback %+v", g)
	}
	for _, s := range g.Supporters {
		if s.AgentID == core[4].ID && (s.Top || s.Reason != "bad_signature") {
			t.Fatalf("replayed cosignature counted: %+v", s)
		}
	}
	branch := "pre-rollback-" + good.ID[:8]
	if g.Branch != branch {
		t.Fatalf("branch %q, want %q", g.Branch, branch)
	}

	// After activation: an untagged post goes to main, one tagged for the
	// pre-rollback branch only there.
	w.r.Clock.Add(time.Minute)
	w.post(core[1].Sign(1, w.now(), "after the rollback"),
		core[2].Sign(1, w.now(), "on the old world", []string{"branch", branch}))

	// The short proposal expires after its quiet period.
	w.r.Clock.Add(7 * time.Hour)
	w.get("/rollbacks", &rbs)
	if r := byID()[short.ID]; r.State != "expired" {
		t.Fatalf("short proposal %+v", r)
	}

	want := expectBranches(w.evs, asOf, activatedAt, branch)
	var got []branchRow
	w.get("/branches", &got)
	if len(got) != 2 {
		t.Fatalf("branches %+v", got)
	}
	for _, b := range got {
		wb := want[b.ID]
		if b.EventCount != wb.EventCount || b.HeadEventID != wb.HeadEventID {
			t.Fatalf("branch %s: got %+v want %+v", b.ID, b, wb)
		}
	}
	if got[0].ID != "main" || got[1].Rollback != good.ID || want["main"].EventCount >= want[branch].EventCount {
		t.Fatalf("branches %+v", got)
	}

	// GET /events: main (the default) leaves the attack out, the
	// pre-rollback branch and all keep it, an unknown branch is empty
	// with a warning header.
	sybilPosts := func(query string) (int, relaytest.Answer) {
		a := w.r.Do(t, "GET", "/events?kinds=1,6&authors="+sybils[0].ID+query, "", nil)
		var evs []json.RawMessage
		if a.Status != 200 || json.Unmarshal(a.Body, &evs) != nil {
			t.Fatalf("GET /events%s: %d %s", query, a.Status, a.Body)
		}
		return len(evs), a
	}
	for query, want := range map[string]int{"": 0, "&branch=main": 0, "&branch=" + branch: 2, "&branch=all": 2, "&branch=main," + branch: 2} {
		if n, _ := sybilPosts(query); n != want {
			t.Fatalf("sybil events with %q: %d, want %d", query, n, want)
		}
	}
	if n, a := sybilPosts("&branch=b-deadbeef"); n != 0 || a.Header.Get("X-ANP-Branch-Unknown") != "b-deadbeef" {
		t.Fatalf("unknown branch: %d events, header %q", n, a.Header.Get("X-ANP-Branch-Unknown"))
	}
	// Omitting branch is branch=main on every query (§11.3.3): a lookup
	// by id collapses the rolled-back event to a placeholder, the raw
	// include_revoked view leaves it out; branch=all returns it.
	placeholder := `["cross-branch","` + attack[0].ID + `","` + branch + `"]`
	full := `"id":"` + attack[0].ID + `"`
	raw := "/events?include_revoked=true&authors=" + sybils[0].ID
	for query, want := range map[string]string{
		"/events?ids=" + attack[0].ID:             placeholder,
		"/events?branch=main&ids=" + attack[0].ID: placeholder,
		"/events?branch=all&ids=" + attack[0].ID:  full,
		raw:                                       "",
		raw + "&branch=main":                      "",
		raw + "&branch=all":                       full,
		raw + "&branch=" + branch:                 full,
	} {
		a := w.r.Do(t, "GET", query, "", nil)
		body := string(a.Body)
		if a.Status != 200 || (want != "" && !strings.Contains(body, want)) || (want == "" && strings.Contains(body, attack[0].ID)) {
			t.Fatalf("%s: %d %s, want %q", query, a.Status, body, want)
		}
	}
	// A thread shows the rolled-back reply as a cross-branch placeholder
	// unless branch=all (§11.3.6).
	if a := w.r.Do(t, "GET", "/events?e="+corePost.ID, "", nil); !strings.Contains(string(a.Body), `["cross-branch","`+reply.ID+`","`+branch+`"]`) {
		t.Fatalf("thread on main: %s", a.Body)
	}
	if a := w.r.Do(t, "GET", "/events?branch=all&e="+corePost.ID, "", nil); !strings.Contains(string(a.Body), `"content":"reply spam"`) {
		t.Fatalf("thread on all: %s", a.Body)
	}
	if a := w.r.Do(t, "GET", "/events?branch=nope", "", nil); a.Status != 400 {
		t.Fatalf("malformed branch: %d", a.Status)
	}
	// GET /stream replays and follows the same branches as GET /events:
	// read a stream until its sentinel (the newest post of that branch)
	// and count the sybil's posts before it.
	afterPost, oldWorld := w.evs[len(w.evs)-2], w.evs[len(w.evs)-1]
	for query, want := range map[string]struct {
		sentinel string
		sybil    int
	}{"": {afterPost.ID, 0}, "&branch=main": {afterPost.ID, 0}, "&branch=" + branch: {oldWorld.ID, 1}} {
		if n := streamUntil(t, w.r.URL+"/stream?after=0&kinds=1&authors="+sybils[0].ID+","+core[1].ID+","+core[2].ID+query, want.sentinel, sybils[0].ID); n != want.sybil {
			t.Fatalf("GET /stream%s: %d sybil posts before the sentinel, want %d", query, n, want.sybil)
		}
	}
	// GET /export keeps the whole log unless a branch is asked for.
	for query, lines := range map[string]int{"": len(w.evs), "?branch=all": len(w.evs), "?branch=main": int(want["main"].EventCount), "?branch=" + branch: int(want[branch].EventCount)} {
		a := w.r.Do(t, "GET", "/export"+query, "", nil)
		if n := strings.Count(string(a.Body), "\n"); a.Status != 200 || n != lines {
			for _, e := range w.evs {
				if !strings.Contains(string(a.Body), `"id":"`+e.ID) {
					t.Logf("not exported: kind %d %s", e.Kind, e.ID)
				}
			}
			t.Fatalf("GET /export%s: %d, %d lines, want %d", query, a.Status, n, lines)
		}
	}
	// GET /state?branch=: main's state is the state of main's events
	// (built here from the rules, independently of the relay), and
	// differs from the pre-rollback branch's.
	var mainState, preState state.Digest
	w.get(fmt.Sprintf("/state?branch=main&at=%d", w.now()), &mainState)
	w.get(fmt.Sprintf("/state?branch=%s&at=%d", branch, w.now()), &preState)
	if mainState.Digest != stateOf(expectMembers(w.evs, asOf, activatedAt, branch)["main"], w.now()) {
		t.Fatal("main's state is not the state of main's events")
	}
	if preState.Digest != stateOf(expectMembers(w.evs, asOf, activatedAt, branch)[branch], w.now()) || preState.Views["trust"] == mainState.Views["trust"] {
		t.Fatal("pre-rollback state")
	}

	// The view routes take ?branch= too: on main, the default, the
	// sybils' votes are gone; on the pre-rollback branch and with all
	// (every event) they count.
	voters := func(r *relaytest.Relay, query string) float64 {
		var tr struct {
			VoterCount float64 `json:"voter_count"`
		}
		(&world{t: t, r: r}).get("/trust/"+sybils[1].ID+query, &tr)
		return tr.VoterCount
	}
	for query, some := range map[string]bool{"": false, "?branch=main": false, "?branch=" + branch: true, "?branch=all": true} {
		if n := voters(w.r, query); (n > 0) != some {
			t.Fatalf("voters of a sybil with %q: %v", query, n)
		}
	}
	for query, status := range map[string]int{"": 404, "?branch=all": 200, "?branch=" + branch: 200, "?branch=main": 404} {
		if a := w.r.Do(t, "GET", "/task/"+sybilTask.ID+query, "", nil); a.Status != status {
			t.Fatalf("GET /task%s: %d, want %d", query, a.Status, status)
		}
	}
	if a := w.r.Do(t, "GET", "/trust_graph?branch=b-00000000", "", nil); a.Status != 404 {
		t.Fatalf("unknown branch: %d", a.Status)
	}
	attackFree(t, w.r, sybils, sybilTask.ID, corePost.ID)

	// A voluntary fork rooted at the core's first post: it inherits the
	// events before it and holds the one tagging it.
	fork := "b-" + corePost.ID[:8]
	inherited := int64(0)
	for _, e := range expectMembers(w.evs, asOf, activatedAt, branch)["main"] {
		if e.CreatedAt < corePost.CreatedAt || e.CreatedAt == corePost.CreatedAt && e.ID < corePost.ID {
			inherited++
		}
	}
	w.post(core[3].Sign(1, w.now(), "a fork of the early days", []string{"branch", fork}))
	w.get("/branches", &got)
	if len(got) != 3 || got[2].ID != fork || got[2].EventCount != inherited+2 {
		t.Fatalf("branches with the fork %+v, want %d events in it", got, inherited+2)
	}

	// A second relay mirroring the first (set reconciliation, POST
	// /sync) and a third fed the same events in another order derive the
	// same branches and the same digests, per branch too.
	mirror, fed := federated(t, "mirror")
	mirror.Clock.Add(time.Duration(w.now()-mirror.Clock.Now().Unix()) * time.Second)
	if res, err := fed.MirrorOnce(context.Background(), w.r.URL, nil); err != nil || res.Rejected != 0 {
		t.Fatalf("mirror: %+v %v", res, err)
	}
	shuffled := relaytest.Start(t, []relay.Module{newModule()})
	shuffled.Clock.Add(time.Duration(w.now()-shuffled.Clock.Now().Unix()) * time.Second)
	order := slices.Clone(w.evs)
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	shuffled.PostAll(t, order, 4)
	for _, other := range []*relaytest.Relay{mirror, shuffled} {
		w2 := &world{t: t, r: other}
		var got2 []branchRow
		w2.get("/branches", &got2)
		if !slices.Equal(got, got2) {
			t.Fatalf("other relay branches %+v, first %+v", got2, got)
		}
		attackFree(t, other, sybils, sybilTask.ID, corePost.ID)
		for query, some := range map[string]bool{"": false, "?branch=" + branch: true} {
			if n := voters(other, query); (n > 0) != some {
				t.Fatalf("other relay: voters of a sybil with %q: %v", query, n)
			}
		}
		for _, b := range []string{"all", "main", branch, fork} {
			var s1, s2 state.Digest
			w.get(fmt.Sprintf("/state?branch=%s&at=%d", b, w.now()), &s1)
			w2.get(fmt.Sprintf("/state?branch=%s&at=%d", b, w.now()), &s2)
			if s1.Views["branches"] == "" || s1.Digest != s2.Digest {
				t.Fatalf("branch %s: state digests differ: %s", b, state.FirstDifference(s1, s2))
			}
		}
	}
}

// attackFree checks that r's views without a branch parameter (main, the
// default) leave the attack out in every view, and that with branch=all
// it is there: trust, the trust graph, votes received, flags, tasks,
// credit and the A2A adapter's task views when r serves it.
func attackFree(t *testing.T, r *relaytest.Relay, sybils []taskstest.Agent, sybilTask, flagged string) {
	t.Helper()
	awaitLive(t, r)
	for _, c := range []struct{ path, attack string }{
		{"/trust_graph?limit=1000", sybils[1].ID},
		{"/agents/" + sybils[1].ID + "/trust_received", `"voter":"`},
		{"/tasks?limit=500", sybilTask},
		{"/events/" + flagged + "/flags", `"flag_count":0`},
		{"/agents/" + sybils[2].ID + "/credit", `"locked":10`},
	} {
		def, all := r.Do(t, "GET", c.path, "", nil), r.Do(t, "GET", c.path+sepFor(c.path)+"branch=all", "", nil)
		if def.Status != 200 || all.Status != 200 {
			t.Fatalf("GET %s: %d, with all %d", c.path, def.Status, all.Status)
		}
		if c.attack == `"flag_count":0` { // the sybils' flags count only with all
			if !strings.Contains(string(def.Body), c.attack) || strings.Contains(string(all.Body), c.attack) {
				t.Fatalf("GET %s: default %s\nall %s", c.path, def.Body, all.Body)
			}
			continue
		}
		if strings.Contains(string(def.Body), c.attack) {
			t.Fatalf("GET %s shows the attack by default: %s", c.path, def.Body)
		}
		if !strings.Contains(string(all.Body), c.attack) {
			t.Fatalf("GET %s with all lacks the attack: %s", c.path, all.Body)
		}
	}
	a2aTasks(t, r, sybilTask)
	// The directory's profile reads the same default state (its trust
	// summary; the checks above saw the sybils' votes with all).
	if a := r.Do(t, "GET", "/agents/"+sybils[1].ID, "", nil); a.Status != 404 && !strings.Contains(string(a.Body), `"voter_count":0}`) {
		t.Fatalf("directory profile of a sybil: %d %s", a.Status, a.Body)
	}
}

// a2aTasks checks the A2A adapter's task views: tasks/get and tasks/list
// leave the rolled-back task out by default and on main, and show it with
// branch=all, given as params.branch or params.metadata.branch; a
// malformed or unknown branch is invalid params.
func a2aTasks(t *testing.T, r *relaytest.Relay, sybilTask string) {
	t.Helper()
	if a := r.Do(t, "GET", "/.well-known/agent-card.json", "", nil); a.Status == 404 {
		return // no A2A adapter on r
	}
	call := func(method, params string) string {
		a := r.Do(t, "POST", "/a2a", "application/json", []byte(`{"jsonrpc":"2.0","id":1,"method":"`+method+`","params":`+params+`}`))
		if a.Status != 200 {
			t.Fatalf("%s %s: %d %s", method, params, a.Status, a.Body)
		}
		return string(a.Body)
	}
	for _, c := range []struct {
		params string
		shown  bool
	}{{``, false}, {`"branch":"main"`, false}, {`"branch":"all"`, true}, {`"metadata":{"branch":"all"}`, true}} {
		get := call("tasks/get", `{"id":"`+sybilTask+`"`+strings.TrimSuffix(","+c.params, ",")+`}`)
		list := call("tasks/list", `{"limit":200`+strings.TrimSuffix(","+c.params, ",")+`}`)
		if strings.Contains(get, `"error"`) == c.shown || strings.Contains(list, sybilTask) != c.shown {
			t.Fatalf("A2A with %s: tasks/get %s\ntasks/list %s", c.params, get, list)
		}
	}
	for _, bad := range []string{`{"branch":"nope"}`, `{"branch":"b-00000000"}`, `{"metadata":{"branch":7}}`} {
		if got := call("tasks/list", bad); !strings.Contains(got, "-32602") {
			t.Fatalf("tasks/list %s: %s", bad, got)
		}
	}
}

func sepFor(path string) string {
	if strings.Contains(path, "?") {
		return "&"
	}
	return "?"
}

// federated starts a relay with its own key running the branches module
// and federation (mounted without its Run: no announcement, no loop; the
// test mirrors once).
func federated(t *testing.T, name string) (*relaytest.Relay, *federation.Module) {
	fed, err := federation.NewModule(federation.Options{})
	if err != nil {
		t.Fatal(err)
	}
	r := relaytest.Start(t, []relay.Module{newModule(), struct{ relay.Module }{fed}, stream.NewModule(), a2a.NewModule(a2a.Options{}), directory.NewModule()},
		func(c *relay.Config) { c.RelayKey = taskstest.NewAgent("relay-" + name).Key })
	return r, fed
}

// expectBranches counts main and the pre-rollback branch from the rules,
// independently of the fold.
func expectBranches(evs []*protocol.Event, asOf, activatedAt int64, pre string) map[string]branchRow {
	out := map[string]branchRow{}
	for b, members := range expectMembers(evs, asOf, activatedAt, pre) {
		var r branchRow
		for _, e := range members {
			r.EventCount++
			if r.HeadEventID == "" || e.CreatedAt > r.head || (e.CreatedAt == r.head && e.ID > r.HeadEventID) {
				r.HeadEventID, r.head = e.ID, e.CreatedAt
			}
		}
		out[b] = r
	}
	return out
}

// stateOf is the state digest at at of evs, folded with the folds the
// relay runs.
func stateOf(evs []*protocol.Event, at int64) string {
	st := state.New(state.Options{Folds: relay.Folds([]relay.Module{branches.NewModule(branches.Options{})})})
	for i, e := range evs {
		st.Add(int64(i+1), e, nil)
	}
	return st.Digest(at).Digest
}

// expectMembers lists main's and the pre-rollback branch's events by the
// rules of SPEC §17.3.
func expectMembers(evs []*protocol.Event, asOf, activatedAt int64, pre string) map[string][]*protocol.Event {
	out := map[string][]*protocol.Event{}
	add := func(b string, e *protocol.Event) { out[b] = append(out[b], e) }
	for _, e := range evs {
		tagged := len(e.TagValues("branch")) > 0
		governance := e.Kind >= 12 && e.Kind <= 14
		inWindow := e.CreatedAt > asOf && e.CreatedAt < activatedAt
		if governance || (!tagged && !inWindow) {
			add("main", e)
		}
		if e.CreatedAt < activatedAt || slices.Contains(e.TagValues("branch"), pre) {
			add(pre, e)
		}
	}
	return out
}

// streamUntil reads the SSE stream at url until the event sentinel and
// returns how many events by author came before it (the test fails if the
// sentinel never comes within 10 s).
func streamUntil(t *testing.T, url, sentinel, author string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET %s: %v %v", url, err, resp)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	n := 0
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var e protocol.Event
		if json.Unmarshal([]byte(data), &e) != nil {
			continue
		}
		if e.ID == sentinel {
			return n
		}
		if e.AgentID == author {
			n++
		}
	}
	t.Fatalf("GET %s: the sentinel %s never came (%v)", url, sentinel, sc.Err())
	return 0
}
