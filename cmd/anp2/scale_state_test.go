package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/anp2net/relay/client"
	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/postgres/pgtest"
	"github.com/anp2net/relay/relay/state"
	"github.com/anp2net/relay/relay/state/statetest"
)

// scaleBuf is a goroutine-safe log sink.
type scaleBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *scaleBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *scaleBuf) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// scaleRelay is an in-process anp2 serve over a database file.
type scaleRelay struct {
	c      *serveCmd
	log    *scaleBuf
	cancel context.CancelFunc
	done   chan error
}

// scaleStart starts serve on db with args; Run (which saves the state at a
// clean stop) when run is set, else Start and Serve (no save at the end).
func scaleStart(t *testing.T, db string, run bool, args ...string) *scaleRelay {
	t.Helper()
	r := &scaleRelay{log: &scaleBuf{}, done: make(chan error, 1)}
	r.c = newServe(os.Stdout, r.log)
	all := append([]string{"--addr", "127.0.0.1:0", "--db", db, "--rate-agent", "0", "--rate-ip", "0", "--state-every", "0", "--public-base-url", "http://relay.test"}, args...)
	if err := r.c.ParseFlags(all); err != nil {
		t.Fatal(err)
	}
	if err := r.c.Start(); err != nil {
		t.Fatalf("start: %v\n%s", err, r.log)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	if run {
		// Run calls Start again: stop the first listener and log first.
		r.c.ln.Close()
		r.c.Close()
		go func() { r.done <- r.c.Run(ctx) }()
		scaleWait(t, r)
	} else {
		go func() { r.done <- r.c.srv.Serve(ctx, r.c.ln) }()
	}
	return r
}

// scaleWait waits until a Run relay has started listening.
func scaleWait(t *testing.T, r *scaleRelay) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for strings.Count(r.log.String(), "relay listening") < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("relay did not start:\n%s", r.log)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// stop ends the relay: cleanly (Run saves) or, for a Start relay, without
// saving.
func (r *scaleRelay) stop(t *testing.T, run bool) {
	t.Helper()
	r.cancel()
	if err := <-r.done; err != nil && !strings.Contains(err.Error(), "closed") {
		t.Logf("serve: %v", err)
	}
	if !run {
		r.c.Close()
	}
}

func (r *scaleRelay) base() string { return "http://" + r.c.Addr() }

// scaleDigest fetches /state at at.
func scaleDigest(t *testing.T, base string, at int64) state.Digest {
	t.Helper()
	var d state.Digest
	if err := client.New(base).GetJSON(context.Background(), "/state", url.Values{"at": {strconv.FormatInt(at, 10)}}, &d); err != nil {
		t.Fatal(err)
	}
	return d
}

func scalePublish(t *testing.T, base string, evs []*protocol.Event) {
	t.Helper()
	cl := client.New(base)
	for _, e := range evs {
		if _, err := cl.Publish(context.Background(), e, false); err != nil {
			t.Fatalf("publish: %v", err)
		}
	}
}

// scaleTS matches the answer time in /stats, which is not state.
var scaleTS = regexp.MustCompile(`"ts":\d+`)

// scaleViews returns the bodies of the directory's routes, which /state
// does not digest.
func scaleViews(t *testing.T, base string) string {
	t.Helper()
	var out strings.Builder
	for _, p := range []string{"/stats", "/agents?limit=1000", "/rooms"} {
		code, body := scaleGet(t, base+p)
		if code != 200 {
			t.Fatalf("GET %s: %d %s", p, code, body)
		}
		out.WriteString(p + " " + scaleTS.ReplaceAllString(body, `"ts":0`) + "\n")
	}
	return out.String()
}

// scaleSame fails unless a and b have the same digest and view digests.
func scaleSame(t *testing.T, what string, a, b state.Digest) {
	t.Helper()
	ja, _ := json.Marshal(a.Views)
	jb, _ := json.Marshal(b.Views)
	if a.Digest != b.Digest || a.Events != b.Events || a.Revoked != b.Revoked || !bytes.Equal(ja, jb) {
		t.Fatalf("%s: digests differ:\n%s %d/%d %s\n%s %d/%d %s", what, a.Digest, a.Events, a.Revoked, ja, b.Digest, b.Events, b.Revoked, jb)
	}
}

// scaleCorpus is a random, shuffled (out-of-order) corpus with votes,
// flags, revocations and task lifecycles.
func scaleCorpus(t *testing.T, seed uint64, now int64) []*protocol.Event {
	evs := statetest.Corpus(seed, 10, 0, now-3000, 2400)
	for i := range 4 {
		evs = append(evs, minedLifecycle(t, i+int(seed)*10, now-1000+int64(i)*10)...)
	}
	// Funding and governance events, one of each revoked by its author.
	pool := statetest.Agents(4)
	for i, a := range pool {
		at := now - 900 + int64(i)
		fund := a.Sign(protocol.KindFunding, at, map[string]any{"addresses": []any{map[string]any{"chain": "ETH", "address": "0x52908400098527886e0f7030069857d2e4169ee7"}}, "disclose_totals": i%2 == 0}, []string{"chain", "ETH"})
		don := a.Sign(protocol.KindDonation, at+1, map[string]any{"type": "sent", "chain": "BTC", "tx_hash": strings.Repeat(fmt.Sprintf("%02x", i+int(seed)*8), 32),
			"amount": "0.001"}, []string{"p", pool[(i+1)%len(pool)].ID}, []string{"chain", "BTC"})
		pip := a.Sign(20, at+2, map[string]any{"pip_number": fmt.Sprint(100 + i), "title": fmt.Sprint("pip ", i, " seed ", seed)})
		evs = append(evs, fund, don, pip)
		if i == 0 {
			evs = append(evs, a.Sign(protocol.KindRevoke, at+5, "", []string{"e", fund.ID}), a.Sign(protocol.KindRevoke, at+6, "", []string{"e", pip.ID}))
		}
	}
	rand.New(rand.NewPCG(seed, 99)).Shuffle(len(evs), func(i, j int) { evs[i], evs[j] = evs[j], evs[i] })
	return evs
}

// snapDir returns the newest snapshot directory under db's state dir.
func snapDir(t *testing.T, db string) string {
	t.Helper()
	m, _ := filepath.Glob(db + ".state/snap-*")
	if len(m) == 0 {
		t.Fatalf("no snapshot beside %s", db)
	}
	return m[len(m)-1]
}

// TestStateResumeNeverTrusted drives three paths over random logs — a
// relay resumed from its saved state and the log's tail, a relay that
// folds the same log from empty, and anp2 replay — and requires one /state
// for every view; then damages the saved state four ways (a flipped byte,
// another version, ahead of the log, a damaged composition) and requires
// the same /state from a relay that refolded what it could not trust.
func TestStateResumeNeverTrusted(t *testing.T) {
	now := time.Now().Unix()
	at := now + 10
	for _, seed := range []uint64{1, 2} {
		dir := t.TempDir()
		db := filepath.Join(dir, "relay.db")
		evs := scaleCorpus(t, seed, now)
		half := len(evs) / 2
		// Phase 1: the first half, then a clean stop that saves.
		r := scaleStart(t, db, true)
		scalePublish(t, r.base(), evs[:half])
		r.stop(t, true)
		if !strings.Contains(r.log.String(), "derived state saved") {
			t.Fatalf("no save at the clean stop:\n%s", r.log)
		}
		// Phase 2: resumed; the rest of the log, then a stop that does
		// not save: the saved state is now half a log behind.
		r = scaleStart(t, db, false)
		if !strings.Contains(r.log.String(), "saved state restored") {
			t.Fatalf("phase 2 did not resume:\n%s", r.log)
		}
		scalePublish(t, r.base(), evs[half:])
		r.stop(t, false)
		// Resumed from the old save plus the tail.
		r = scaleStart(t, db, false)
		lg := r.log.String()
		if !strings.Contains(lg, "saved state restored") || !strings.Contains(lg, "tail_events=") || strings.Contains(lg, "tail_events=0 ") {
			t.Fatalf("resume with a tail: log\n%s", lg)
		}
		resumed := scaleDigest(t, r.base(), at)
		views := scaleViews(t, r.base())
		out := runCLI(t, "replay", "--at="+strconv.FormatInt(at, 10), "--compare", r.base(), db)
		if !strings.Contains(out, "match: ") {
			t.Fatalf("replay --compare the resumed relay: %s", out)
		}
		r.stop(t, false)
		if resumed.Events < int64(len(evs)) || resumed.Revoked == 0 {
			t.Fatalf("resumed relay holds %d events (%d revoked), want %d and some revoked", resumed.Events, resumed.Revoked, len(evs))
		}
		r = scaleStart(t, db, false, "--state-dir", "none")
		scaleSame(t, "resumed vs folded from empty", resumed, scaleDigest(t, r.base(), at))
		if v := scaleViews(t, r.base()); v != views {
			t.Fatalf("directory views differ:\nresumed %s\nfolded  %s", views, v)
		}
		r.stop(t, false)

		// Save at the log's end (clean stop), then damage it.
		r = scaleStart(t, db, true)
		r.stop(t, true)
		for _, damage := range []struct {
			name, want string
			do         func(snap string)
		}{
			{"flipped byte", "checksum mismatch", func(snap string) {
				p := filepath.Join(snap, "trust.snap")
				b, _ := os.ReadFile(p)
				b[len(b)/2] ^= 0x40
				os.WriteFile(p, b, 0o600)
			}},
			{"another version", "version", func(snap string) {
				p := filepath.Join(snap, "MANIFEST")
				b, _ := os.ReadFile(p)
				os.WriteFile(p, bytes.Replace(b, []byte("trust.moderation/"), []byte("trust.moderation/0-"), 1), 0o600)
			}},
			{"ahead of the log", "does not match the log", func(snap string) {
				p := filepath.Join(snap, "MANIFEST")
				var m state.Manifest
				b, _ := os.ReadFile(p)
				json.Unmarshal(b, &m)
				m.Seq += 1000
				b, _ = json.Marshal(m)
				os.WriteFile(p, b, 0o600)
				os.Rename(snap, filepath.Join(filepath.Dir(snap), fmt.Sprintf("snap-%020d", m.Seq)))
			}},
			{"damaged composition", "folding the whole log", func(snap string) {
				p := filepath.Join(snap, state.CompositionView+".snap")
				b, _ := os.ReadFile(p)
				b[0] ^= 1
				os.WriteFile(p, b, 0o600)
			}},
		} {
			r = scaleStart(t, db, true) // a clean save of the whole log
			r.stop(t, true)
			damage.do(snapDir(t, db))
			r = scaleStart(t, db, false)
			if lg := r.log.String(); !strings.Contains(lg, damage.want) {
				t.Fatalf("%s: the log does not say %q:\n%s", damage.name, damage.want, lg)
			}
			scaleSame(t, damage.name, resumed, scaleDigest(t, r.base(), at))
			r.stop(t, false)
		}
	}
}

// TestStateKill9WhileSaving runs a real anp2 serve process that saves its
// derived state every millisecond while events arrive, kills it with
// SIGKILL mid-way (likely while a save is being written), restarts it, and
// requires the /state of a relay folding the log from empty and of anp2
// replay; the restarted relay reports its saved state's bytes on disk.
func TestStateKill9WhileSaving(t *testing.T) {
	now := time.Now().Unix()
	at := now + 10
	dir := t.TempDir()
	db := filepath.Join(dir, "relay.db")
	args := []string{"--rate-agent", "0", "--rate-ip", "0", "--public-base-url", "http://relay.test", "--state-every", "1ms"}
	evs := scaleCorpus(t, 3, now)
	cuts := []int{len(evs) / 3, 2 * len(evs) / 3, len(evs)}
	from := 0
	for _, cut := range cuts {
		p := startProc(t, db, args...)
		scalePublish(t, p.base, evs[from:cut])
		from = cut
		p.cmd.Process.Kill() // SIGKILL
		p.cmd.Wait()
	}
	p := startProc(t, db, args...)
	resumed := scaleDigest(t, p.base, at)
	if resumed.Events < int64(len(evs)) {
		t.Fatalf("restarted relay holds %d events, want %d", resumed.Events, len(evs))
	}
	_, metrics := scaleGet(t, p.base+"/metrics")
	if v, ok := metricValue([]byte(metrics), `anp2_fold_bytes{fold="trust",where="disk"}`); !ok || v <= 0 {
		t.Fatalf("no saved state on disk after the restart:\n%s", metrics)
	}
	if v, ok := metricValue([]byte(metrics), "anp2_state_resumed_seq"); !ok || v <= 0 {
		t.Fatalf("the restarted relay did not resume from saved state (anp2_state_resumed_seq %v, %v)", v, ok)
	} else {
		t.Logf("resumed from seq %v of %d events", v, resumed.Events)
	}
	if out := runCLI(t, "replay", "--at="+strconv.FormatInt(at, 10), "--compare", p.base, db); !strings.Contains(out, "match: ") {
		t.Fatalf("replay --compare the restarted relay: %s", out)
	}
	p.cmd.Process.Kill()
	p.cmd.Wait()
	full := startProc(t, db, append(args, "--state-dir", "none")...)
	scaleSame(t, "restarted after kill -9 vs folded from empty", resumed, scaleDigest(t, full.base, at))
}

// metricValue returns the value of the sample named line (name with its
// labels, as written) in a /metrics body; false when absent.
func metricValue(body []byte, line string) (float64, bool) {
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(line) + ` (\S+)$`).FindSubmatch(body)
	if m == nil {
		return 0, false
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	return v, err == nil
}

// TestDirectoryLiveEqualsRebuild checks the directory's counts (which
// /state does not digest) after revocations that precede their targets in
// the log, one batch holding both: the live relay, a relay rebuilding the
// log from empty and one resuming from saved state count the same events.
// A revocation must not find its target before the target is folded, or a
// view is asked to remove an event it never saw.
func TestDirectoryLiveEqualsRebuild(t *testing.T) {
	now := time.Now().Unix()
	db := filepath.Join(t.TempDir(), "relay.db")
	r := scaleStart(t, db, true)
	a := statetest.Agents(2)
	var batch []*protocol.Event
	for i := range 5 {
		target := a[0].Sign(protocol.KindPost, now-100+int64(i), fmt.Sprintf("soon revoked %d", i), []string{"t", "weather"})
		rev := a[0].Sign(protocol.KindRevoke, now-50+int64(i), "", []string{"e", target.ID})
		batch = append(batch, rev, target)
	}
	batch = append(batch, a[1].Sign(protocol.KindPost, now-10, "kept", []string{"t", "weather"}))
	body, _ := json.Marshal(batch)
	resp := postScale(t, r.base()+"/events/batch", body)
	if !strings.Contains(resp, `"accepted":11`) {
		t.Fatalf("batch: %s", resp)
	}
	scalePublish(t, r.base(), scaleCorpus(t, 5, now))
	live := scaleViews(t, r.base())
	r.stop(t, true)
	r = scaleStart(t, db, false)
	if v := scaleViews(t, r.base()); v != live {
		t.Fatalf("resumed directory differs from live:\n%s", scaleDiff(live, v))
	}
	r.stop(t, false)
	r = scaleStart(t, db, false, "--state-dir", "none")
	if v := scaleViews(t, r.base()); v != live {
		t.Fatalf("rebuilt directory differs from live:\n%s", scaleDiff(live, v))
	}
	r.stop(t, false)
}

// scaleDiff shows where two answers part: 200 bytes either side of the
// first difference.
func scaleDiff(a, b string) string {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	from := max(0, i-200)
	return fmt.Sprintf("at byte %d:\nwant …%s\ngot  …%s", i, a[from:min(len(a), i+200)], b[from:min(len(b), i+200)])
}

func postScale(t *testing.T, url string, body []byte) string {
	t.Helper()
	resp, err := http.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// TestStateResumePostgres runs relay processes over one PostgreSQL log,
// each with its own state directory (SPEC §2.1): a process stopped
// cleanly resumes from its own saved state, a new process seeded with a
// copy of another's state directory resumes from it too, and both serve
// the /state of a process that folded the whole log.
func TestStateResumePostgres(t *testing.T) {
	pg := pgtest.DB(t)
	dir := t.TempDir()
	now := time.Now().Unix()
	at := now + 10
	id := []string{"--relay-key", filepath.Join(dir, "relay.key"), "--public-base-url", "http://relay.test", "--rate-agent", "0", "--rate-ip", "0"}
	stateA := filepath.Join(dir, "a.state")
	evs := scaleCorpus(t, 7, now)
	half := len(evs) / 2
	a := startProc(t, pg, append(id, "--state-dir", stateA)...)
	scalePublish(t, a.base, evs[:half])
	a.cmd.Process.Signal(syscall.SIGTERM) // a clean stop saves
	a.cmd.Wait()
	a = startProc(t, pg, append(id, "--state-dir", stateA)...)
	scalePublish(t, a.base, evs[half:])
	if v := scaleResumedSeq(t, a.base); v <= 0 {
		t.Fatalf("process A did not resume from its state directory (resumed seq %v)", v)
	}
	a.cmd.Process.Signal(syscall.SIGTERM)
	a.cmd.Wait()
	// B joins with a copy of A's state directory.
	stateB := filepath.Join(dir, "b.state")
	if out, err := exec.Command("cp", "-r", stateA, stateB).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	b := startProc(t, pg, append(id, "--state-dir", stateB)...)
	if v := scaleResumedSeq(t, b.base); v <= 0 {
		t.Fatalf("process B did not resume from the copied state (resumed seq %v)", v)
	}
	full := startProc(t, pg, id...) // no state directory by default with PostgreSQL
	if v := scaleResumedSeq(t, full.base); v != -2 && v != 0 {
		t.Logf("full process resumed seq %v", v)
	}
	want := scaleDigest(t, full.base, at)
	scaleSame(t, "seeded process vs folded from empty", scaleDigest(t, b.base, at), want)
	if want.Events < int64(len(evs)) {
		t.Fatalf("log holds %d events, want at least %d", want.Events, len(evs))
	}
}

// scaleResumedSeq reads anp2_state_resumed_seq from /metrics (-2 when the
// relay keeps no saved state).
func scaleResumedSeq(t *testing.T, base string) float64 {
	t.Helper()
	_, body := scaleGet(t, base+"/metrics")
	v, ok := metricValue([]byte(body), "anp2_state_resumed_seq")
	if !ok {
		return -2
	}
	return v
}
