package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
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
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/anp2net/relay/client"
	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/postgres/pgtest"
	"github.com/anp2net/relay/relay/state"
	"github.com/anp2net/relay/relay/state/statetest"
	"github.com/anp2net/relay/tasks/taskstest"
)

var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "anp2-e2e-")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "anp2")
	if out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build: %v\n%s", err, out)
		os.Exit(1)
	}
	code := pgtest.Main(m) // m.Run, then stop the PostgreSQL test server if one ran
	os.RemoveAll(dir)
	os.Exit(code)
}

// relayProc is a real anp2 serve process.
type relayProc struct {
	cmd  *exec.Cmd
	base string
}

var listenRe = regexp.MustCompile(`relay listening"? addr=(\S+)`)

func startProc(t *testing.T, db string, extra ...string) *relayProc {
	t.Helper()
	return startProcEnv(t, nil, db, extra...)
}

// startProcEnv is startProc with env added to the process's environment.
func startProcEnv(t *testing.T, env []string, db string, extra ...string) *relayProc {
	t.Helper()
	args := append([]string{"serve", "--addr", "127.0.0.1:0", "--db", db}, extra...)
	cmd := exec.Command(binary, args...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stderr)
	addr := ""
	deadline := time.After(30 * time.Second)
	found := make(chan string, 1)
	go func() {
		for sc.Scan() {
			if m := listenRe.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
				break
			}
		}
		io.Copy(io.Discard, stderr)
	}()
	select {
	case addr = <-found:
	case <-deadline:
		cmd.Process.Kill()
		t.Fatal("relay did not start")
	}
	p := &relayProc{cmd: cmd, base: "http://" + addr}
	t.Cleanup(func() { p.cmd.Process.Kill(); p.cmd.Wait() })
	return p
}

// TestKill9LosesNoAcknowledgedEvent publishes from many clients, kills the
// relay process with SIGKILL mid-load, restarts it on the same database and
// requires every event that was answered 200 to be there.
func TestKill9LosesNoAcknowledgedEvent(t *testing.T) {
	db := filepath.Join(t.TempDir(), "crash.db")
	p := startProc(t, db, "--rate-agent", "0", "--rate-ip", "0")
	var mu sync.Mutex
	var acked []string
	var inflight atomic.Int64
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	cl := client.New(p.base)
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			seed := make([]byte, 32)
			seed[0] = byte(w)
			k := ed25519.NewKeyFromSeed(seed)
			for i := 0; ctx.Err() == nil; i++ {
				e := &protocol.Event{CreatedAt: time.Now().Unix(), Kind: 1, Content: fmt.Sprint(w, "-", i), Tags: [][]string{{"t", "crash"}}}
				e.Sign(k)
				inflight.Add(1)
				res, err := cl.Publish(ctx, e, i%2 == 0)
				inflight.Add(-1)
				if err == nil && res.Accepted {
					mu.Lock()
					acked = append(acked, e.ID)
					mu.Unlock()
				}
			}
		}(w)
	}
	// Let load build, then kill while requests are in flight.
	for start := time.Now(); ; time.Sleep(10 * time.Millisecond) {
		mu.Lock()
		n := len(acked)
		mu.Unlock()
		if n > 300 && inflight.Load() > 0 || time.Since(start) > 20*time.Second {
			break
		}
	}
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	p.cmd.Wait()
	cancel()
	wg.Wait()
	mu.Lock()
	ids := append([]string(nil), acked...)
	mu.Unlock()
	if len(ids) < 100 {
		t.Fatalf("only %d events acknowledged before the kill", len(ids))
	}
	q := startProc(t, db)
	missing := 0
	for _, id := range ids {
		resp, err := http.Get(q.base + "/events/" + id)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			missing++
		}
	}
	if missing > 0 {
		t.Fatalf("%d of %d acknowledged events lost after kill -9", missing, len(ids))
	}
	t.Logf("all %d acknowledged events survived kill -9", len(ids))
}

