package branches_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay"
	"github.com/anp2net/relay/relay/branches"
	"github.com/anp2net/relay/relay/relaytest"
	"github.com/anp2net/relay/relay/sqlite"
	"github.com/anp2net/relay/relay/state"
	"github.com/anp2net/relay/tasks/taskstest"
	"github.com/anp2net/relay/trust"
)

// rolledBack is a relay after an activated rollback: its trusted core,
// the sybils whose attack the rollback left out, and the pre-rollback
// branch.
type rolledBack struct {
	*world
	core, sybils []taskstest.Agent
	attack       []*protocol.Event
	pre          string
}

// rollBack publishes on w a trusted core, a valid checkpoint, an attack by
// nSybils agents (posts, votes, a task) and a rollback endorsed by four of
// the six core agents, and moves the clock past its activation.
func rollBack(w *world, nSybils int) *rolledBack { return proposeRollback(w, nSybils, true) }

// proposeRollback is rollBack; with activate false the proposal is
// endorsed by two of the six only and never activates.
func proposeRollback(w *world, nSybils int, activate bool) *rolledBack {
	t := w.t
	rb := &rolledBack{world: w, core: vouchingCore(w, 6)}
	w.r.Clock.Add(time.Hour)
	asOf := trust.EvalTime(w.now())
	w.r.Clock.Add(time.Minute)
	var draft branches.Checkpoint
	w.get(fmt.Sprintf("/checkpoints/draft?as_of=%d&checkpoint_id=cp-live", asOf), &draft)
	content, _ := json.Marshal(draft)
	w.post(rb.core[0].Sign(12, w.now(), string(content), cosigns(t, 12, string(content), rb.core[1], rb.core[2])...))
	w.r.Clock.Add(time.Hour)
	for i := range nSybils {
		s := taskstest.NewAgent(fmt.Sprintf("live-sybil-%d", i))
		rb.sybils = append(rb.sybils, s)
		rb.attack = append(rb.attack, s.Sign(1, w.now(), "buy now"),
			s.Sign(6, w.now(), `{"score":1}`, []string{"p", taskstest.NewAgent(fmt.Sprintf("live-sybil-%d", (i+1)%nSybils)).ID}),
			s.Sign(7, w.now(), `{"category":"spam"}`, []string{"e", w.evs[0].ID}, []string{"p", rb.core[0].ID}))
	}
	rb.attack = append(rb.attack, taskstest.Request(rb.sybils[0], w.now(), w.now()+86400, taskstest.Reward{}, false))
	w.post(rb.attack...)
	w.r.Clock.Add(time.Minute)
	rc := `{"target_checkpoint":"cp-live","reason":"sybil attack"}`
	endorsers := rb.core[1:4]
	if !activate {
		endorsers = rb.core[1:2]
	}
	good := rb.core[0].Sign(13, w.now(), rc, cosigns(t, 13, rc, endorsers...)...)
	w.post(good)
	rb.pre = "pre-rollback-" + good.ID[:8]
	w.r.Clock.Add(time.Minute)
	return rb
}

// digestOf is the state digest at at of st, without the relay-local seq.
func digestOf(st *state.State, at int64) state.Digest {
	d := st.Digest(at)
	d.Seq = 0
	return d
}

// awaitLive waits until r's default views answer from the live state of
// the preferred branch, current for its view: Run builds it in the
// background (readers never wait for a rebuild: they get the state last
// built, or every event, meanwhile). The state ?branch=<preferred> answers
// from is the live one exactly when that is current.
func awaitLive(t *testing.T, r *relaytest.Relay) {
	t.Helper()
	pref := r.Core.Config().PreferredBranch
	if pref == "" {
		pref = "main"
	}
	ctx := context.Background()
	relaytest.Eventually(t, "the preferred branch's live state", func() bool {
		def, err := r.Core.ViewState(ctx, "")
		if err != nil || def == r.Core.State() {
			return false
		}
		via, err := r.Core.ViewState(ctx, pref)
		return err == nil && via == def
	})
}

// rebuilt is branch's state at at rebuilt from m's log with fresh folds,
// as GET /state?branch= computes it when no live state holds the branch.
func (w *world) rebuilt(m *branches.Module, branch string, at int64) state.Digest {
	w.t.Helper()
	v := m.View(w.now())
	opts := state.Options{Folds: relay.Folds([]relay.Module{branches.NewModule(branches.Options{})})}
	d, err := branches.BranchState(&v, branch, at, opts, branches.LogEvents(context.Background(), w.r.Core.Log()))
	if err != nil {
		w.t.Fatal(err)
	}
	d.Seq = 0
	return d
}

