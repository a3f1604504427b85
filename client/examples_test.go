package client_test

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/anp2net/relay/client"
)

// The example agents settle a task on a real relay process: the provider
// and verifier make their own keys, the requester exits 0 once the task is
// paid, and credit has moved from requester to provider.
func TestExampleAgentsSettleATask(t *testing.T) {
	p := startRelayProc(t)
	bins := map[string]string{}
	for _, name := range []string{"provider", "verifier", "requester"} {
		bins[name] = buildCmd(t, "client/examples/"+name, name)
	}
	for _, name := range []string{"provider", "verifier"} {
		cmd := exec.Command(bins[name], "--relay", p.URL(), "--tasks", "1")
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			cmd.Process.Kill()
			cmd.Wait()
			if t.Failed() {
				t.Logf("%s:\n%s", name, out.String())
			}
		})
	}
	keyFile := filepath.Join(t.TempDir(), "requester.key")
	id, err := client.LoadOrCreateKey(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	req := exec.Command(bins["requester"], "--relay", p.URL(), "--key", keyFile, "--text", "settle me", "--timeout", "90s")
	out, err := req.CombinedOutput()
	if err != nil {
		t.Fatalf("requester: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`settled task=(\w+) status=paid provider=(\w+)`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("requester said:\n%s", out)
	}
	c := client.New(p.URL())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for agent, want := range map[string]string{id.AgentID(): "-10", string(m[2]): "9"} {
		cr, err := c.Credit(ctx, agent)
		if err != nil || cr.Balance.String() != want {
			t.Errorf("credit of %s: %+v %v, want balance %s", agent, cr, err, want)
		}
	}
}
