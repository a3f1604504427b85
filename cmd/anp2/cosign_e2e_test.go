package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/anp2net/relay/protocol"
)

// TestCosignCLI: two agents cosign a checkpoint's content with
// `anp2 cosign`, the author attaches both with `anp2 publish --cosign`, and
// the event a real relay serves back carries two valid cosignatures.
func TestCosignCLI(t *testing.T) {
	dir := t.TempDir()
	p := startProc(t, filepath.Join(dir, "cosign.db"))
	content := `{"checkpoint_id":"cp-1","state_hash":"00","event_count":0,"as_of":1790000000}`
	var files []string
	for _, name := range []string{"a", "b"} {
		key := filepath.Join(dir, name+".key")
		runCLI(t, "keygen", "--key", key)
		tag := runCLI(t, "cosign", "--key", key, "--kind", "12", "--content", content)
		f := filepath.Join(dir, name+".cosign")
		if err := os.WriteFile(f, []byte(tag), 0o600); err != nil {
			t.Fatal(err)
		}
		files = append(files, "--cosign", f)
	}
	author := filepath.Join(dir, "author.key")
	agent := strings.TrimSpace(runCLI(t, "keygen", "--key", author))
	args := append([]string{"publish", "--relay", p.base, "--key", author, "--kind", "12", "--content", content}, files...)
	if out := runCLI(t, args...); !strings.Contains(out, `"accepted":true`) {
		t.Fatalf("publish: %s", out)
	}
	line := strings.TrimSpace(runCLI(t, "get", "--relay", p.base, "--authors", agent))
	var e protocol.Event
	if err := json.Unmarshal([]byte(line), &e); err != nil {
		t.Fatalf("%v: %s", err, line)
	}
	cs := protocol.Cosignatures(&e)
	if len(cs) != 2 || !cs[0].Valid || !cs[1].Valid || cs[0].AgentID == cs[1].AgentID {
		t.Fatalf("cosignatures: %+v", cs)
	}
}

// TestCheckpointCLI: `anp2 checkpoint` prints the same kind 12 content
// from a running relay and from its database file, counting the events up
// to --at (the relay's own announcement included).
func TestCheckpointCLI(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "cp.db")
	p := startProc(t, db)
	key := filepath.Join(dir, "a.key")
	runCLI(t, "keygen", "--key", key)
	for _, text := range []string{"one", "two", "three"} {
		runCLI(t, "publish", "--relay", p.base, "--key", key, "--kind", "1", "--content", text)
	}
	at := strconv.FormatInt(time.Now().Unix(), 10)
	fromRelay := strings.TrimSpace(runCLI(t, "checkpoint", "--at", at, "--id", "cp-x", p.base))
	fromDB := strings.TrimSpace(runCLI(t, "checkpoint", "--at", at, "--id", "cp-x", db))
	if fromRelay != fromDB {
		t.Fatalf("relay %s\ndatabase %s", fromRelay, fromDB)
	}
	var cp struct {
		CheckpointID string      `json:"checkpoint_id"`
		StateHash    string      `json:"state_hash"`
		EventCount   int64       `json:"event_count"`
		AsOf         json.Number `json:"as_of"`
	}
	if err := json.Unmarshal([]byte(fromRelay), &cp); err != nil {
		t.Fatalf("%v: %s", err, fromRelay)
	}
	stored := strings.Count(strings.TrimSpace(runCLI(t, "get", "--relay", p.base, "--until", at)), "\n") + 1
	if cp.CheckpointID != "cp-x" || cp.EventCount != int64(stored) || cp.EventCount < 3 || !protocol.IsHex64(cp.StateHash) || cp.AsOf.String() != at {
		t.Fatalf("checkpoint %s", fromRelay)
	}
}
