package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/anp2net/relay/client"
	"github.com/anp2net/relay/protocol"
)

// tlog2Announcements returns the relay's kind 10 events once there are
// at least n.
func tlog2Announcements(t *testing.T, base string, n int) []protocol.Event {
	t.Helper()
	var events []protocol.Event
	tlogEventually(t, fmt.Sprint(n, " kind 10"), func() bool { events = tlog2Fetch(t, base); return len(events) >= n })
	return events
}

func tlog2Fetch(t *testing.T, base string) []protocol.Event {
	t.Helper()
	body, _ := tlogGet(t, base, "/events?kinds=10")
	var events []protocol.Event
	if err := json.Unmarshal(body, &events); err != nil {
		t.Fatalf("/events?kinds=10: %v: %s", err, body)
	}
	return events
}

// tlog2Tag returns the ["tlog", size, root] tag of a kind 10.
func tlog2Tag(t *testing.T, e protocol.Event) (int64, string) {
	t.Helper()
	for _, tag := range e.Tags {
		if len(tag) == 3 && tag[0] == "tlog" {
			n, err := strconv.ParseInt(tag[1], 10, 64)
			if err != nil {
				t.Fatalf("tlog tag %q", tag)
			}
			return n, tag[2]
		}
	}
	t.Fatalf("kind 10 %s has no tlog tag: %v", e.ID, e.Tags)
	return 0, ""
}

// TestTlogAnnouncementCarriesCheckpoint: the relay's kind 10 carries the
// checkpoint signed when it is published, and its root is the root the
// relay's own consistency route gives for that size; a restart that
// changes nothing else publishes no new kind 10 (the checkpoint alone
// never does).
func TestTlogAnnouncementCarriesCheckpoint(t *testing.T) {
	db := filepath.Join(t.TempDir(), "ann.db")
	at := []string{"--addr", tlogFreeAddr(t), "--public-base-url", "http://ann.example", "--rate-agent", "0", "--rate-ip", "0"}
	p := startProc(t, db, at...)
	first := tlog2Announcements(t, p.base, 1)
	if len(first) != 1 {
		t.Fatalf("%d kind 10 at start, want 1", len(first))
	}
	tlog2Tag(t, first[0]) // the checkpoint known at start
	tlogPublish(t, client.New(p.base), tlogKeys(2), rand.New(rand.NewPCG(34, 10)), 40)
	tlogVerifyAll(t, p.base)
	p.cmd.Process.Kill()
	p.cmd.Wait()

	q := startProc(t, db, append(at, "--topics", "weather")...)
	anns := tlog2Announcements(t, q.base, 2)
	if len(anns) != 2 {
		t.Fatalf("%d kind 10 after a restart with new topics, want 2", len(anns))
	}
	newest := anns[0]
	for _, e := range anns {
		if strings.Contains(e.Content, "weather") {
			newest = e
		}
	}
	size, root := tlog2Tag(t, newest)
	if size < 41 {
		t.Fatalf("kind 10 names a tree of %d entries, the log held at least 41", size)
	}
	body, _ := tlogGet(t, q.base, fmt.Sprintf("/tlog/consistency?from=%d", size))
	var c struct {
		FromRoot string `json:"from_root"`
	}
	if err := json.Unmarshal(body, &c); err != nil {
		t.Fatal(err)
	}
	raw, _ := base64.StdEncoding.DecodeString(root)
	if fmt.Sprintf("%x", raw) != c.FromRoot {
		t.Fatalf("kind 10 root %s (%x), the tree of %d has %s", root, raw, size, c.FromRoot)
	}
	q.cmd.Process.Kill()
	q.cmd.Wait()

	r := startProc(t, db, append(at, "--topics", "weather")...)
	tlogPublish(t, client.New(r.base), tlogKeys(1), rand.New(rand.NewPCG(34, 11)), 1) // past the start's announcement
	if n := len(tlog2Fetch(t, r.base)); n != 2 {
		t.Fatalf("%d kind 10 after a restart that changed nothing, want 2: %+v", n, tlog2Fetch(t, r.base))
	}
}

// tlog2Replay runs `anp2 replay` and returns its output and whether it
// exited zero.
func tlog2Replay(t *testing.T, args ...string) (string, bool) {
	t.Helper()
	out, err := exec.Command(binary, append([]string{"replay"}, args...)...).CombinedOutput()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatal(err)
	}
	return string(out), err == nil
}

