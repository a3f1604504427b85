package main

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/governance"
	"github.com/anp2net/relay/tasks/taskstest"
	"github.com/cloudflare/circl/sign/mldsa/mldsa65"
)

// TestGovernanceFreezeE2E: a real `anp2 serve` process configured with a
// 2-of-3 seed multisig (flags) refuses publishes with 503 network_frozen
// right after a 2-of-3 freeze while reads work, accepts the unfreeze, and
// `anp2 replay` under the same keys (ANP2_* environment) reproduces its
// /state; without the keys the replay names the governance view.
func TestGovernanceFreezeE2E(t *testing.T) {
	dir := t.TempDir()
	var seeds []taskstest.Agent
	var ids []string
	for _, n := range []string{"e2e-seed-a", "e2e-seed-b", "e2e-seed-c"} {
		a := taskstest.NewAgent(n)
		seeds, ids = append(seeds, a), append(ids, a.ID)
	}
	p := startProc(t, filepath.Join(dir, "gov.db"), "--seed-keys", strings.Join(ids, ","), "--seed-threshold", "2")
	send := func(e *protocol.Event) (int, string) {
		resp, err := http.Post(p.base+"/events", "application/json", bytes.NewReader(protocol.AppendJSON(nil, e)))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body struct{ Code string }
		json.NewDecoder(resp.Body).Decode(&body)
		return resp.StatusCode, body.Code + resp.Header.Get("Retry-After")
	}
	actOf := func(author taskstest.Agent, content string, co taskstest.Agent) *protocol.Event {
		tag, err := protocol.Cosign(co.Key, 30, content)
		if err != nil {
			t.Fatal(err)
		}
		return author.Sign(30, time.Now().Unix(), content, tag)
	}
	alice := taskstest.NewAgent("e2e-alice")
	if st, _ := send(alice.Sign(1, time.Now().Unix(), "before")); st != 200 {
		t.Fatalf("post before freeze: %d", st)
	}
	weak := seeds[0].Sign(30, time.Now().Unix(), `{"act":"freeze_network","reason":"one key"}`)
	if st, code := send(weak); st != 200 {
		t.Fatalf("1-of-3 freeze: %d %s", st, code)
	}
	if st, code := send(alice.Sign(1, time.Now().Unix(), "after a 1-of-3 freeze")); st != 200 {
		t.Fatalf("post after a 1-of-3 freeze: %d %s", st, code)
	}
	freeze := actOf(seeds[0], `{"act":"freeze_network","reason":"e2e"}`, seeds[1])
	if st, code := send(freeze); st != 200 {
		t.Fatalf("freeze: %d %s", st, code)
	}
	// The same content and cosignature on another seed holder's event, a
	// second later (acts of one second are ordered by id).
	replay := actOf(seeds[2], `{"act":"freeze_network","reason":"e2e"}`, seeds[1])
	replay = seeds[2].Sign(30, freeze.CreatedAt+1, replay.Content, replay.Tags...)
	if st, code := send(replay); st != 200 {
		t.Fatalf("replayed freeze: %d %s", st, code)
	}
	resp, err := http.Get(p.base + "/sovereign_log")
	if err != nil {
		t.Fatal(err)
	}
	var rows []struct {
		ID      string `json:"id"`
		Ignored string `json:"ignored"`
	}
	json.NewDecoder(resp.Body).Decode(&rows)
	resp.Body.Close()
	ignored := map[string]string{}
	for _, r := range rows {
		ignored[r.ID] = r.Ignored
	}
	if len(rows) != 3 || ignored[weak.ID] != "below_threshold" || ignored[freeze.ID] != "" || ignored[replay.ID] != "replayed" {
		t.Fatalf("sovereign log: %+v", rows)
	}
	if st, code := send(alice.Sign(1, time.Now().Unix(), "during")); st != 503 || !strings.HasPrefix(code, "network_frozen") || code == "network_frozen" {
		t.Fatalf("post during freeze: %d %s", st, code)
	}
	if resp, err := http.Get(p.base + "/events?kinds=1"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("read during freeze: %v", err)
	}
	at := "--at=" + strconv.FormatInt(time.Now().Unix()+5, 10)
	env := []string{"ANP2_SEED_KEYS=" + strings.Join(ids, ","), "ANP2_SEED_THRESHOLD=2"}
	cmd := exec.Command(binary, "replay", at, "--compare", p.base, p.base)
	cmd.Env = append(cmd.Environ(), env...)
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "match: ") {
		t.Fatalf("replay with the keys: %v\n%s", err, out)
	}
	out, err := exec.Command(binary, "replay", at, "--compare", p.base, p.base).CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || !strings.Contains(string(out), `first differing view "governance"`) {
		t.Fatalf("replay without the keys: %v\n%s", err, out)
	}
	if st, code := send(actOf(seeds[2], `{"act":"unfreeze","reason":"e2e over"}`, seeds[1])); st != 200 {
		t.Fatalf("unfreeze: %d %s", st, code)
	}
	if st, code := send(alice.Sign(1, time.Now().Unix(), "after")); st != 200 {
		resp, _ := http.Get(p.base + "/sovereign_log")
		var b bytes.Buffer
		b.ReadFrom(resp.Body)
		t.Fatalf("post after unfreeze: %d %s\n%s", st, code, b.String())
	}
}

