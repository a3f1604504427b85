package main

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/anp2net/relay/client"
	"github.com/anp2net/relay/protocol"
)

// TestAbuseRedactByStrangers floods a relay with kind 25 redactions from
// fresh keys naming other agents' events (and the relay's own kind 10):
// every one is stored as an ordinary event and nothing is withheld; a
// redaction signed with a key that only claims to be the relay's in its
// content is the same. Bad input to anp2 redact and serve
// --honor-redactions is refused and leaves the log untouched.
func TestAbuseRedactByStrangers(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "abuse.db")
	p := startProc(t, db, "--rate-agent", "0", "--rate-ip", "0")
	victims := tlogKeys(4)
	var targets []*protocol.Event
	for i, k := range victims {
		e := redactEvent(k, 1, fmt.Sprintf("victim post %d", i), []string{"t", "victim"})
		redactMustPublish(t, p.base, e)
		targets = append(targets, e)
	}
	_, relayID := redactRelayKey(t, db+".relay-key")
	rng := rand.New(rand.NewPCG(25, 25))
	var flood []*protocol.Event
	for i := range 300 {
		seed := make([]byte, 32)
		seed[0], seed[1], seed[2] = 0x25, byte(i), byte(i>>8)
		k := ed25519.NewKeyFromSeed(seed)
		target := targets[rng.IntN(len(targets))].ID
		c, _ := json.Marshal(map[string]string{"id": target, "reason": "I am " + relayID})
		flood = append(flood, redactEvent(k, protocol.KindRedaction, string(c), []string{"e", target}, []string{"p", relayID}))
	}
	res, err := client.New(p.base).PublishBatch(context.Background(), flood)
	if err != nil || res.Accepted != len(flood) {
		t.Fatalf("flood: %+v %v", res, err)
	}
	for _, e := range targets {
		if code, b := redactGet(t, p.base, "/events/"+e.ID); code != http.StatusOK {
			t.Fatalf("a stranger's redaction withheld %s: %d %s", e.ID, code, b)
		}
	}
	if code, b := redactGet(t, p.base, "/withheld"); code != http.StatusOK || !strings.Contains(string(b), `"withheld":[]`) {
		t.Fatalf("GET /withheld: %d %s", code, b)
	}
	var st struct{ Revoked int }
	if err := client.New(p.base).GetJSON(context.Background(), "/state", nil, &st); err != nil || st.Revoked != 0 {
		t.Fatalf("state: %+v %v", st, err)
	}
	redactStop(p)

	before, _ := redactRun(t, "replay", db)
	for _, args := range [][]string{
		{"--id", "nothex", "--reason", "x"},
		{"--id", targets[0].ID, "--reason", ""},
		{"--id", targets[0].ID, "--reason", strings.Repeat("r", 1025)},
		{"--id", strings.Repeat("0", 64), "--reason", "unknown event"},
		{"--id", targets[0].ID, "--reason", "x", "--relay-key", filepath.Join(dir, "missing.key")},
		{"--id", flood[0].ID, "--reason", "a redaction is no content"},
	} {
		out, ok := redactRun(t, append([]string{"redact", "--db", db}, args...)...)
		if ok || !strings.Contains(out, "anp2:") {
			t.Fatalf("redact %v:\n%s", args, out)
		}
	}
	if after, _ := redactRun(t, "replay", db); redactDigestAt(t, after) != redactDigestAt(t, before) {
		t.Fatalf("refused redactions changed the log:\n%s\n%s", before, after)
	}
	out, ok := redactRun(t, "serve", "--db", db, "--addr", "127.0.0.1:0", "--honor-redactions", "not-a-key")
	if ok || !strings.Contains(out, "--honor-redactions") {
		t.Fatalf("serve with a bad --honor-redactions:\n%s", out)
	}
}

// redactDigestAt returns the events view and count a replay printed
// (the combined digest moves with the evaluation time).
func redactDigestAt(t *testing.T, out string) string {
	t.Helper()
	i := strings.Index(out, `"events": `)
	j := strings.Index(out, `"views"`)
	if i < 0 || j < 0 {
		t.Fatalf("no state in:\n%s", out)
	}
	k := strings.Index(out[j:], `"events": "`)
	if k < 0 {
		t.Fatalf("no events view in:\n%s", out)
	}
	return out[i:strings.Index(out[i:], ",")+i] + out[j+k:j+k+80]
}