// served is GET /state?branch=&at=.
func (w *world) served(branch string, at int64) state.Digest {
	var d state.Digest
	w.get(fmt.Sprintf("/state?branch=%s&at=%d", branch, at), &d)
	d.Seq = 0
	return d
}

// TestLiveMainEqualsRebuilt drives one relay through a rollback and then
// rounds of random events (untagged, tagged for main, for the pre-rollback
// branch or a voluntary fork, dated inside the rolled-back span, votes,
// flags, tasks, revocations inside and outside main): after every round
// the state the views answer from by default (kept current incrementally)
// equals main's state rebuilt from the log, without any further rebuild;
// a relay restarted on the same log rebuilds the same state at start.
func TestLiveMainEqualsRebuilt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "relay.db")
	st, err := sqlite.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	mod := newModule()
	w := &world{t: t, r: relaytest.On(t, st, []relay.Module{mod})}
	ctx := context.Background()
	defaultState := func(r *relaytest.Relay) *state.State {
		s, err := r.Core.ViewState(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	vouchingCore(w, 3)
	if defaultState(w.r) != w.r.Core.State() {
		t.Fatal("without a rollback the views must answer from the relay's own state")
	}
	rb := rollBack(w, 30)
	awaitLive(t, w.r) // Run builds main's state in the background
	if defaultState(w.r) == w.r.Core.State() {
		t.Fatal("after the rollback the views must answer from main's state")
	}
	if got, want := digestOf(defaultState(w.r), w.now()), w.rebuilt(mod, "main", w.now()); got.Digest != want.Digest {
		t.Fatalf("after activation: %s", state.FirstDifference(got, want))
	}
	builds := mod.LiveBuilds()
	rng := rand.New(rand.NewPCG(7, 16))
	agents := append(append([]taskstest.Agent{}, rb.core...), rb.sybils[:5]...)
	for round := range 6 {
		w.r.Clock.Add(time.Minute)
		var batch []*protocol.Event
		for range 25 {
			batch = append(batch, randomEvent(rng, rb, agents, w.now()))
		}
		w.post(batch...)
		w.r.Clock.Add(time.Minute)
		got, want := digestOf(defaultState(w.r), w.now()), w.rebuilt(mod, "main", w.now())
		if got.Digest != want.Digest || got.Events != want.Events {
			t.Fatalf("round %d: the live state differs from the rebuilt one: %s", round, state.FirstDifference(got, want))
		}
		if served := w.served("main", w.now()); served.Digest != got.Digest {
			t.Fatalf("round %d: GET /state?branch=main is not the live state", round)
		}
		if got.Digest == digestOf(w.r.Core.State(), w.now()).Digest {
			t.Fatalf("round %d: main's state is every event's", round)
		}
	}
	if mod.LiveBuilds() != builds {
		t.Fatalf("%d rebuilds after the first: the state must be kept current, not rebuilt", mod.LiveBuilds()-builds)
	}
	// The default view routes answer like ?branch=main.
	for _, path := range []string{"/trust_graph", "/trust/" + rb.sybils[1].ID, "/tasks", "/events/" + w.evs[0].ID + "/flags",
		"/agents/" + rb.sybils[0].ID + "/credit", "/agents/" + rb.sybils[1].ID + "/trust_received"} {
		sep := "?"
		if path == "/tasks" {
			sep = "?limit=500&"
		}
		def := w.r.Do(t, "GET", path+sep[:len(sep)-1], "", nil)
		onMain := w.r.Do(t, "GET", path+sep+"branch=main", "", nil)
		if def.Status != 200 || string(def.Body) != string(onMain.Body) {
			t.Fatalf("GET %s: default %d %s\nmain %d %s", path, def.Status, def.Body, onMain.Status, onMain.Body)
		}
	}

	// A restart on the same log rebuilds the same state at start.
	want := digestOf(defaultState(w.r), w.now())
	st.Close()
	st2, err := sqlite.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st2.Close() })
	mod2 := newModule()
	again := relaytest.On(t, st2, []relay.Module{mod2})
	again.Clock.Add(time.Duration(w.now()-again.Clock.Now().Unix()) * time.Second)
	awaitLive(t, again)
	if got := digestOf(defaultState(again), w.now()); got.Digest != want.Digest {
		t.Fatalf("after a restart: %s", state.FirstDifference(got, want))
	}
	// ... and keeps it current from there.
	w2 := &world{t: t, r: again, evs: w.evs}
	rb.world = w2
	w2.r.Clock.Add(time.Minute)
	var batch []*protocol.Event
	for range 25 {
		batch = append(batch, randomEvent(rng, rb, agents, w2.now()))
	}
	w2.post(batch...)
	w2.r.Clock.Add(time.Minute)
	if got, want := digestOf(defaultState(again), w2.now()), w2.rebuilt(mod2, "main", w2.now()); got.Digest != want.Digest {
		t.Fatalf("after a restart and more events: %s", state.FirstDifference(got, want))
	}
}

