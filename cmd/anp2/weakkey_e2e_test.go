package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/anp2net/relay/client"
	"github.com/anp2net/relay/protocol"
)

// smallOrderIDs are agent_ids that are points of small order: the
// identity, the point of order 2 and one of order 4. crypto/ed25519 lets
// anyone sign for them; libsodium (D14) does not.
var smallOrderIDs = []string{
	"0100000000000000000000000000000000000000000000000000000000000000",
	"ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
	"0000000000000000000000000000000000000000000000000000000000000000",
}

// forgeFor returns e in agent's name, signed without any key: R = the
// identity, S = 0, which crypto/ed25519 accepts under a small-order key
// when the challenge k is a multiple of the key's order; created_at is
// moved back a second at a time until it is.
func forgeFor(t *testing.T, e protocol.Event, agent string) *protocol.Event {
	t.Helper()
	sig := append([]byte{1}, make([]byte, 63)...)
	pub, _ := hex.DecodeString(agent)
	for range 64 {
		e.AgentID, e.Sig = agent, hex.EncodeToString(sig)
		id := e.ComputeID()
		e.ID = hex.EncodeToString(id[:])
		if ed25519.Verify(pub, id[:], sig) {
			return &e
		}
		e.CreatedAt--
	}
	t.Fatalf("no forgery for %s", agent)
	return nil
}

// weakKeyCode reads the code of a {"detail","code"} answer.
func weakKeyCode(b []byte) string {
	var ans struct{ Code string }
	json.Unmarshal(b, &ans)
	return ans.Code
}

// TestForgedFlagsUnderSmallOrderKeys closes the small-order key forgery
// (D14) on a real relay process: three kind 7 flags forged, without any
// key, under three small-order agent_ids (each verifies by
// crypto/ed25519) are answered 400 weak_key and the post stays visible to
// anonymous readers; a dry run names weak_key; POST /gossip, `anp2
// import` and `anp2 replay` refuse such events; and a D4 Authorization
// header in a small-order key's name is a 401.
func TestForgedFlagsUnderSmallOrderKeys(t *testing.T) {
	dir := t.TempDir()
	p := startProc(t, filepath.Join(dir, "weak.db"))
	post := signed(seededKey(400), protocol.KindPost, "not to be hidden by forgeries")
	if _, err := client.New(p.base).Publish(context.Background(), post, false); err != nil {
		t.Fatal(err)
	}
	var flags []*protocol.Event
	for _, agent := range smallOrderIDs {
		f := protocol.Event{CreatedAt: time.Now().Unix(), Kind: protocol.KindFlag, Content: `{"category":"spam"}`,
			Tags: [][]string{{"e", post.ID}}}
		flags = append(flags, forgeFor(t, f, agent))
	}
	for i, f := range flags {
		st, _, body := httpDo(t, "POST", p.base+"/events", protocol.AppendJSON(nil, f), "Content-Type", "application/json")
		if st != 400 || weakKeyCode(body) != protocol.CodeWeakKey {
			t.Errorf("flag forged for %s: %d %s, want 400 weak_key", smallOrderIDs[i], st, body)
		}
	}
	// Flags take effect within about a second; give them three.
	time.Sleep(3 * time.Second)
	if st, _, body := httpDo(t, "GET", p.base+"/events/"+post.ID, nil); st != 200 {
		t.Errorf("the post after three forged flags: %d %s, want 200", st, body)
	}

	st, _, body := httpDo(t, "POST", p.base+"/events/dry-run", protocol.AppendJSON(nil, flags[0]), "Content-Type", "application/json")
	if st != 200 || !bytes.Contains(body, []byte(`"code":"weak_key"`)) || bytes.Contains(body, []byte(`"valid":true`)) {
		t.Errorf("dry run of a forged flag: %d %s", st, body)
	}

	gossip, _ := json.Marshal(flags)
	st, _, body = httpDo(t, "POST", p.base+"/gossip", gossip, "Content-Type", "application/json")
	var g struct {
		Accepted int `json:"accepted"`
		Rejected []struct {
			Code string `json:"code"`
		} `json:"rejected"`
	}
	if st != 200 || json.Unmarshal(body, &g) != nil || g.Accepted != 0 || len(g.Rejected) != 3 {
		t.Errorf("gossip of forged flags: %d %s", st, body)
	}
	for _, r := range g.Rejected {
		if r.Code != protocol.CodeWeakKey {
			t.Errorf("gossip of forged flags: %s, want weak_key for each", body)
		}
	}

	// A file of the post and the forged flags: import stores the post and
	// rejects the flags; replay folds the post and lists the flags invalid.
	var file []byte
	for _, e := range append([]*protocol.Event{post}, flags...) {
		file = append(protocol.AppendJSON(file, e), '\n')
	}
	path := filepath.Join(dir, "forged.jsonl")
	if err := os.WriteFile(path, file, 0o644); err != nil {
		t.Fatal(err)
	}
	out := runCLI(t, "import", "--db", filepath.Join(dir, "import.db"), path)
	if !strings.Contains(out, "read 4, accepted 1, duplicate 0, rejected 3") || !regexp.MustCompile(`rejected weak_key\s+3`).MatchString(out) {
		t.Errorf("import of forged flags: %s", out)
	}
	out = runCLI(t, "replay", path)
	if !strings.Contains(out, "folded 1 ") || !regexp.MustCompile(`invalid weak_key\s+3`).MatchString(out) {
		t.Errorf("replay of forged flags: %s", out)
	}

	// D4 reader authentication in the identity's name.
	auth := protocol.Event{CreatedAt: time.Now().Unix(), Kind: protocol.KindHTTPAuth,
		Tags: [][]string{{"u", p.base + "/export"}, {"method", "GET"}}}
	forged := forgeFor(t, auth, smallOrderIDs[0])
	hdr := "ANP2 " + base64.StdEncoding.EncodeToString(protocol.AppendJSON(nil, forged))
	if st, _, body := httpDo(t, "GET", p.base+"/export", nil, "Authorization", hdr); st != 401 {
		t.Errorf("export with a forged Authorization header: %d %.200s, want 401", st, body)
	}
}
