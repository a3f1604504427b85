package tiers_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay"
	"github.com/anp2net/relay/relay/eventlog"
	"github.com/anp2net/relay/relay/federation"
	"github.com/anp2net/relay/relay/relaytest"
	"github.com/anp2net/relay/relay/sqlite"
	"github.com/anp2net/relay/relay/tiers"
	"github.com/anp2net/relay/tasks/taskstest"
)

// powRequired restores the mandatory PoW of kinds 0 and 50 (relaytest
// turns it off) from the start of time, so it applies at the test clock.
func powRequired(c *relay.Config) {
	c.Checker.PoW = protocol.DefaultPoWPolicy()
	c.Checker.PoW.ActiveFrom = 0
}

// mined mines e to bits and signs it again by a.
func mined(t testing.TB, a taskstest.Agent, e *protocol.Event, bits int) *protocol.Event {
	t.Helper()
	if err := protocol.Mine(context.Background(), e, bits); err != nil {
		t.Fatal(err)
	}
	e.Sign(a.Key)
	return e
}

// withPoWTag returns a kind 50 by a carrying ["pow", declared] whose id has
// at least found zero bits (mined to found, then the tag rewritten).
func lowPoWRequest(t *testing.T, a taskstest.Agent, at int64, bits int) *protocol.Event {
	t.Helper()
	return mined(t, a, taskstest.Request(a, at, at+3600, taskstest.Reward{}, false), bits)
}

// cast names the agents of a standing scenario.
type cast struct {
	requester, provider, lone, v1, v2, voter, nobody taskstest.Agent
}

func newCast() cast {
	p := taskstest.Pool(7)
	return cast{requester: p[0], provider: p[1], lone: p[2], v1: p[3], v2: p[4], voter: p[5], nobody: p[6]}
}

// standingOn bypass-enabled options with a threshold of two tasks and
// two verifiers.
func standingOn() tiers.StandingOptions {
	o := tiers.DefaultStandingOptions()
	o.Bypass, o.Threshold, o.MinVerifiers = true, 2, 2
	return o
}

func tiersWith(t testing.TB, o tiers.StandingOptions) *tiers.Module {
	t.Helper()
	opts := tiers.DefaultOptions()
	opts.Enabled = false
	m := tiers.NewModule(opts)
	if err := m.ConfigureStanding(o); err != nil {
		t.Fatal(err)
	}
	return m
}

// history is the events that give c.provider two tasks passed by v1 and
// v2 (both trusted by voter), and c.lone two tasks passed by v1 alone. It
// returns them and the verdicts of v2.
func (c cast) history(t testing.TB, at int64) (evs, byV2 []*protocol.Event) {
	t.Helper()
	evs = append(evs,
		c.voter.Sign(protocol.KindTrustVote, at, map[string]any{"score": 1}, []string{"p", c.v1.ID}),
		c.voter.Sign(protocol.KindTrustVote, at, map[string]any{"score": 1}, []string{"p", c.v2.ID}))
	for i := range 4 {
		prov := c.provider
		if i >= 2 {
			prov = c.lone
		}
		ts := at + int64(10*i)
		req := mined(t, c.requester, taskstest.Request(c.requester, ts, ts+3600, taskstest.Reward{Amount: 10 + i}, false), 12)
		evs = append(evs, req, taskstest.Accept(prov, ts+1, req), taskstest.Result(prov, ts+2, req),
			taskstest.Verify(c.v1, ts+3, req, protocol.VerdictPassed, 0.9))
		if prov.ID == c.provider.ID {
			v := taskstest.Verify(c.v2, ts+4, req, protocol.VerdictPassed, 0.9)
			evs, byV2 = append(evs, v), append(byV2, v)
		}
	}
	return evs, byV2
}

func postOK(t testing.TB, r *relaytest.Relay, evs ...*protocol.Event) {
	t.Helper()
	for _, e := range evs {
		if ans := r.Post(t, e); ans.Status != 200 {
			t.Fatalf("kind %d: %d %s", e.Kind, ans.Status, ans.Body)
		}
	}
}