// randomEvent returns one event published after the rollback: a post
// (untagged, or tagged main, the pre-rollback branch, a fork or both), a
// vote, a flag, a task, a revocation of an earlier event of its author,
// or a post dated inside the rolled-back span.
func randomEvent(rng *rand.Rand, rb *rolledBack, agents []taskstest.Agent, now int64) *protocol.Event {
	a := agents[rng.IntN(len(agents))]
	forks := []string{"b-0123abcd", "b-89abcdef"}
	switch rng.IntN(9) {
	case 0:
		return a.Sign(1, now, "plain", []string{"t", "x"})
	case 1:
		return a.Sign(1, now, "on main", []string{"branch", "main"})
	case 2:
		return a.Sign(1, now, "on the old world", []string{"branch", rb.pre})
	case 3:
		return a.Sign(1, now, "on a fork", []string{"branch", forks[rng.IntN(2)]}, []string{"branch", "main"})
	case 4:
		b := agents[rng.IntN(len(agents))]
		return a.Sign(6, now, fmt.Sprintf(`{"score":%.1f}`, rng.Float64()*2-1), []string{"p", b.ID})
	case 5:
		e := rb.evs[rng.IntN(len(rb.evs))]
		return a.Sign(7, now, `{"category":"spam"}`, []string{"e", e.ID}, []string{"p", e.AgentID})
	case 6:
		return taskstest.Request(a, now, now+3600, taskstest.Reward{}, false)
	case 7:
		for range 20 { // revoke one of its own earlier events, in main or not
			if e := rb.evs[rng.IntN(len(rb.evs))]; e.AgentID == a.ID && e.Kind != protocol.KindRevoke {
				return a.Sign(9, now, "", []string{"e", e.ID})
			}
		}
		return a.Sign(1, now, "nothing to revoke")
	default:
		return a.Sign(1, rb.attack[0].CreatedAt+1, "late, inside the rolled-back span")
	}
}

// TestLivePreferredFork: a relay serving a voluntary fork by default
// (serve --branch b-…) answers its views from the fork's state — the root's
// history, the root, and the events tagging the fork, not main's later
// events — kept current as events commit, equal to the fork's state
// rebuilt from the log. A relay preferring main with forks but no rollback
// leaves the fork-only events out of its default views.
func TestLivePreferredFork(t *testing.T) {
	core := make([]taskstest.Agent, 4)
	for i := range core {
		core[i] = taskstest.NewAgent(fmt.Sprintf("fork-core-%d", i))
	}
	base := int64(relaytest.VectorTime)
	root := core[0].Sign(1, base+10, "the fork starts here")
	fork := "b-" + root.ID[:8]
	mod := newModule()
	w := &world{t: t, r: relaytest.Start(t, []relay.Module{mod}, func(c *relay.Config) { c.PreferredBranch = fork })}
	onMain := newModule()
	m := &world{t: t, r: relaytest.Start(t, []relay.Module{onMain})}
	vote := func(from, to taskstest.Agent, at int64, tags ...[]string) *protocol.Event {
		return from.Sign(6, at, `{"score":1}`, append([][]string{{"p", to.ID}}, tags...)...)
	}
	before := vote(core[1], core[2], base+5)
	after := vote(core[3], core[2], base+20)                            // main only: after the root, untagged
	tagged := vote(core[0], core[2], base+30, []string{"branch", fork}) // the fork only
	for _, r := range []*world{w, m} {
		r.post(before, root, after, tagged)
		r.r.Clock.Add(time.Minute)
		awaitLive(t, r.r)
	}
	voters := func(r *world, query string) []string {
		var tr struct {
			Votes []struct {
				From string `json:"from"`
			} `json:"votes"`
		}
		r.get("/trust/"+core[2].ID+query, &tr)
		var out []string
		for _, v := range tr.Votes {
			out = append(out, v.From)
		}
		slices.Sort(out)
		return out
	}
	onFork, onMainVoters := []string{core[1].ID, core[0].ID}, []string{core[1].ID, core[3].ID}
	slices.Sort(onFork)
	slices.Sort(onMainVoters)
	for _, c := range []struct {
		r     *world
		query string
		want  []string
	}{{w, "", onFork}, {w, "?branch=" + fork, onFork}, {w, "?branch=main", onMainVoters}, {m, "", onMainVoters}, {m, "?branch=" + fork, onFork}} {
		if got := voters(c.r, c.query); !slices.Equal(got, c.want) {
			t.Fatalf("voters with %q: %v, want %v", c.query, got, c.want)
		}
	}
	live := func(r *world, m *branches.Module, branch string) {
		t.Helper()
		st, err := r.r.Core.ViewState(context.Background(), "")
		if err != nil {
			t.Fatal(err)
		}
		if got, want := digestOf(st, r.now()), r.rebuilt(m, branch, r.now()); got.Digest != want.Digest {
			t.Fatalf("%s: live %s", branch, state.FirstDifference(got, want))
		}
	}
	live(w, mod, fork)
	live(m, onMain, "main")
	builds := mod.LiveBuilds()
	for i := range 3 {
		w.r.Clock.Add(time.Minute)
		w.post(vote(core[i], core[3], w.now(), []string{"branch", fork}), vote(core[3], core[i], w.now()))
		w.r.Clock.Add(time.Minute)
		live(w, mod, fork)
	}
	if mod.LiveBuilds() != builds {
		t.Fatalf("%d rebuilds: the fork's state must be kept current", mod.LiveBuilds()-builds)
	}
}