func runCLI(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command(binary, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("anp2 %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func TestCLIFlow(t *testing.T) {
	dir := t.TempDir()
	p := startProc(t, filepath.Join(dir, "cli.db"))
	keyPath := filepath.Join(dir, "me.key")
	agent := strings.TrimSpace(runCLI(t, "keygen", "--key", keyPath))
	if !protocol.IsHex64(agent) {
		t.Fatalf("keygen printed %q", agent)
	}
	if st, _ := os.Stat(keyPath); st.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode %v", st.Mode())
	}
	// kind 0 needs PoW: publish mines it.
	out := runCLI(t, "publish", "--relay", p.base, "--key", keyPath, "--kind", "0", "--content", `{"name":"cli"}`)
	if !strings.Contains(out, `"accepted":true`) {
		t.Fatalf("publish profile: %s", out)
	}
	out = runCLI(t, "publish", "--relay", p.base+"/api", "--key", keyPath, "--content", "hello", "--tag", "t,cli", "--cbor")
	if !strings.Contains(out, `"accepted":true`) {
		t.Fatalf("publish cbor: %s", out)
	}
	lines := strings.Split(strings.TrimSpace(runCLI(t, "get", "--relay", p.base, "--authors", agent)), "\n")
	if len(lines) != 2 {
		t.Fatalf("get: %q", lines)
	}
	var e protocol.Event
	if err := json.Unmarshal([]byte(lines[1]), &e); err != nil || e.Kind != 0 {
		t.Fatalf("oldest should be the profile: %s", lines[1])
	}
	id, _ := e.IDBytes()
	if protocol.LeadingZeroBits(id) < 12 {
		t.Fatal("profile was not mined")
	}
	// A rejected publish exits non-zero with the relay's code.
	cmd := exec.Command(binary, "publish", "--relay", p.base, "--key", keyPath, "--kind", "0", "--pow", "0", "--content", "{}")
	outb, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || !bytes.Contains(outb, []byte("pow_required")) {
		t.Fatalf("unmined profile: %v %s", err, outb)
	}
}

func TestImportNetworkSample(t *testing.T) {
	db := filepath.Join(t.TempDir(), "import.db")
	out := runCLI(t, "import", "--db", db, "../../testdata/vectors/anp2-network-sample.jsonl")
	if !strings.Contains(out, "read 443, accepted 196, duplicate 0, rejected 247") || !strings.Contains(out, "id_mismatch") {
		t.Fatalf("import: %s", out)
	}
	// Importing again changes nothing.
	out = runCLI(t, "import", "--db", db, "../../testdata/vectors/anp2-network-sample.jsonl")
	if !strings.Contains(out, "accepted 0, duplicate 196") {
		t.Fatalf("re-import: %s", out)
	}
	// The export of that log re-imports into a fresh log identically.
	p := startProc(t, db)
	resp, err := http.Get(p.base + "/export")
	if err != nil {
		t.Fatal(err)
	}
	exported, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	f := filepath.Join(t.TempDir(), "export.jsonl")
	os.WriteFile(f, exported, 0o644)
	out = runCLI(t, "import", "--db", filepath.Join(t.TempDir(), "copy.db"), f)
	// The relay may have added its own kind 10 announcement by the time
	// of the export; every exported line must import.
	n := strings.Count(string(exported), "\n")
	if n < 196 || !strings.Contains(out, fmt.Sprintf("read %d, accepted %d,", n, n)) {
		t.Fatalf("export round trip of %d lines: %s", n, out)
	}
}

// TestReplayAgreesWithRelay replays the network sample from the raw file,
// from a relay's database and from its URL, and compares each with the
// relay's /state; against a relay holding different events it must fail
// and name the view.
func TestReplayAgreesWithRelay(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "sample.db")
	sample := "../../testdata/vectors/anp2-network-sample.jsonl"
	runCLI(t, "import", "--db", db, sample)
	p := startProc(t, db)
	// The relay announces itself (kind 10) once it serves, beside the
	// requests below: wait for it, so the database and /state hold the
	// same events.
	waitFor(t, "the relay's announcement", func() bool {
		resp, err := http.Get(p.base + "/events?kinds=10")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode == 200 && len(b) > 10
	})
	at := "--at=" + strconv.FormatInt(time.Now().Unix(), 10)
	// The raw sample: the 247 id mismatches are listed.
	if out := runCLI(t, "replay", at, sample); !strings.Contains(out, "folded 196") || !strings.Contains(out, "invalid id_mismatch") {
		t.Fatalf("replay of the raw sample: %s", out)
	}
	// The relay's database and URL hold the sample plus its signed kind 10
	// announcement, and agree with its /state.
	for _, src := range []string{db, p.base} {
		out := runCLI(t, "replay", at, "--compare", p.base, src)
		if !strings.Contains(out, "match: ") || !strings.Contains(out, "folded 197") || !strings.Contains(out, "kind 10 ") {
			t.Fatalf("replay %s: %s", src, out)
		}
	}
	empty := startProc(t, filepath.Join(dir, "empty.db"))
	cmd := exec.Command(binary, "replay", at, "--compare", empty.base, db)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || !bytes.Contains(out, []byte(`MISMATCH`)) || !bytes.Contains(out, []byte(`first differing view "discovery"`)) { // views compare in key order; discovery sorts before events
		t.Fatalf("replay against another relay: %v\n%s", err, out)
	}
}

// minedLifecycle is a full paid task whose kind 50 carries 12 bits of PoW.
func minedLifecycle(t *testing.T, i int, at int64) []*protocol.Event {
	t.Helper()
	req, prov, ver := taskstest.NewAgent(fmt.Sprint("req", i)), taskstest.NewAgent(fmt.Sprint("prov", i)), taskstest.NewAgent(fmt.Sprint("ver", i))
	task := taskstest.Request(req, at, at+3600, taskstest.Reward{Amount: 20}, false)
	task.AgentID = req.ID
	if err := protocol.Mine(context.Background(), task, 12); err != nil {
		t.Fatal(err)
	}
	task.Sign(req.Key)
	return []*protocol.Event{task, taskstest.Accept(prov, at+1, task), taskstest.Result(prov, at+2, task),
		taskstest.Verify(ver, at+3, task, protocol.VerdictPassed, 1),
		taskstest.Payment(req, at+4, task, protocol.DispositionRelease, protocol.PaymentANP2Credit)}
}