func expect400(t *testing.T, ans relaytest.Answer, code string) {
	t.Helper()
	if ans.Status != 400 || ans.Code(t) != code {
		t.Fatalf("want 400 %s, got %d %s", code, ans.Status, ans.Body)
	}
}

func standingOf(t *testing.T, r *relaytest.Relay, a taskstest.Agent) map[string]any {
	t.Helper()
	return r.Do(t, "GET", "/agents/"+a.ID+"/standing", "", nil).JSON(t)
}

func TestStandingPoWBypass(t *testing.T) {
	c := newCast()
	on := relaytest.Start(t, []relay.Module{tiersWith(t, standingOn())}, powRequired)
	off := relaytest.Start(t, []relay.Module{tiersWith(t, tiers.DefaultStandingOptions())}, powRequired)
	at := on.Clock.Now().Unix() - 600
	evs, _ := c.history(t, at)
	postOK(t, on, evs...)
	postOK(t, off, evs...)

	now := on.Clock.Now().Unix()
	unmined := func(a taskstest.Agent, n int) *protocol.Event {
		return taskstest.Request(a, now, now+3600, taskstest.Reward{Amount: 100 + n}, false)
	}
	// Flag off: a high-standing agent's unmined request is refused.
	expect400(t, off.Post(t, unmined(c.provider, 0)), protocol.CodePoWRequired)
	if s := standingOf(t, off, c.provider); s["meets_threshold"] != false || s["pow_bypass"] != false {
		t.Fatalf("standing with the defaults (threshold 100): %v", s)
	}

	// Flag on: accepted, and so is a profile and a pow tag below 12.
	s := standingOf(t, on, c.provider)
	if s["confirmed_provider_tasks"] != float64(2) || s["verified_provider_tasks"] != float64(2) || s["pow_bypass"] != true {
		t.Fatalf("provider's standing: %v", s)
	}
	postOK(t, on, unmined(c.provider, 1),
		c.provider.Sign(protocol.KindProfile, now, map[string]any{"name": "provider"}),
		lowPoWRequest(t, c.provider, now+1, 3))
	// A pow tag claiming more than the id holds is still refused.
	over := unmined(c.provider, 2)
	over.Tags = append(over.Tags, []string{"pow", "40"})
	over.Sign(c.provider.Key)
	expect400(t, on.Post(t, over), protocol.CodePoWNotMet)
	// The kind rules still apply to a bypassed event.
	bad := c.provider.Sign(protocol.KindTaskRequest, now, `{"capability": 5}`)
	if ans := on.Post(t, bad); ans.Status != 400 || ans.Code(t) == protocol.CodePoWRequired {
		t.Fatalf("a malformed request: %d %s", ans.Status, ans.Body)
	}

	// A dry run agrees with the publish.
	dry := func(e *protocol.Event) map[string]any {
		return on.Do(t, "POST", "/events/dry-run", "application/json", protocol.AppendJSON(nil, e)).JSON(t)
	}
	if d := dry(unmined(c.provider, 6)); d["valid"] != true {
		t.Fatalf("dry run of a bypassed request: %v", d)
	}
	if d := dry(unmined(c.nobody, 7)); d["valid"] != false || !strings.Contains(fmt.Sprint(d["violations"]), protocol.CodePoWRequired) {
		t.Fatalf("dry run of a low-standing request: %v", d)
	}

	// In a batch, the bypass answers each event alone.
	batch := []*protocol.Event{unmined(c.provider, 8), unmined(c.nobody, 9), c.nobody.Sign(protocol.KindPost, now, "hello")}
	ba := on.Do(t, "POST", "/events/batch", "application/json", batchBody(batch...)).JSON(t)
	res, _ := ba["results"].([]any)
	code := func(i int) any { return res[i].(map[string]any)["code"] }
	status := func(i int) any { return res[i].(map[string]any)["status"] }
	if ba["accepted"] != float64(2) || ba["rejected"] != float64(1) || status(0) != float64(200) ||
		status(1) != float64(400) || code(1) != protocol.CodePoWRequired || status(2) != float64(200) {
		t.Fatalf("batch: %v", ba)
	}

	// Low standing: nobody has no tasks; lone's two tasks were passed by
	// one trusted verifier only, short of the two the consensus needs.
	expect400(t, on.Post(t, unmined(c.nobody, 3)), protocol.CodePoWRequired)
	expect400(t, on.Post(t, unmined(c.lone, 4)), protocol.CodePoWRequired)
	if s := standingOf(t, on, c.lone); s["verified_provider_tasks"] != float64(2) || s["confirmed_provider_tasks"] != float64(0) {
		t.Fatalf("lone's standing: %v", s)
	}

	// A negative vote that takes v2's trust to zero or below drops the
	// provider's standing at once (the commit-time check computes trust
	// for the current votes).
	// Sent in one batch with the request, the vote passes the pre-check's
	// stale snapshot but not the check at commit, which sees it.
	ba = on.Do(t, "POST", "/events/batch", "application/json", batchBody(
		c.voter.Sign(protocol.KindTrustVote, now+2, map[string]any{"score": -1}, []string{"p", c.v2.ID}),
		unmined(c.provider, 5))).JSON(t)
	res, _ = ba["results"].([]any)
	if status(0) != float64(200) || status(1) != float64(400) || code(1) != protocol.CodePoWRequired {
		t.Fatalf("vote and request in one batch: %v", ba)
	}
	// Alone too (the published snapshot may still trail the vote: the
	// check at commit refuses it then).
	expect400(t, on.Post(t, unmined(c.provider, 10)), protocol.CodePoWRequired)
	metrics := string(on.Do(t, "GET", "/metrics", "", nil).Body)
	if metricValue(metrics, "anp2_pow_bypassed_total") != 4 || metricValue(metrics, "anp2_pow_bypass_refused_at_commit_total") < 1 {
		t.Fatalf("metrics: want 4 bypassed publishes and refusals at commit:\n%s", grepLines(metrics, "pow_bypass"))
	}
}

