package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anp2net/relay/client"
	"github.com/anp2net/relay/relay"
	"github.com/anp2net/relay/relay/federation"
	"github.com/anp2net/relay/relay/governance"
	"github.com/anp2net/relay/relay/relaytest"
)

// runIn runs one anp2 command in this process and returns its stdout and
// stderr.
func runIn(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := run(context.Background(), args, &out, &errOut)
	return out.String(), errOut.String(), err
}

// TestDMCLI: A sends B two messages with `anp2 dm send` through a relay
// running the process's modules; B's `anp2 dm read` opens its inbox and A's
// opens its outbox (D4 auth on /dms), newest first, with the peer's
// profile name; a message too large is refused before publishing.
func TestDMCLI(t *testing.T) {
	r := relaytest.Start(t, processModules(t), func(c *relay.Config) { c.Now = time.Now })
	dir := t.TempDir()
	keys := map[string]string{}
	ids := map[string]string{}
	for _, who := range []string{"a", "b"} {
		keys[who] = filepath.Join(dir, who+".key")
		out, _, err := runIn(t, "keygen", "--key", keys[who])
		if err != nil {
			t.Fatal(err)
		}
		ids[who] = strings.TrimSpace(out)
	}
	if out, _, err := runIn(t, "publish", "--relay", r.URL, "--key", keys["a"], "--kind", "0", "--content", `{"name":"alice"}`); err != nil {
		t.Fatalf("profile: %v %s", err, out)
	}
	now := time.Now().Unix()
	send := func(at int64, args ...string) {
		t.Helper()
		base := []string{"dm", "send", "--relay", r.URL, "--key", keys["a"], "--to", ids["b"], "--created-at", itoa64(at)}
		if out, _, err := runIn(t, append(base, args...)...); err != nil || !strings.Contains(out, `"accepted":true`) {
			t.Fatalf("dm send: %v %s", err, out)
		}
	}
	send(now-2, "--text", "first")
	send(now-1, "second", "message")
	if _, _, err := runIn(t, "dm", "send", "--relay", r.URL, "--key", keys["a"], "--to", ids["b"], "--text", strings.Repeat("x", client.MaxDMPlaintext+1)); err == nil || !strings.Contains(err.Error(), "too large") {
		t.Fatalf("oversized message: %v", err)
	}

	type line struct {
		Text, Peer, PeerName string
		Outgoing             bool
	}
	read := func(who string, extra ...string) []line {
		t.Helper()
		out, _, err := runIn(t, append([]string{"dm", "read", "--json", "--relay", r.URL, "--key", keys[who]}, extra...)...)
		if err != nil {
			t.Fatalf("dm read %s: %v", who, err)
		}
		var got []line
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			var m struct {
				Text     string `json:"text"`
				Peer     string `json:"peer"`
				PeerName string `json:"peer_name"`
				Outgoing bool   `json:"outgoing"`
			}
			if l == "" {
				continue
			}
			if err := json.Unmarshal([]byte(l), &m); err != nil {
				t.Fatalf("%q: %v", l, err)
			}
			got = append(got, line{m.Text, m.Peer, m.PeerName, m.Outgoing})
		}
		return got
	}
	inbox := read("b")
	if len(inbox) != 2 || inbox[0].Text != "second message" || inbox[1].Text != "first" ||
		inbox[0].Outgoing || inbox[0].Peer != ids["a"] || inbox[0].PeerName != "alice" {
		t.Fatalf("B's inbox: %+v", inbox)
	}
	outbox := read("a", "--with", ids["b"])
	if len(outbox) != 2 || outbox[0].Text != "second message" || !outbox[0].Outgoing || outbox[0].Peer != ids["b"] {
		t.Fatalf("A's outbox: %+v", outbox)
	}
	if got := read("a", "--with", strings.Repeat("0", 64)); len(got) != 0 {
		t.Fatalf("--with a stranger: %+v", got)
	}
	out, _, err := runIn(t, "dm", "read", "--relay", r.URL, "--key", keys["b"])
	if err != nil || !strings.Contains(out, "<- alice ("+ids["a"][:12]+"): second message") {
		t.Fatalf("text output: %v %q", err, out)
	}
	// B cannot read A's outbox, even signed.
	cl := client.New(r.URL)
	cl.Key, _ = loadKey(keys["b"])
	var ce *client.Error
	if _, err := cl.Outbox(context.Background(), ids["a"], nil); !errors.As(err, &ce) || ce.Status != 403 {
		t.Fatalf("B on A's /dms: %v", err)
	}
}

// processModules returns the modules an anp2 serve process runs.
func processModules(t *testing.T) []relay.Module {
	t.Helper()
	m, err := modules(federation.DefaultOptions(), governance.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return m.all
}

func itoa64(n int64) string { b, _ := json.Marshal(n); return string(b) }

// syncBuffer is a bytes.Buffer safe for one writer and one reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// TestDMReadFollow: `anp2 dm read --follow` prints a message that arrives
// after it started, once, and stops when its context ends.
func TestDMReadFollow(t *testing.T) {
	r := relaytest.Start(t, processModules(t), func(c *relay.Config) { c.Now = time.Now })
	dir := t.TempDir()
	ka, kb := filepath.Join(dir, "a.key"), filepath.Join(dir, "b.key")
	runIn(t, "keygen", "--key", ka)
	idb, _, _ := runIn(t, "keygen", "--key", kb)
	ctx, cancel := context.WithCancel(context.Background())
	var out, errOut syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"dm", "read", "--follow", "--interval", "50ms", "--relay", r.URL, "--key", kb}, &out, &errOut)
	}()
	time.Sleep(200 * time.Millisecond)
	if _, _, err := runIn(t, "dm", "send", "--relay", r.URL, "--key", ka, "--to", strings.TrimSpace(idb), "late news"); err != nil {
		t.Fatal(err)
	}
	relaytest.Eventually(t, "followed message", func() bool { return strings.Contains(out.String(), "late news") })
	time.Sleep(200 * time.Millisecond)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(out.String(), "late news"); n != 1 {
		t.Fatalf("printed %d times: %q %q", n, out.String(), errOut.String())
	}
}
