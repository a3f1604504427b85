package main

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"net/http"
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
)

// TestMigrateToPostgresAndBack imports the network sample into SQLite
// under a relay, migrates the log to PostgreSQL and back into a new SQLite
// file, and requires the replay of each copy to match the state the
// relays serve: the SQLite relay's and one serving from PostgreSQL.
func TestMigrateToPostgresAndBack(t *testing.T) {
	pg := pgtest.DB(t)
	dir := t.TempDir()
	db := filepath.Join(dir, "sample.db")
	runCLI(t, "import", "--db", db, "../../testdata/vectors/anp2-network-sample.jsonl")
	// One identity and public URL for both relays: the PostgreSQL one
	// finds its announcement in the migrated log and adds none. The URL is
	// the SQLite relay's real address, where the mirror below reads it as
	// an authenticated reader: a signed header must name the relay's
	// public base URL.
	addr := httpLoopbackAddr(t)
	id := []string{"--relay-key", filepath.Join(dir, "relay.key"), "--public-base-url", "http://" + addr}
	p := startProc(t, db, append(id, "--addr", addr)...)
	at := "--at=" + strconv.FormatInt(time.Now().Unix(), 10)
	out := runCLI(t, "migrate", "--from", db, "--to", pg)
	if !strings.Contains(out, "migrated 197 events") {
		t.Fatalf("migrate to postgres: %s", out)
	}
	q := startProc(t, pg, id...)
	for _, c := range []struct{ relay, src string }{{q.base, db}, {p.base, pg}, {q.base, pg}} {
		if out := runCLI(t, "replay", at, "--compare", c.relay, c.src); !strings.Contains(out, "match: ") || !strings.Contains(out, "folded 197") {
			t.Fatalf("replay %s against %s: %s", c.src, c.relay, out)
		}
	}
	back := filepath.Join(dir, "back.db")
	if out := runCLI(t, "migrate", "--from", pg, "--to", back); !strings.Contains(out, "migrated 197 events") {
		t.Fatalf("migrate back: %s", out)
	}
	if out := runCLI(t, "replay", at, "--compare", p.base, back); !strings.Contains(out, "match: ") {
		t.Fatalf("replay of the copy back: %s", out)
	}
	// A mirror catches a PostgreSQL log up from the SQLite relay.
	mirrored := pgtest.DB(t)
	runCLI(t, "mirror", "--db", mirrored, "--relay-key", filepath.Join(dir, "mirror.key"), "--peer", p.base)
	if out := runCLI(t, "replay", at, "--compare", p.base, mirrored); !strings.Contains(out, "match: ") {
		t.Fatalf("replay of the PostgreSQL mirror: %s", out)
	}
	// Into a log that is not empty: refused, nothing copied.
	if out, err := runCLIErr("migrate", "--from", db, "--to", back); err == nil || !strings.Contains(out, "already holds 197 events") {
		t.Fatalf("migrate into a full log: %v %s", err, out)
	}
}

func runCLIErr(args ...string) (string, error) {
	out, err := exec.Command(binary, args...).CombinedOutput()
	return string(out), err
}

// TestTwoRelayProcessesOnePostgres runs two relay processes over one
// database with publishers on both and a subscriber on each: both
// subscribers receive every event exactly once, and both relays serve the
// same /state digest at the same seq.
func TestTwoRelayProcessesOnePostgres(t *testing.T) {
	pg := pgtest.DB(t)
	dir := t.TempDir()
	id := []string{"--relay-key", filepath.Join(dir, "relay.key"), "--public-base-url", "http://relay.test", "--rate-agent", "0", "--rate-ip", "0"}
	relays := []*relayProc{startProc(t, pg, id...), startProc(t, pg, id...)}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type seen struct {
		mu  sync.Mutex
		ids map[string]int
	}
	subs := make([]*seen, len(relays))
	for i, r := range relays {
		subs[i] = &seen{ids: map[string]int{}}
		ready := make(chan struct{})
		go subscribe(ctx, t, r.base, ready, func(id string) {
			subs[i].mu.Lock()
			subs[i].ids[id]++
			subs[i].mu.Unlock()
		})
		<-ready
	}
	const perRelay = 60
	var published sync.Map
	var wg sync.WaitGroup
	for i, r := range relays {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl := client.New(r.base)
			seed := make([]byte, 32)
			seed[0] = byte(100 + i)
			k := ed25519.NewKeyFromSeed(seed)
			for j := range perRelay {
				e := &protocol.Event{CreatedAt: time.Now().Unix(), Kind: 1, Content: fmt.Sprint(i, "-", j), Tags: [][]string{{"t", "two"}}}
				e.Sign(k)
				res, err := cl.Publish(ctx, e, false)
				if err != nil || !res.Accepted {
					t.Errorf("publish on relay %d: %v %+v", i, err, res)
					return
				}
				published.Store(e.ID, true)
			}
		}()
	}
	wg.Wait()
	deadline := time.Now().Add(30 * time.Second)
	for {
		done := true
		for _, s := range subs {
			s.mu.Lock()
			n := 0
			published.Range(func(k, _ any) bool {
				if s.ids[k.(string)] > 0 {
					n++
				}
				return true
			})
			done = done && n == 2*perRelay
			s.mu.Unlock()
		}
		if done {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the subscribers did not receive every event")
		}
		time.Sleep(20 * time.Millisecond)
	}
	for i, s := range subs {
		s.mu.Lock()
		for id, n := range s.ids {
			if n != 1 {
				t.Errorf("subscriber %d received %s %d times", i, id, n)
			}
		}
		s.mu.Unlock()
	}
	at := time.Now().Unix()
	var ds [2]state.Digest
	for i, r := range relays {
		d, err := fetchState(ctx, r.base, at)
		if err != nil {
			t.Fatal(err)
		}
		ds[i] = d
	}
	if ds[0].Seq != ds[1].Seq || ds[0].Digest != ds[1].Digest || ds[0].Seq < 2*perRelay {
		t.Fatalf("relays disagree: seq %d digest %s vs seq %d digest %s (first differing view %q)",
			ds[0].Seq, ds[0].Digest, ds[1].Seq, ds[1].Digest, state.FirstDifference(ds[0], ds[1]))
	}
}