func batchBody(evs ...*protocol.Event) []byte {
	body := []byte("[")
	for i, e := range evs {
		if i > 0 {
			body = append(body, ',')
		}
		body = protocol.AppendJSON(body, e)
	}
	return append(body, ']')
}

// metricValue returns the value of the unlabelled metric name, or -1.
func metricValue(metrics, name string) int {
	for _, l := range strings.Split(metrics, "\n") {
		if v, ok := strings.CutPrefix(l, name+" "); ok {
			n, err := strconv.Atoi(v)
			if err == nil {
				return n
			}
		}
	}
	return -1
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func TestStandingOptionsValidate(t *testing.T) {
	for _, c := range []struct {
		name string
		o    tiers.StandingOptions
		err  string
	}{
		{"defaults", tiers.DefaultStandingOptions(), ""},
		{"bypass with one verifier", tiers.StandingOptions{Bypass: true, Threshold: 100, MinVerifiers: 1}, "multi-verifier consensus"},
		{"bypass with two verifiers", tiers.StandingOptions{Bypass: true, Threshold: 100, MinVerifiers: 2}, ""},
		{"zero threshold", tiers.StandingOptions{Threshold: 0, MinVerifiers: 2}, "threshold"},
		{"zero verifiers", tiers.StandingOptions{Threshold: 1, MinVerifiers: 0}, "min-verifiers"},
	} {
		err := c.o.Validate()
		if c.err == "" && err != nil || c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)) {
			t.Errorf("%s: Validate() = %v, want %q", c.name, err, c.err)
		}
	}
	if d := tiers.DefaultStandingOptions(); d.Bypass || d.Threshold != 100 {
		t.Fatalf("defaults %+v: the bypass must be off and the threshold the seed's 100", d)
	}
}

