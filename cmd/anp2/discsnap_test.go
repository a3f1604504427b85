package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"path/filepath"

	"github.com/anp2net/relay/client"
	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/tasks/taskstest"
)

// discsnapCorpus is a random discovery corpus a relay process accepts:
// mined profiles (some topic_only), capabilities, posts, replies and
// claims on shared topics, follows and withdrawals, beacons, and
// revocations of their authors' own events, shuffled.
func discsnapCorpus(t *testing.T, seed uint64, now int64) []*protocol.Event {
	rng := rand.New(rand.NewPCG(seed, 31))
	pool := taskstest.Pool(8)
	mine := dropinMine(t)
	at := func() int64 { return now - 3000 + rng.Int64N(2400) }
	topics := []string{"climate", "market", "weather"}
	words := []string{"coastal", "rain", "price", "yen", "tide", "storm", "contract", "forecast"}
	text := func() string {
		var b strings.Builder
		for range 6 {
			b.WriteString(words[rng.IntN(len(words))] + " ")
		}
		return b.String()
	}
	var out, posts []*protocol.Event
	for i, a := range pool {
		disc := []string{"public", "public", "topic_only"}[i%3]
		out = append(out, mine(a.Sign(protocol.KindProfile, at(), map[string]any{"name": a.Name, "discoverability": disc}), a),
			a.Sign(protocol.KindCapability, at(), map[string]any{}, []string{"cap", topics[rng.IntN(3)]}))
	}
	for range len(pool) * 6 {
		a, tt := pool[rng.IntN(len(pool))], []string{"t", topics[rng.IntN(len(topics))]}
		var e *protocol.Event
		switch k := rng.IntN(4); {
		case k < 2 || len(posts) == 0:
			e = a.Sign(protocol.KindPost, at(), text(), tt)
		case k == 2:
			e = a.Sign(protocol.KindReply, at(), text(), []string{"e", posts[rng.IntN(len(posts))].ID, "root"}, tt)
		default:
			src := posts[rng.IntN(len(posts))]
			e = a.Sign(protocol.KindKnowledge, at(), map[string]any{"claim": text(), "derived_from": []string{src.ID}}, []string{"e", src.ID, "derived"}, tt)
		}
		posts = append(posts, e)
		out = append(out, e)
	}
	for range len(pool) * 2 {
		a, b := pool[rng.IntN(len(pool))], pool[rng.IntN(len(pool))]
		content := map[string]any{"reason": "good"}
		if rng.IntN(3) == 0 {
			content = map[string]any{"withdraw": true}
		}
		out = append(out, a.Sign(protocol.KindSubscribe, at(), content, []string{"p", b.ID}, []string{"t", topics[rng.IntN(3)]}))
	}
	for range len(pool) {
		out = append(out, pool[rng.IntN(len(pool))].Sign(protocol.KindBeacon, at(), map[string]any{"intent": "seek", "about": text(), "ttl_sec": 7200},
			[]string{"cap_wanted", topics[rng.IntN(3)]}))
	}
	for range len(pool) {
		victim := out[rng.IntN(len(out))]
		for _, a := range pool {
			if a.ID == victim.AgentID {
				out = append(out, a.Sign(protocol.KindRevoke, at(), "", []string{"e", victim.ID}))
			}
		}
	}
	rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// discsnapTimes matches the evaluation times in answers, which are not
// state.
var discsnapTimes = regexp.MustCompile(`"(at|ts|now|generated_at)":\d+`)

// discsnapRoutes returns the status and body of every discovery route for
// every agent and event of evs, plus the directory rows discovery adds to.
func discsnapRoutes(t *testing.T, base string, evs []*protocol.Event) string {
	t.Helper()
	paths := []string{"/beacons", "/beacons?cap_wanted=climate", "/topics/climate/followers", "/topics/market/followers", "/agents?limit=1000"}
	agents := map[string]bool{}
	for _, e := range evs {
		if !agents[e.AgentID] {
			agents[e.AgentID] = true
			for _, p := range []string{"/feed/%s", "/recommendations/%s?limit=50", "/neighbors/%s", "/copresence/%s", "/copresence/%s?window=1d",
				"/agents/%s/subscriptions", "/subscriptions/%s", "/agents/%s/followers", "/agents/%s", "/onboarding/%s"} {
				paths = append(paths, fmt.Sprintf(p, e.AgentID))
			}
		}
		paths = append(paths, "/citations/"+e.ID)
	}
	var out strings.Builder
	for _, p := range paths {
		code, body := scaleGet(t, base+p)
		fmt.Fprintf(&out, "%s %d %s\n", p, code, discsnapTimes.ReplaceAllString(body, `"$1":_`))
	}
	return out.String()
}

// discsnapStart is scaleStart (a relay that does not save at its stop)
// with its clock stopped at now: the feed's scores age with the clock.
func discsnapStart(t *testing.T, db string, now int64, args ...string) *scaleRelay {
	t.Helper()
	r := &scaleRelay{log: &scaleBuf{}, done: make(chan error, 1)}
	r.c = newServe(os.Stdout, r.log)
	r.c.now = func() time.Time { return time.Unix(now, 0) }
	all := append([]string{"--addr", "127.0.0.1:0", "--db", db, "--rate-agent", "0", "--rate-ip", "0", "--state-every", "0", "--public-base-url", "http://relay.test"}, args...)
	if err := r.c.ParseFlags(all); err != nil {
		t.Fatal(err)
	}
	if err := r.c.Start(); err != nil {
		t.Fatalf("start: %v\n%s", err, r.log)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() { r.done <- r.c.srv.Serve(ctx, r.c.ln) }()
	return r
}

// TestDiscsnapResumedRoutesEqualFolded runs anp2 serve over a random
// discovery corpus with revocations: half published and saved at a clean
// stop, the rest published to a resumed relay that does not save, then a
// relay resumed from the old save plus the log's tail — its discovery view
// restored, not refolded — must answer every discovery route and /state
// as a relay folding the whole log from empty.
func TestDiscsnapResumedRoutesEqualFolded(t *testing.T) {
	now := time.Now().Unix()
	at := now + 10
	db := filepath.Join(t.TempDir(), "relay.db")
	// A stopped relay's background writers (delivery, transparency log)
	// may still create a file as TempDir's removal runs: empty the
	// directory first, again while something is still being created.
	t.Cleanup(func() {
		for deadline := time.Now().Add(10 * time.Second); os.RemoveAll(filepath.Dir(db)) != nil && time.Now().Before(deadline); {
			time.Sleep(50 * time.Millisecond)
		}
	})
	evs := discsnapCorpus(t, 1, now)
	half := len(evs) / 2
	r := scaleStart(t, db, true)
	scalePublish(t, r.base(), evs[:half])
	r.stop(t, true)
	if !strings.Contains(r.log.String(), "derived state saved") {
		t.Fatalf("no save at the clean stop:\n%s", r.log)
	}
	r = scaleStart(t, db, false)
	scalePublish(t, r.base(), evs[half:])
	r.stop(t, false)

	r = discsnapStart(t, db, now)
	lg := r.log.String()
	if !strings.Contains(lg, "saved state restored") || strings.Contains(lg, "view=discovery") || strings.Contains(lg, "tail_events=0 ") {
		t.Fatalf("discovery not restored, or no tail:\n%s", lg)
	}
	resumed, routes := scaleDigest(t, r.base(), at), discsnapRoutes(t, r.base(), evs)
	r.stop(t, false)
	if resumed.Revoked == 0 || !strings.Contains(routes, `"neighbors":[{`) {
		t.Fatalf("the corpus revoked %d events; neighbours found: %v", resumed.Revoked, strings.Contains(routes, `"neighbors":[{`))
	}

	r = discsnapStart(t, db, now, "--state-dir", "none")
	scaleSame(t, "resumed vs folded from empty", resumed, scaleDigest(t, r.base(), at))
	if folded := discsnapRoutes(t, r.base(), evs); folded != routes {
		a, b := strings.Split(routes, "\n"), strings.Split(folded, "\n")
		for i := range min(len(a), len(b)) {
			if a[i] != b[i] {
				j := 0
				for j < min(len(a[i]), len(b[i])) && a[i][j] == b[i][j] {
					j++
				}
				from := max(0, j-300)
				t.Fatalf("discovery answers differ at byte %d:\nresumed …%s\nfolded  …%s", j, a[i][from:min(len(a[i]), j+200)], b[i][from:min(len(b[i]), j+200)])
			}
		}
		t.Fatalf("discovery answers differ in length: %d vs %d lines", len(a), len(b))
	}
	r.stop(t, false)
}

// TestDiscsnapStoreRefusedRebuilt: a discovery store that does not belong
// to the saved state — saved again by a later run whose snapshot was then
// lost (its token is not the one the snapshot names), or truncated — is
// refused at start: the relay logs the view as not restored, rebuilds it
// from the log, and answers every discovery route and /state as a relay
// folding the whole log from empty.
func TestDiscsnapStoreRefusedRebuilt(t *testing.T) {
	now := time.Now().Unix()
	at := now + 10
	evs := discsnapCorpus(t, 2, now)
	half := len(evs) / 2
	for _, damage := range []string{"token", "truncated"} {
		t.Run(damage, func(t *testing.T) {
			db := filepath.Join(t.TempDir(), "relay.db")
			t.Cleanup(func() {
				for deadline := time.Now().Add(10 * time.Second); os.RemoveAll(filepath.Dir(db)) != nil && time.Now().Before(deadline); {
					time.Sleep(50 * time.Millisecond)
				}
			})
			stateDir, store := db+".state", filepath.Join(db+".state", "discovery.db")
			r := scaleStart(t, db, true)
			scalePublish(t, r.base(), evs[:half])
			r.stop(t, true)
			switch damage {
			case "token": // a later run saves; its snapshot is lost, the older one put back
				old := filepath.Join(t.TempDir(), "old-state")
				if err := os.CopyFS(old, os.DirFS(stateDir)); err != nil {
					t.Fatal(err)
				}
				r = scaleStart(t, db, true)
				scalePublish(t, r.base(), evs[half:])
				r.stop(t, true)
				snaps, _ := filepath.Glob(filepath.Join(stateDir, "snap-*"))
				for _, s := range snaps {
					os.RemoveAll(s)
				}
				oldSnaps, _ := filepath.Glob(filepath.Join(old, "snap-*"))
				if len(snaps) != 1 || len(oldSnaps) != 1 {
					t.Fatalf("snapshots: %v then %v", oldSnaps, snaps)
				}
				if err := os.CopyFS(filepath.Join(stateDir, filepath.Base(oldSnaps[0])), os.DirFS(oldSnaps[0])); err != nil {
					t.Fatal(err)
				}
			case "truncated":
				fi, err := os.Stat(store)
				if err != nil {
					t.Fatal(err)
				}
				if err := os.Truncate(store, fi.Size()/2); err != nil {
					t.Fatal(err)
				}
				r = scaleStart(t, db, false)
				scalePublish(t, r.base(), evs[half:])
				r.stop(t, false)
			}
			r = discsnapStart(t, db, now)
			if lg := r.log.String(); !strings.Contains(lg, "saved state restored") || !strings.Contains(lg, "view=discovery") {
				t.Fatalf("the discovery store was not refused:\n%s", lg)
			}
			rebuilt, routes := scaleDigest(t, r.base(), at), discsnapRoutes(t, r.base(), evs)
			r.stop(t, false)
			r = discsnapStart(t, db, now, "--state-dir", "none")
			scaleSame(t, "rebuilt vs folded from empty", rebuilt, scaleDigest(t, r.base(), at))
			if folded := discsnapRoutes(t, r.base(), evs); folded != routes {
				t.Fatalf("discovery answers of the rebuilt view differ from the folded one's")
			}
			r.stop(t, false)
		})
	}
}

// TestDiscsnapKill9AfterCommits: a relay process resumed from a save
// folds enough events that discovery's store commits its open
// transaction (keeping the save's token, the changes in its undo
// journal), then is killed with SIGKILL. The next start adopts the store
// after taking those changes back — discovery restored, not refolded —
// folds the log's tail, and answers /state and the discovery routes as a
// relay folding the whole log from empty.
func TestDiscsnapKill9AfterCommits(t *testing.T) {
	now := time.Now().Unix()
	at := now + 10
	db := filepath.Join(t.TempDir(), "relay.db")
	t.Cleanup(func() {
		for deadline := time.Now().Add(10 * time.Second); os.RemoveAll(filepath.Dir(db)) != nil && time.Now().Before(deadline); {
			time.Sleep(50 * time.Millisecond)
		}
	})
	evs := discsnapCorpus(t, 3, now)
	r := scaleStart(t, db, true)
	scalePublish(t, r.base(), evs)
	r.stop(t, true)

	// The tail: posts on eight of 2,000 topics each, citing earlier ones, then
	// their authors revoke some: well past 16,384 row changes of the
	// store, so its transaction is committed before the kill.
	pool := taskstest.Pool(6)
	rng := rand.New(rand.NewPCG(3, 77))
	var tail []*protocol.Event
	for i := range 2500 {
		a := pool[rng.IntN(len(pool))]
		tags := [][]string{}
		for _, k := range rng.Perm(2000)[:8] { // topics of few posts each: co-presence stays cheap to ask
			tags = append(tags, []string{"t", fmt.Sprintf("topic%d", k)})
		}
		if len(tail) > 0 {
			tags = append(tags, []string{"e", tail[rng.IntN(len(tail))].ID, "reply"})
		}
		tail = append(tail, a.Sign(protocol.KindPost, now-3000+int64(i), fmt.Sprintf("post %d", i), tags...))
	}
	for _, v := range tail[100:200] { // committed before the kill: taken back, then folded again with their revocations
		for _, a := range pool {
			if a.ID == v.AgentID {
				tail = append(tail, a.Sign(protocol.KindRevoke, now-200, "", []string{"e", v.ID}))
			}
		}
	}
	p := startProc(t, db, "--rate-agent", "0", "--rate-ip", "0", "--state-every", "0", "--public-base-url", "http://relay.test")
	cl := client.New(p.base)
	for i := 0; i < len(tail); i += 100 {
		if _, err := cl.PublishBatch(context.Background(), tail[i:min(len(tail), i+100)]); err != nil {
			t.Fatal(err)
		}
	}
	p.cmd.Process.Kill() // SIGKILL
	p.cmd.Wait()

	r = discsnapStart(t, db, now)
	lg := r.log.String()
	if !strings.Contains(lg, "saved state restored") || strings.Contains(lg, "view=discovery") {
		t.Fatalf("discovery not restored from the save after the kill:\n%s", lg)
	}
	sample := append(append([]*protocol.Event{}, evs...), tail[80:220]...)
	resumed, routes := scaleDigest(t, r.base(), at), discsnapRoutes(t, r.base(), sample)
	r.stop(t, false)
	if resumed.Events < int64(len(evs)+len(tail)) {
		t.Fatalf("the log holds %d events, want %d", resumed.Events, len(evs)+len(tail))
	}
	r = discsnapStart(t, db, now, "--state-dir", "none")
	scaleSame(t, "resumed after kill -9 vs folded from empty", resumed, scaleDigest(t, r.base(), at))
	if folded := discsnapRoutes(t, r.base(), sample); folded != routes {
		t.Fatalf("discovery answers after kill -9 differ from a fold from empty:%s", scaleDiff(routes, folded))
	}
	r.stop(t, false)
}