var idRe = regexp.MustCompile(`"id":"([0-9a-f]{64})"`)

// subscribe reads base's GET /stream?t=two, closing ready once the stream
// is live, and gives got the id of every event frame.
func subscribe(ctx context.Context, t *testing.T, base string, ready chan struct{}, got func(id string)) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/stream?t=two", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err)
		close(ready)
		return
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	live := false
	for sc.Scan() {
		line := sc.Text()
		if !live && strings.HasPrefix(line, ": live") {
			live = true
			close(ready)
		}
		if m := idRe.FindStringSubmatch(line); strings.HasPrefix(line, "data:") && m != nil {
			got(m[1])
		}
	}
	if !live {
		close(ready)
	}
}

// TestAgentRateLimitIsGlobal runs two relay processes over one database
// with a limit of 3 events per agent per minute: an agent publishing on
// both gets 3 events in, not 3 on each.
func TestAgentRateLimitIsGlobal(t *testing.T) {
	pg := pgtest.DB(t)
	dir := t.TempDir()
	id := []string{"--relay-key", filepath.Join(dir, "relay.key"), "--public-base-url", "http://relay.test", "--rate-agent", "3"}
	relays := []*relayProc{startProc(t, pg, id...), startProc(t, pg, id...)}
	seed := make([]byte, 32)
	seed[0] = 77
	k := ed25519.NewKeyFromSeed(seed)
	for i := range 4 {
		r := relays[i%2]
		e := &protocol.Event{CreatedAt: time.Now().Unix(), Kind: 1, Content: fmt.Sprint("limited ", i), Tags: [][]string{}}
		e.Sign(k)
		res, err := client.New(r.base).Publish(context.Background(), e, false)
		if i < 3 && (err != nil || !res.Accepted) {
			t.Fatalf("event %d on relay %d refused: %v", i, i%2, err)
		}
		var ce *client.Error
		if i == 3 && (!errors.As(err, &ce) || ce.Status != http.StatusTooManyRequests || ce.Code != "rate_limited") {
			t.Fatalf("the fourth event in a minute, on the other relay: %v %+v, want 429 rate_limited", err, res)
		}
	}
}

// TestKill9OneOfTwoRelaysLosesNothing publishes on two relay processes
// over one database, kills one with SIGKILL under load, and requires every
// event either answered 200 to be served by the survivor, which keeps
// accepting meanwhile.
func TestKill9OneOfTwoRelaysLosesNothing(t *testing.T) {
	pg := pgtest.DB(t)
	dir := t.TempDir()
	id := []string{"--relay-key", filepath.Join(dir, "relay.key"), "--public-base-url", "http://relay.test", "--rate-agent", "0", "--rate-ip", "0"}
	relays := []*relayProc{startProc(t, pg, id...), startProc(t, pg, id...)}
	var mu sync.Mutex
	var acked []string
	var inflight atomic.Int64
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl := client.New(relays[w%2].base)
			seed := make([]byte, 32)
			seed[0], seed[1] = byte(w), 9
			k := ed25519.NewKeyFromSeed(seed)
			for i := 0; ctx.Err() == nil; i++ {
				e := &protocol.Event{CreatedAt: time.Now().Unix(), Kind: 1, Content: fmt.Sprint(w, "-", i), Tags: [][]string{{"t", "crash"}}}
				e.Sign(k)
				inflight.Add(1)
				res, err := cl.Publish(ctx, e, false)
				inflight.Add(-1)
				if err == nil && res.Accepted {
					mu.Lock()
					acked = append(acked, e.ID)
					mu.Unlock()
				}
			}
		}()
	}
	for start := time.Now(); ; time.Sleep(10 * time.Millisecond) {
		mu.Lock()
		n := len(acked)
		mu.Unlock()
		if n > 300 && inflight.Load() > 0 || time.Since(start) > 20*time.Second {
			break
		}
	}
	if err := relays[0].cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	relays[0].cmd.Wait()
	mu.Lock()
	atKill := len(acked)
	mu.Unlock()
	// The survivor keeps accepting.
	for start := time.Now(); ; time.Sleep(10 * time.Millisecond) {
		mu.Lock()
		n := len(acked)
		mu.Unlock()
		if n > atKill+50 || time.Since(start) > 20*time.Second {
			break
		}
	}
	cancel()
	wg.Wait()
	mu.Lock()
	ids := append([]string(nil), acked...)
	mu.Unlock()
	if len(ids) < atKill+50 {
		t.Fatalf("the survivor accepted %d events after the kill", len(ids)-atKill)
	}
	missing := 0
	for _, id := range ids {
		resp, err := http.Get(relays[1].base + "/events/" + id)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			missing++
		}
	}
	if missing > 0 {
		t.Fatalf("%d of %d acknowledged events lost after kill -9 of one relay", missing, len(ids))
	}
	t.Logf("all %d acknowledged events served by the survivor (%d before the kill)", len(ids), atKill)
}