// TestStandingDropRace publishes unmined requests of a high-standing agent
// while one of the verdicts its standing rests on is revoked. Whatever the
// interleaving, no bypassed event may be stored after the revocation: the
// standing is judged under the writer lock with every earlier commit
// folded.
func TestStandingDropRace(t *testing.T) {
	c := newCast()
	r := relaytest.Start(t, []relay.Module{tiersWith(t, standingOn())}, powRequired)
	at := r.Clock.Now().Unix() - 600
	evs, byV2 := c.history(t, at)
	postOK(t, r, evs...)
	now := r.Clock.Now().Unix()
	revoke := c.v2.Sign(protocol.KindRevoke, now, "", []string{"e", byV2[0].ID})

	const n = 48
	reqs := make([]*protocol.Event, n)
	for i := range reqs {
		reqs[i] = taskstest.Request(c.provider, now, now+3600, taskstest.Reward{Amount: 1000 + i}, false)
	}
	status := make([]int, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range reqs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			status[i] = r.Post(t, reqs[i]).Status
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		<-start
		if ans := r.Post(t, revoke); ans.Status != 200 {
			t.Errorf("revoke: %d %s", ans.Status, ans.Body)
		}
	}()
	close(start)
	wg.Wait()

	ctx := context.Background()
	rv, err := r.Store.Get(ctx, revoke.ID)
	if err != nil {
		t.Fatal(err)
	}
	accepted := 0
	for i, e := range reqs {
		switch status[i] {
		case 200:
			accepted++
			st, err := r.Store.Get(ctx, e.ID)
			if err != nil {
				t.Fatal(err)
			}
			if st.Seq > rv.Seq {
				t.Errorf("request %d bypassed PoW at seq %d, after the revocation at seq %d", i, st.Seq, rv.Seq)
			}
		case 400:
		default:
			t.Errorf("request %d: status %d", i, status[i])
		}
	}
	t.Logf("%d of %d bypassed before the revocation", accepted, n)
	// After it, the standing is one task, below the threshold of two.
	expect400(t, r.Post(t, taskstest.Request(c.provider, now, now+3600, taskstest.Reward{Amount: 5000}, false)), protocol.CodePoWRequired)
}

// TestBypassedEventsStayLocal: the relay that admitted a bypassed request
// keeps it; a peer mirroring it, with the bypass off or on, judges the
// event by its own proof of work like every mirrored event and refuses
// it, while everything else mirrors.
func TestBypassedEventsStayLocal(t *testing.T) {
	c := newCast()
	relayOf := func(name string, o tiers.StandingOptions) (*relaytest.Relay, *federation.Module) {
		fed, err := federation.NewModule(federation.Options{})
		if err != nil {
			t.Fatal(err)
		}
		r := relaytest.Start(t, []relay.Module{tiersWith(t, o), struct{ relay.Module }{fed}}, powRequired,
			func(cfg *relay.Config) { cfg.RelayKey = taskstest.NewAgent("relay-" + name).Key })
		return r, fed
	}
	a, _ := relayOf("a", standingOn())
	b, fedB := relayOf("b", standingOn())
	plain, fedPlain := relayOf("plain", tiers.DefaultStandingOptions())
	evs, _ := c.history(t, a.Clock.Now().Unix()-600)
	postOK(t, a, evs...)
	now := a.Clock.Now().Unix()
	bypassed := taskstest.Request(c.provider, now, now+3600, taskstest.Reward{Amount: 77}, false)
	postOK(t, a, bypassed)

	// A peer without the bypass and one with it refuse it alike.
	for _, p := range []struct {
		r   *relaytest.Relay
		fed *federation.Module
	}{{plain, fedPlain}, {b, fedB}} {
		res, err := p.fed.MirrorOnce(context.Background(), a.URL, nil)
		if err != nil {
			t.Fatal(err)
		}
		if res.Rejected != 1 || res.Accepted != len(evs) {
			t.Fatalf("mirror: %+v, want %d accepted and the bypassed event rejected", res, len(evs))
		}
		if ans := p.r.Do(t, "GET", "/events/"+bypassed.ID, "", nil); ans.Status != 404 {
			t.Fatalf("the mirroring relay holds the bypassed event: %d", ans.Status)
		}
	}
	if ans := a.Do(t, "GET", "/events/"+bypassed.ID, "", nil); ans.Status != 200 {
		t.Fatalf("the admitting relay lost it: %d", ans.Status)
	}
	// B has the same history, so the provider's standing is the same
	// there: a direct publish to B is bypassed, a mirrored copy never.
	if s := standingOf(t, b, c.provider); s["pow_bypass"] != true {
		t.Fatalf("standing on the mirror: %v", s)
	}
	if _, rejected, err := b.Core.IngestMirrored(context.Background(), []*protocol.Event{bypassed}); err != nil || rejected != 1 {
		t.Fatalf("IngestMirrored: rejected %d, %v", rejected, err)
	}
	postOK(t, b, bypassed)
}