// TestLiveTagRevokeAttack: an agent tagging a fork and revoking the tag
// (the fork appears, then vanishes) over and over costs main's live state
// one build, not one per pair: a vanishing fork changes no membership. The
// state stays equal to main's rebuilt from the log.
func TestLiveTagRevokeAttack(t *testing.T) {
	mod := newModule()
	w := &world{t: t, r: relaytest.Start(t, []relay.Module{mod})}
	vouchingCore(w, 3)
	a := taskstest.NewAgent("tag-revoke")
	for i := range 5 {
		w.r.Clock.Add(time.Minute)
		tag := a.Sign(1, w.now(), fmt.Sprintf("fork %d", i), []string{"branch", fmt.Sprintf("b-%08x", 0xabc000+i)})
		w.post(tag)
		awaitLive(t, w.r) // each pair gets the time to rebuild, were one needed
		w.post(a.Sign(9, w.now(), "", []string{"e", tag.ID}))
		if st, err := w.r.Core.ViewState(context.Background(), ""); err != nil || st != w.r.Core.State() {
			t.Fatalf("pair %d: with no fork left the views must answer from the relay's own state (%v)", i, err)
		}
	}
	w.r.Clock.Add(time.Minute)
	w.post(a.Sign(1, w.now(), "a fork that stays", []string{"branch", "b-00abcdef"}), a.Sign(1, w.now(), "on main"))
	awaitLive(t, w.r)
	st, _ := w.r.Core.ViewState(context.Background(), "")
	if got, want := digestOf(st, w.now()), w.rebuilt(mod, "main", w.now()); got.Digest != want.Digest || got.Events != want.Events {
		t.Fatalf("main's live state: %s", state.FirstDifference(got, want))
	}
	if n := mod.LiveBuilds(); n != 1 {
		t.Fatalf("%d builds of main's state for 5 tag+revoke pairs, want 1", n)
	}
}

// TestLiveRebuildsBounded: a change of the preferred branch's membership
// (here the preferred fork appearing and vanishing as its only tag is
// published and revoked) rebuilds its state at most once per
// LiveRebuildEvery, and view reads never wait for a rebuild — not even
// while one holds the rebuild lock — answering from the state last built.
func TestLiveRebuildsBounded(t *testing.T) {
	fork := "b-00fedcba"
	// An interval no run of this test can outlast on a loaded machine, so
	// the bound below does not depend on how fast the loop runs.
	mod := branches.NewModule(branches.Options{LiveRebuildEvery: time.Hour})
	w := &world{t: t, r: relaytest.Start(t, []relay.Module{mod}, func(c *relay.Config) { c.PreferredBranch = fork })}
	relaytest.Eventually(t, "the first build", func() bool { return mod.LiveBuilds() == 1 })
	a := taskstest.NewAgent("tag-revoke-preferred")
	read := func() {
		t.Helper()
		done := make(chan error, 1)
		go func() {
			_, err := w.r.Core.ViewState(context.Background(), "")
			done <- err
		}()
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(30 * time.Second): // a guard against a hang, not a timing assertion
			t.Fatal("a view read waited for the rebuild")
		}
	}
	release := mod.HoldRebuild()
	for i := range 5 {
		tag := a.Sign(1, w.now(), fmt.Sprintf("on the preferred fork %d", i), []string{"branch", fork})
		w.post(tag)
		read()
		w.post(a.Sign(9, w.now(), "", []string{"e", tag.ID}))
		read()
	}
	release()
	if n := mod.LiveBuilds(); n > 2 {
		t.Fatalf("%d builds for 5 tag+revoke pairs within the rebuild interval, want at most 2", n)
	}
}
