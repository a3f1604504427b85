package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/relaytest"
	"github.com/anp2net/relay/relay/tiers"
	"github.com/anp2net/relay/tasks/taskstest"
)

func httpJSON(t *testing.T, method, url string, body []byte) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(method, url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var m map[string]any
	json.Unmarshal(b, &m)
	return resp.StatusCode, m
}

// TestOperatorAgentAndTiersE2E runs a real anp2 serve process as its own
// operator agent with the new-agent tiers on: its capacity report appears
// in /capacity signed by its relay key, a fresh key is throttled at 30 a
// minute while a whitelisted one is not, a donation shows in /funding as
// unverified, and anp2 replay reproduces /state with the funding view.
func TestOperatorAgentAndTiersE2E(t *testing.T) {
	a := taskstest.Pool(3)
	fresh, seed, donor := a[0], a[1], a[2]
	db := filepath.Join(t.TempDir(), "op.db")
	p := startProc(t, db, "--operator-report", "2s", "--new-agent-tiers", "--seed-agent-whitelist", seed.ID, "--rate-agent", "0",
		"--operator-funding", `{"addresses":[{"chain":"ETH","address":"0x52908400098527886e0f7030069857d2e4169ee7"}],"disclose_totals":true}`)
	_, self := httpJSON(t, "GET", p.base+"/relays", nil)
	relayID, _ := self["self"].(map[string]any)["agent_id"].(string)
	now := time.Now().Unix()
	post := func(e *protocol.Event) (int, map[string]any) {
		return httpJSON(t, "POST", p.base+"/events", protocol.AppendJSON(nil, e))
	}
	for i := range 31 {
		st, body := post(fresh.Sign(protocol.KindPost, now, fmt.Sprint("fresh ", i)))
		if i < 30 && st != 200 || i == 30 && (st != 429 || body["code"] != tiers.CodeNewRate) {
			t.Fatalf("fresh post %d: %d %v", i, st, body)
		}
		if st, body := post(seed.Sign(protocol.KindPost, now, fmt.Sprint("seed ", i))); st != 200 {
			t.Fatalf("whitelisted post %d: %d %v", i, st, body)
		}
	}
	donation := donor.Sign(protocol.KindDonation, now, map[string]any{"type": "sent", "chain": "BTC", "tx_hash": strings.Repeat("ab", 32),
		"amount": "0.001", "verification": map[string]any{"status": "verified"}}, []string{"p", relayID}, []string{"chain", "BTC"})
	if st, body := post(donation); st != 200 {
		t.Fatalf("donation: %d %v", st, body)
	}
	_, fund := httpJSON(t, "GET", p.base+"/funding/"+relayID, nil)
	ds, _ := fund["donations"].([]any)
	addrs, _ := fund["addresses"].([]any)
	if fund["received_count"] != 1.0 || len(ds) != 1 || ds[0].(map[string]any)["verification"].(map[string]any)["status"] != "unverified" ||
		len(addrs) != 1 || fund["disclose_totals"] != true {
		t.Fatalf("/funding: %v", fund)
	}
	relaytest.Eventually(t, "the operator's capacity report", func() bool {
		_, c := httpJSON(t, "GET", p.base+"/capacity", nil)
		reps, _ := c["reports"].([]any)
		return len(reps) == 1 && reps[0].(map[string]any)["operator"] == relayID && reps[0].(map[string]any)["valid"] == true
	})
	at := "--at=" + strconv.FormatInt(time.Now().Unix(), 10)
	if out := runCLI(t, "replay", at, "--compare", p.base, p.base); !strings.Contains(out, "match: ") {
		t.Fatalf("replay: %s", out)
	}
}

// TestSeedWhitelistFromEnvironment: the whitelist is read from
// ANP2_SEED_AGENT_WHITELIST, or else from the reference relay's
// SEED_AGENT_WHITELIST (seed §8.1).
func TestSeedWhitelistFromEnvironment(t *testing.T) {
	a := taskstest.Pool(2)
	for _, c := range []struct{ env, exempt, other string }{
		{"ANP2_SEED_AGENT_WHITELIST=" + a[0].ID, a[0].ID, a[1].ID},
		{"SEED_AGENT_WHITELIST=" + a[1].ID, a[1].ID, a[0].ID},
	} {
		p := startProcEnv(t, []string{c.env}, filepath.Join(t.TempDir(), "wl.db"), "--new-agent-tiers")
		if _, tier := httpJSON(t, "GET", p.base+"/agents/"+c.exempt+"/tier", nil); tier["tier"] != "exempt" {
			t.Fatalf("%s: the listed agent's tier: %v", c.env, tier)
		}
		if _, tier := httpJSON(t, "GET", p.base+"/agents/"+c.other+"/tier", nil); tier["tier"] != "new" {
			t.Fatalf("%s: another agent's tier: %v", c.env, tier)
		}
	}
}