// tlog2Export writes the relay's log as JSON lines, in seq order, with
// lines i and j swapped when i != j.
func tlog2Export(t *testing.T, base, path string, i, j int) {
	t.Helper()
	var lines [][]byte
	if _, err := client.New(base).ExportThrough(context.Background(), 0, -1, func(_ int64, raw json.RawMessage) error {
		lines = append(lines, append([]byte(nil), raw...))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	lines[i], lines[j] = lines[j], lines[i]
	if err := os.WriteFile(path, append(bytes.Join(lines, []byte("\n")), '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestTlogReplayCompareChecksTree: `replay --compare` checks the replayed
// log against the relay's signed checkpoint: the relay's own log passes;
// the same events with two swapped (the same state, another history)
// fail with a non-zero exit; an earlier, shorter export is proven a prefix
// of the signed tree by a consistency proof, and fails once swapped.
func TestTlogReplayCompareChecksTree(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "rt.db")
	p := startProc(t, db, "--rate-agent", "0", "--rate-ip", "0")
	cl := client.New(p.base)
	tlogPublish(t, cl, tlogKeys(3), rand.New(rand.NewPCG(34, 20)), 30)
	early, earlySwapped := filepath.Join(dir, "early.jsonl"), filepath.Join(dir, "early-swapped.jsonl")
	tlog2Export(t, p.base, early, 0, 0)
	tlog2Export(t, p.base, earlySwapped, 3, 7)
	tlogPublish(t, cl, tlogKeys(3), rand.New(rand.NewPCG(34, 21)), 30)
	size, _ := tlogVerifyAll(t, p.base)
	at := "--at=" + strconv.FormatInt(time.Now().Unix(), 10)

	for _, args := range [][]string{{p.base}, {"--tree", db}} {
		src := args[len(args)-1]
		out, ok := tlog2Replay(t, append([]string{at, "--compare", p.base}, args...)...)
		if !ok || !strings.Contains(out, "match: ") || !strings.Contains(out, fmt.Sprintf("tree: the first %d of %d replayed entries hash to the root", size, size)) {
			t.Fatalf("replay %s: ok %v\n%s", src, ok, out)
		}
	}
	swapped := filepath.Join(dir, "swapped.jsonl")
	tlog2Export(t, p.base, swapped, 5, 20)
	out, ok := tlog2Replay(t, at, "--tree", "--compare", p.base, swapped)
	if ok || !strings.Contains(out, "match: ") || !strings.Contains(out, "TREE MISMATCH") {
		t.Fatalf("replay of a reordered log: ok %v\n%s", ok, out)
	}
	if out, ok := tlog2Replay(t, at, "--tree=false", "--compare", p.base, swapped); !ok || strings.Contains(out, "tree:") {
		t.Fatalf("replay --tree=false: ok %v\n%s", ok, out)
	}
	// The early exports' state differs from the relay's now (a state
	// mismatch either way); the tree line says whether they are a prefix.
	// Without --tree a file is not checked: it may be another relay's log.
	if out, ok := tlog2Replay(t, at, "--compare", p.base, swapped); !ok || strings.Contains(out, "tree:") || strings.Contains(out, "TREE") {
		t.Fatalf("replay of a file without --tree: ok %v\n%s", ok, out)
	}
	out, _ = tlog2Replay(t, at, "--tree", "--compare", p.base, early)
	if !strings.Contains(out, "proven a prefix of") || strings.Contains(out, "TREE MISMATCH") {
		t.Fatalf("replay of an earlier export:\n%s", out)
	}
	out, ok = tlog2Replay(t, at, "--tree", "--compare", p.base, earlySwapped)
	if ok || !strings.Contains(out, "TREE MISMATCH") || !strings.Contains(out, "does not extend") {
		t.Fatalf("replay of an earlier, reordered export: ok %v\n%s", ok, out)
	}
}

// tlog2PeerAlarms returns the tlog_alarms /relays shows for the outbound
// peer at peer (checking tlog_alarm says the same).
func tlog2PeerAlarms(t *testing.T, base, peer string) int {
	t.Helper()
	body, _ := tlogGet(t, base, "/relays")
	var ans struct {
		Peers []struct {
			Peer       string `json:"peer"`
			Direction  string `json:"direction"`
			TlogAlarm  bool   `json:"tlog_alarm"`
			TlogAlarms int    `json:"tlog_alarms"`
		} `json:"peers"`
	}
	if err := json.Unmarshal(body, &ans); err != nil {
		t.Fatal(err)
	}
	for _, p := range ans.Peers {
		if p.Direction == "outbound" && p.Peer == peer {
			if p.TlogAlarm != (p.TlogAlarms > 0) {
				t.Fatalf("/relays peer %s: tlog_alarm %v, tlog_alarms %d", peer, p.TlogAlarm, p.TlogAlarms)
			}
			return p.TlogAlarms
		}
	}
	t.Fatalf("/relays lists no outbound peer %s: %s", peer, body)
	return 0
}