// TestThreeRelaysConverge runs three relay processes that mirror each
// other, publishes different events to each (votes, flags, revokes and task
// lifecycles split across relays), kills one mid-way and restarts it, and
// requires one event set and one /state on all three, which anp2 replay
// --compare confirms.
func TestThreeRelaysConverge(t *testing.T) {
	dir := t.TempDir()
	fast := []string{"--rate-agent", "0", "--rate-ip", "0", "--mirror-interval", "300ms"}
	a := startProc(t, filepath.Join(dir, "a.db"), fast...)
	b := startProc(t, filepath.Join(dir, "b.db"), append(fast, "--peer", a.base)...)
	cArgs := append(fast, "--peer", a.base, "--peer", b.base)
	c := startProc(t, filepath.Join(dir, "c.db"), cArgs...)
	now := time.Now().Unix()
	evs := statetest.Corpus(3, 12, 0, now-3000, 2400)
	for i := range 6 {
		evs = append(evs, minedLifecycle(t, i, now-1000+int64(i)*10)...)
	}
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(evs), func(i, j int) { evs[i], evs[j] = evs[j], evs[i] })
	publish := func(base string, evs []*protocol.Event) {
		cl := client.New(base)
		for _, e := range evs {
			if _, err := cl.Publish(context.Background(), e, false); err != nil {
				t.Fatalf("publish to %s: %v", base, err)
			}
		}
	}
	third := len(evs) / 3
	publish(a.base, evs[:third])
	publish(b.base, evs[third:2*third])
	publish(c.base, evs[2*third:2*third+third/2])
	c.cmd.Process.Kill() // mid-way: C goes down with half of its share
	c.cmd.Wait()
	c = startProc(t, filepath.Join(dir, "c.db"), cArgs...)
	publish(c.base, evs[2*third+third/2:])
	at := time.Now().Unix()
	// Every event plus each relay's kind 10 announcements (C announces again
	// after its restart: it listens on a new port).
	want := int64(len(evs) + 4)
	digest := func(base string) state.Digest {
		var d state.Digest
		client.New(base).GetJSON(context.Background(), "/state", url.Values{"at": {strconv.FormatInt(at, 10)}}, &d)
		return d
	}
	deadline := time.Now().Add(90 * time.Second)
	for {
		da, db, dc := digest(a.base), digest(b.base), digest(c.base)
		if da.Events == want && db.Events == want && dc.Events == want && da.Digest == db.Digest && db.Digest == dc.Digest {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no convergence: a %d %s, b %d %s, c %d %s (want %d events)", da.Events, da.Digest[:12], db.Events, db.Digest[:12], dc.Events, dc.Digest[:12], want)
		}
		time.Sleep(300 * time.Millisecond)
	}
	for _, p := range []*relayProc{a, b, c} {
		out := runCLI(t, "replay", "--at="+strconv.FormatInt(at, 10), "--compare", p.base, p.base)
		if !strings.Contains(out, "match: ") {
			t.Fatalf("replay --compare %s: %s", p.base, out)
		}
	}
}

// TestBenchCatchUp runs the views bench on a small corpus with --catch-up:
// the new mirror runs as its own anp2 mirror process and must take in
// every event the loaded relay holds.
func TestBenchCatchUp(t *testing.T) {
	if testing.Short() {
		t.Skip("loads and queries a corpus")
	}
	corpus := filepath.Join(t.TempDir(), "corpus.jsonl")
	out, err := exec.Command(binary, "bench", "--views", "1500", "--corpus", corpus, "--catch-up", "--queries", "20", "--load-rate", "20").CombinedOutput()
	if err != nil {
		t.Fatalf("bench: %v\n%s", err, out)
	}
	imported := regexp.MustCompile(`imported \d+ events \((\d+) accepted\)`).FindSubmatch(out)
	caught := regexp.MustCompile(`catch-up of a new mirror \(own process, [^)]*\): (\d+) events`).FindSubmatch(out)
	published := regexp.MustCompile(`background publishes: (\d+) \(0 errors\)`).FindSubmatch(out)
	if imported == nil || caught == nil || published == nil {
		t.Fatalf("bench output lacks the import, publish or catch-up line:\n%s", out)
	}
	// The mirror holds the corpus, the publishes made during the bench
	// and the relay announcements of the bench's relay and of the serve
	// process that then served the log.
	want := atoi(t, imported[1]) + atoi(t, published[1])
	if got := atoi(t, caught[1]); got < want || got > want+2 {
		t.Fatalf("mirror took in %d events, want %d (+2 announcements)\n%s", got, want, out)
	}
	if !bytes.Contains(out, []byte("the loaded log served by its own anp2 serve process")) {
		t.Fatalf("the catch-up was not served by a serve process:\n%s", out)
	}
}

func atoi(t *testing.T, b []byte) int {
	t.Helper()
	n, err := strconv.Atoi(string(b))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// waitFor polls cond every 20 ms for up to 20 s and fails t if it never
// holds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("%s: not reached", what)
}