// TestBypassNeedsAWriterLock: over a log that cannot judge a rule under
// its writer lock (here the real SQLite log seen only through the
// eventlog.Log interface, as a PostgreSQL log is), a relay with the bypass
// on refuses to start.
func TestBypassNeedsAWriterLock(t *testing.T) {
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "relay.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	cfg := relaytest.Config(relaytest.NewClock(relaytest.VectorTime))
	cfg.Modules = []relay.Module{tiersWith(t, standingOn())}
	if _, err := relay.New(cfg, struct{ eventlog.Log }{st}); err == nil || !strings.Contains(err.Error(), "writer lock") {
		t.Fatalf("relay.New over a log without Admits: %v", err)
	}
	cfg.Modules = []relay.Module{tiersWith(t, standingOn())}
	if _, err := relay.New(cfg, st); err != nil {
		t.Fatalf("over the SQLite log itself: %v", err)
	}
}

// TestHiddenAgentLosesBypass: seed §8.2 — the relay re-enables PoW for an
// agent whose event moderation hides.
func TestHiddenAgentLosesBypass(t *testing.T) {
	c := newCast()
	r := relaytest.Start(t, []relay.Module{tiersWith(t, standingOn())}, powRequired)
	evs, _ := c.history(t, r.Clock.Now().Unix()-600)
	postOK(t, r, evs...)
	now := r.Clock.Now().Unix()
	post := c.provider.Sign(protocol.KindPost, now, "buy my tokens")
	postOK(t, r, post, taskstest.Request(c.provider, now, now+3600, taskstest.Reward{Amount: 50}, false))
	for _, f := range taskstest.Pool(10)[7:] {
		postOK(t, r, f.Sign(protocol.KindFlag, now, map[string]any{"category": "spam"}, []string{"e", post.ID}, []string{"p", c.provider.ID}))
	}
	// Moderation, like trust, is evaluated at the start of the minute
	// (§5.1): the flags count from the next one, and the check at commit
	// sees them then, whatever the published snapshot says.
	r.Clock.Add(time.Minute)
	now += 60
	expect400(t, r.Post(t, taskstest.Request(c.provider, now, now+3600, taskstest.Reward{Amount: 51}, false)), protocol.CodePoWRequired)
	relaytest.Eventually(t, "the hidden post in the published standing", func() bool {
		s := standingOf(t, r, c.provider)
		return s["hidden_events"] == float64(1) && s["pow_bypass"] == false && s["confirmed_provider_tasks"] == float64(2)
	})
}

// TestBypassAfterAddressCharge: forged requests in a high-standing agent's
// name are refused on their signature and still cost their address its
// allowance (SPEC §1.3 step 4a comes before the bypass).
func TestBypassAfterAddressCharge(t *testing.T) {
	c := newCast()
	r := relaytest.Start(t, []relay.Module{tiersWith(t, standingOn())}, powRequired)
	evs, _ := c.history(t, r.Clock.Now().Unix()-600)
	postOK(t, r, evs...)
	r2 := relaytest.On(t, r.Store, []relay.Module{tiersWith(t, standingOn())}, powRequired, func(cfg *relay.Config) { cfg.RatePerIP = 3 })
	now := r2.Clock.Now().Unix()
	for i := range 4 {
		forged := taskstest.Request(c.provider, now, now+3600, taskstest.Reward{Amount: 300 + i}, false)
		forged.Sig = strings.Repeat("0", 128)
		ans := r2.Post(t, forged)
		if i < 3 {
			expect400(t, ans, protocol.CodeBadSignature)
		} else if ans.Status != 429 || ans.Code(t) != relay.CodeRateLimited {
			t.Fatalf("forged request %d: %d %s, want 429 rate_limited", i, ans.Status, ans.Body)
		}
	}
}