// TestGovernancePQE2E: a real `anp2 serve` process whose sovereign key has
// an ML-DSA-65 part (--pq-keys file) ignores a ban whose post-quantum
// signature is forged and enforces one that is dual-signed.
func TestGovernancePQE2E(t *testing.T) {
	dir := t.TempDir()
	sov := taskstest.NewAgent("e2e-sov")
	pk, sk, err := mldsa65.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	_, forger, _ := mldsa65.GenerateKey(rand.Reader)
	raw, _ := pk.MarshalBinary()
	keyFile := filepath.Join(dir, "pq.json")
	b, _ := json.Marshal(map[string]string{sov.ID: hex.EncodeToString(raw)})
	if err := os.WriteFile(keyFile, b, 0o600); err != nil {
		t.Fatal(err)
	}
	p := startProc(t, filepath.Join(dir, "pq.db"), "--sovereign-keys", sov.ID, "--pq-keys", keyFile)
	send := func(e *protocol.Event) int {
		resp, err := http.Post(p.base+"/events", "application/json", bytes.NewReader(protocol.AppendJSON(nil, e)))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	mallory := taskstest.NewAgent("e2e-mallory")
	ban := func(reason string, key *mldsa65.PrivateKey) *protocol.Event {
		content := `{"act":"ban_agent","reason":"` + reason + `"}`
		tag, err := governance.PQSign(key, sov.ID, governance.KindSovereignAct, content)
		if err != nil {
			t.Fatal(err)
		}
		return sov.Sign(governance.KindSovereignAct, time.Now().Unix(), content, []string{"p", mallory.ID}, []string{"scheme", governance.SchemeDual}, tag)
	}
	if st := send(ban("forged", forger)); st != 200 {
		t.Fatalf("forged ban: %d", st)
	}
	if st := send(mallory.Sign(1, time.Now().Unix(), "still here")); st != 200 {
		t.Fatalf("post after a forged ban: %d", st)
	}
	if st := send(ban("dual", sk)); st != 200 {
		t.Fatalf("dual ban: %d", st)
	}
	if st := send(mallory.Sign(1, time.Now().Unix(), "banned")); st != 403 {
		t.Fatalf("post after the dual ban: %d", st)
	}
}

// TestGovernancePQCLI: two sovereign holders make ML-DSA-65 keys with
// `anp2 pqkey`, sign a ban with `anp2 cosign --pq-key`, and the act
// published with `anp2 publish` is enforced by a real `anp2 serve`.
func TestGovernancePQCLI(t *testing.T) {
	dir := t.TempDir()
	path := func(n string) string { return filepath.Join(dir, n) }
	a := strings.TrimSpace(runCLI(t, "keygen", "--key", path("a.key")))
	b := strings.TrimSpace(runCLI(t, "keygen", "--key", path("b.key")))
	m := strings.TrimSpace(runCLI(t, "keygen", "--key", path("m.key")))
	pq := map[string]string{}
	for _, n := range []string{"a", "b"} {
		line := runCLI(t, "pqkey", "--key", path(n+".pq"), "--agent-key", path(n+".key"))
		if err := json.Unmarshal([]byte(line), &pq); err != nil {
			t.Fatalf("pqkey: %v: %s", err, line)
		}
	}
	raw, _ := json.Marshal(pq)
	if err := os.WriteFile(path("pq.json"), raw, 0o600); err != nil {
		t.Fatal(err)
	}
	p := startProc(t, path("cli.db"), "--sovereign-keys", a+","+b, "--pq-keys", path("pq.json"))
	content := `{"act":"ban_agent","reason":"cli"}`
	for _, n := range []string{"a", "b"} {
		out := runCLI(t, "cosign", "--key", path(n+".key"), "--pq-key", path(n+".pq"), "--kind", "30", "--content", content)
		if err := os.WriteFile(path(n+".cosign"), []byte(out), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	out := runCLI(t, "publish", "--relay", p.base, "--key", path("a.key"), "--kind", "30", "--content", content,
		"--tag", "p,"+m, "--tag", "scheme,"+governance.SchemeDual, "--cosign", path("a.cosign"), "--cosign", path("b.cosign"))
	if !strings.Contains(out, `"accepted":true`) {
		t.Fatalf("publish: %s", out)
	}
	res, err := exec.Command(binary, "publish", "--relay", p.base, "--key", path("m.key"), "--content", "hi").CombinedOutput()
	if err == nil || !strings.Contains(string(res), "agent_banned") {
		t.Fatalf("banned agent's publish: %v %s", err, res)
	}
}
