package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/tasks/taskstest"
)

// TestServeRefusesPoWBypassWithoutMultiVerifier runs the real binary: the
// standing-based PoW bypass, asked for by flag or by environment, stops
// serve before it opens the log unless multi-verifier consensus is in
// force, and over a PostgreSQL log.
func TestServeRefusesPoWBypassWithoutMultiVerifier(t *testing.T) {
	db := filepath.Join(t.TempDir(), "refused.db")
	for _, c := range []struct {
		name string
		args []string
		env  string
		want string
	}{
		{"flag", []string{"--standing-pow-bypass"}, "", "needs multi-verifier consensus"},
		{"environment", nil, "ANP2_STANDING_POW_BYPASS=true", "needs multi-verifier consensus"},
		{"one verifier", []string{"--standing-pow-bypass", "--standing-min-verifiers", "1"}, "", "needs multi-verifier consensus"},
		{"postgres", []string{"--standing-pow-bypass", "--standing-min-verifiers", "2", "--db", "postgres://nobody@127.0.0.1:1/none"}, "", "needs the SQLite log"},
	} {
		args := append([]string{"serve", "--addr", "127.0.0.1:0", "--db", db}, c.args...)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		cmd := exec.CommandContext(ctx, binary, args...)
		cmd.Env = os.Environ()
		if c.env != "" {
			cmd.Env = append(cmd.Env, c.env)
		}
		out, err := cmd.CombinedOutput()
		cancel()
		if err == nil || !strings.Contains(string(out), c.want) {
			t.Fatalf("%s: serve %v: err %v, output %q; want a refusal naming %q", c.name, c.args, err, out, c.want)
		}
	}
	if _, err := os.Stat(db); !os.IsNotExist(err) {
		t.Fatalf("a refused serve created its log: %v", err)
	}
}

// TestStandingPoWBypassE2E runs anp2 serve with the bypass on (threshold
// one task, two verifiers): after one task passed by two trusted
// verifiers, the provider's unmined request is stored and a stranger's is
// refused; anp2 replay refuses the bypassed event unless told the log
// comes from a bypassing relay, and then reproduces /state.
func TestStandingPoWBypassE2E(t *testing.T) {
	a := taskstest.Pool(6)
	requester, provider, v1, v2, voter, stranger := a[0], a[1], a[2], a[3], a[4], a[5]
	p := startProc(t, filepath.Join(t.TempDir(), "standing.db"), "--standing-pow-bypass", "--standing-min-verifiers", "2",
		"--standing-pow-threshold", "1", "--rate-agent", "0")
	now := time.Now().Unix() - 30
	post := func(e *protocol.Event) (int, map[string]any) {
		return httpJSON(t, "POST", p.base+"/events", protocol.AppendJSON(nil, e))
	}
	req := taskstest.Request(requester, now, now+3600, taskstest.Reward{}, false)
	if err := protocol.Mine(context.Background(), req, 12); err != nil {
		t.Fatal(err)
	}
	req.Sign(requester.Key)
	for _, e := range []*protocol.Event{
		voter.Sign(protocol.KindTrustVote, now, map[string]any{"score": 1}, []string{"p", v1.ID}),
		voter.Sign(protocol.KindTrustVote, now, map[string]any{"score": 1}, []string{"p", v2.ID}),
		req, taskstest.Accept(provider, now+1, req), taskstest.Result(provider, now+2, req),
		taskstest.Verify(v1, now+3, req, protocol.VerdictPassed, 0.9), taskstest.Verify(v2, now+4, req, protocol.VerdictPassed, 0.9),
	} {
		if st, body := post(e); st != 200 {
			t.Fatalf("kind %d: %d %v", e.Kind, st, body)
		}
	}
	if st, body := post(taskstest.Request(stranger, now+5, now+3600, taskstest.Reward{}, false)); st != 400 || body["code"] != protocol.CodePoWRequired {
		t.Fatalf("a stranger's unmined request: %d %v", st, body)
	}
	// The pre-check reads the published trust snapshot, refreshed in the
	// background after votes: wait until it shows the standing.
	waitFor(t, "the provider's standing", func() bool {
		_, s := httpJSON(t, "GET", p.base+"/agents/"+provider.ID+"/standing", nil)
		return s["pow_bypass"] == true
	})
	bypassed := taskstest.Request(provider, now+5, now+3600, taskstest.Reward{}, false)
	if st, body := post(bypassed); st != 200 {
		t.Fatalf("the provider's unmined request: %d %v", st, body)
	}
	at := "--at=" + strconv.FormatInt(time.Now().Unix(), 10)
	out, err := exec.Command(binary, "replay", at, "--compare", p.base, p.base).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "MISMATCH") || !strings.Contains(string(out), protocol.CodePoWRequired) {
		t.Fatalf("a strict replay of a bypassing relay's log: err %v\n%s", err, out)
	}
	if out := runCLI(t, "replay", "--standing-pow-bypass", at, "--compare", p.base, p.base); !strings.Contains(out, "match: ") {
		t.Fatalf("replay --standing-pow-bypass: %s", out)
	}
}