// TestConfirmComputesNoTrust: the check under the writer never computes
// trust (with the trust graph changed since the published snapshot, the
// old check computed it twice: for trust and for moderation). The
// pre-check's verdict stands when nothing was folded since; after other
// events it is computed again with the pre-check's trust; after a vote it
// is refused, and a retry's pre-check judges afresh.
func TestConfirmComputesNoTrust(t *testing.T) {
	c := newCast()
	m := tiersWith(t, standingOn())
	r := relaytest.Start(t, []relay.Module{m}, powRequired)
	at := r.Clock.Now().Unix() - 600
	evs, _ := c.history(t, at)
	postOK(t, r, evs...)
	now := r.Clock.Now().Unix()
	g := r.Core.Views().Trust
	// A vote the published snapshot does not reflect yet.
	postOK(t, r, c.nobody.Sign(protocol.KindTrustVote, now, map[string]any{"score": 1}, []string{"p", c.voter.ID}))
	confirm := func(want bool) {
		t.Helper()
		n := g.ComputeCalls()
		if got := m.Confirm(c.provider.ID, now); got != want {
			t.Fatalf("Confirm = %v, want %v", got, want)
		}
		if d := g.ComputeCalls() - n; d != 0 {
			t.Fatalf("Confirm computed trust %d times", d)
		}
	}
	if !m.Eligible(c.provider.ID, now) {
		t.Fatal("the provider fails the pre-check")
	}
	confirm(true)
	if stood, re, stale := m.ConfirmCounts(); stood != 1 || re != 0 || stale != 0 {
		t.Fatalf("after nothing folded: stood %d recomputed %d stale %d", stood, re, stale)
	}
	postOK(t, r, c.nobody.Sign(protocol.KindPost, now, "not a vote"))
	confirm(true)
	if stood, re, stale := m.ConfirmCounts(); stood != 1 || re != 1 || stale != 0 {
		t.Fatalf("after a post: stood %d recomputed %d stale %d", stood, re, stale)
	}
	postOK(t, r, c.nobody.Sign(protocol.KindTrustVote, now, map[string]any{"score": 1}, []string{"p", c.requester.ID}))
	confirm(false)
	if stood, re, stale := m.ConfirmCounts(); stood != 1 || re != 1 || stale != 1 {
		t.Fatalf("after a vote: stood %d recomputed %d stale %d", stood, re, stale)
	}
	if !m.Eligible(c.provider.ID, now) {
		t.Fatal("the provider fails the retry's pre-check")
	}
	confirm(true)
}

// BenchmarkConfirm times the check under the writer for a bypassed
// publish when a vote arrived since the published trust snapshot, over a
// graph of 30k votes (300 agents voting for 100 others each), the
// pre-check (on the publish's goroutine) not timed.
func BenchmarkConfirm(b *testing.B) {
	c := newCast()
	m := tiersWith(b, standingOn())
	r := relaytest.Start(b, []relay.Module{m}, powRequired)
	at := r.Clock.Now().Unix() - 600
	evs, _ := c.history(b, at)
	pool := taskstest.Pool(300)
	for i, a := range pool {
		for chunk := range 4 { // 25 targets per vote (at most 32 tags)
			tags := make([][]string, 0, 25)
			for k := 1 + 25*chunk; k <= 25*(chunk+1); k++ {
				tags = append(tags, []string{"p", pool[(i+k)%len(pool)].ID})
			}
			evs = append(evs, a.Sign(protocol.KindTrustVote, at+int64(chunk), map[string]any{"score": 1}, tags...))
		}
	}
	postOK(b, r, evs...)
	now := r.Clock.Now().Unix()
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		postOK(b, r, c.nobody.Sign(protocol.KindTrustVote, now, map[string]any{"score": 1}, []string{"p", pool[i%len(pool)].ID}))
		if !m.Eligible(c.provider.ID, now) {
			b.Fatal("the provider fails the pre-check")
		}
		b.StartTimer()
		if !m.Confirm(c.provider.ID, now) {
			b.Fatal("the provider fails the check under the writer")
		}
	}
}
