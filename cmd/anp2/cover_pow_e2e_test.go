package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/tasks/taskstest"
)

// TestCoverPoWDateRuleAlikeOnEveryPath: the mandatory PoW on kinds 0 and
// 50 binds events created from the day the network made it mandatory
// (protocol.DefaultPoWPolicy().ActiveFrom), on every path that stores an
// event: an unmined profile dated the day before enters through `anp2
// import` and counts in `anp2 replay`; one dated the day after is refused
// pow_required by both, and by POST /events and POST /events/batch of a
// real relay process when fresh, and by its POST /gossip from a stranger.
func TestCoverPoWDateRuleAlikeOnEveryPath(t *testing.T) {
	dir := t.TempDir()
	from := protocol.DefaultPoWPolicy().ActiveFrom
	oldie, late, fresh := taskstest.NewAgent("pow-old"), taskstest.NewAgent("pow-late"), taskstest.NewAgent("pow-fresh")
	before := oldie.Sign(protocol.KindProfile, from-86400, map[string]any{"name": "before the rule"})
	after := late.Sign(protocol.KindProfile, from+86400, map[string]any{"name": "after the rule"})
	var lines bytes.Buffer
	for _, e := range []*protocol.Event{before, after} {
		lines.Write(protocol.AppendJSON(nil, e))
		lines.WriteByte('\n')
	}
	file := filepath.Join(dir, "history.jsonl")
	if err := os.WriteFile(file, lines.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(dir, "pow.db")
	if out := runCLI(t, "import", "--db", db, file); !strings.Contains(out, "accepted 1,") || !strings.Contains(out, protocol.CodePoWRequired) {
		t.Fatalf("import: %s", out)
	}
	at := "--at=" + strconv.FormatInt(time.Now().Unix(), 10)
	if out := runCLI(t, "replay", at, file); !strings.Contains(out, "folded 1") || !strings.Contains(out, protocol.CodePoWRequired) {
		t.Fatalf("replay: %s", out)
	}
	p := startProc(t, db)
	var got []protocol.Event
	coverGetJSON(t, p.base+"/events?kinds=0&include_revoked=true&limit=10", &got)
	if len(got) != 1 || got[0].ID != before.ID {
		t.Fatalf("stored profiles: %+v", got)
	}
	now := time.Now().Unix()
	unmined := fresh.Sign(protocol.KindProfile, now, map[string]any{"name": "fresh"})
	body := protocol.AppendJSON(nil, unmined)
	list := append(append([]byte("["), body...), ']')
	for path, b := range map[string][]byte{"/events": body, "/events/batch": list, "/gossip": list} {
		resp, err := http.Post(p.base+path, "application/json", bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		var ans bytes.Buffer
		ans.ReadFrom(resp.Body)
		resp.Body.Close()
		if !strings.Contains(ans.String(), protocol.CodePoWRequired) {
			t.Fatalf("POST %s of a fresh unmined profile: %d %s", path, resp.StatusCode, ans.String())
		}
	}
}

// coverGetJSON GETs url from a relay process into out, requiring a 200.
func coverGetJSON(t *testing.T, url string, out any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || json.NewDecoder(resp.Body).Decode(out) != nil {
		t.Fatalf("GET %s: %d", url, resp.StatusCode)
	}
}
