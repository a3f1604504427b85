package main

// An independent verifier of a real `anp2 serve` process's transparency log
// (SPEC §21): it speaks only HTTP and the C2SP formats, with
// golang.org/x/mod/sumdb/tlog and note, and shares no code with the relay's
// packages.

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	binenc "encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/anp2net/relay/client"
	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/postgres/pgtest"
)

// tlogGet fetches base+path and returns the body of a 200 (else fails).
func tlogGet(t *testing.T, base, path string) ([]byte, http.Header) {
	t.Helper()
	resp, err := http.Get(base + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
	}
	return b, resp.Header
}

// tlogCheckpoint fetches and verifies the relay's checkpoint with its
// published key and returns (origin, size, root).
func tlogCheckpoint(t *testing.T, base string) (string, int64, tlog.Hash, string) {
	t.Helper()
	vkey, _ := tlogGet(t, base, "/tlog/key")
	v, err := note.NewVerifier(strings.TrimSpace(string(vkey)))
	if err != nil {
		t.Fatalf("verifier key %q: %v", vkey, err)
	}
	raw, _ := tlogGet(t, base, "/tlog/checkpoint")
	origin, size, root := tlogOpen(t, raw, v)
	if origin != v.Name() {
		t.Fatalf("origin %q, key name %q", origin, v.Name())
	}
	return origin, size, root, string(raw)
}

// tlogOpen verifies a checkpoint note with v and parses its body.
func tlogOpen(t *testing.T, raw []byte, v note.Verifier) (string, int64, tlog.Hash) {
	t.Helper()
	n, err := note.Open(raw, note.VerifierList(v))
	if err != nil {
		t.Fatalf("checkpoint %q: %v", raw, err)
	}
	lines := strings.Split(n.Text, "\n")
	if len(lines) != 4 || lines[3] != "" {
		t.Fatalf("checkpoint text %q", n.Text)
	}
	size, err := strconv.ParseInt(lines[1], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	h, err := base64.StdEncoding.DecodeString(lines[2])
	if err != nil || len(h) != 32 {
		t.Fatalf("root %q", lines[2])
	}
	return lines[0], size, tlog.Hash(h)
}

// memTree is the verifier's own tree, computed from the entries alone.
type memTree struct{ hashes []tlog.Hash }

func (m *memTree) ReadHashes(idx []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(idx))
	for i, x := range idx {
		out[i] = m.hashes[x]
	}
	return out, nil
}

func (m *memTree) add(t *testing.T, n int64, entry []byte) {
	hs, err := tlog.StoredHashes(n, entry, m)
	if err != nil {
		t.Fatal(err)
	}
	m.hashes = append(m.hashes, hs...)
}

// tlogEntries reads every entry of a tree of size leaves from the entry
// bundles (C2SP tlog-tiles: big-endian uint16 length, then the entry).
func tlogEntries(t *testing.T, base string, size int64) [][]byte {
	t.Helper()
	var out [][]byte
	for n := int64(0); n*256 < size; n++ {
		w := min(256, size-n*256)
		tl := tlog.Tile{H: 8, L: -1, N: n, W: int(w)}
		b, _ := tlogGet(t, base, "/tlog/"+c2spPath(tl))
		for len(b) > 0 {
			if len(b) < 2 {
				t.Fatal("truncated entry bundle")
			}
			l := int(binenc.BigEndian.Uint16(b))
			if len(b) < 2+l {
				t.Fatal("truncated entry")
			}
			out = append(out, b[2:2+l])
			b = b[2+l:]
		}
	}
	if int64(len(out)) != size {
		t.Fatalf("%d entries in the bundles, want %d", len(out), size)
	}
	return out
}

// c2spPath is the C2SP tlog-tiles path of a Go tile: no height, and
// "entries" for the data tiles.
func c2spPath(tl tlog.Tile) string {
	p := strings.TrimPrefix(tl.Path(), "tile/8/")
	p = strings.Replace(p, "data/", "entries/", 1)
	return "tile/" + p
}

func tlogPublish(t *testing.T, cl *client.Client, keys []ed25519.PrivateKey, rng *rand.Rand, n int) []string {
	t.Helper()
	var ids []string
	for len(ids) < n {
		var evs []*protocol.Event
		for range min(100, n-len(ids)) {
			e := &protocol.Event{CreatedAt: time.Now().Unix() - rng.Int64N(3600), Kind: 1,
				Content: fmt.Sprint("tlog ", rng.Uint64()), Tags: [][]string{{"t", "tlog"}}}
			e.Sign(keys[rng.IntN(len(keys))])
			evs = append(evs, e)
		}
		res, err := cl.PublishBatch(context.Background(), evs)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range res.Results {
			if !r.Accepted || r.Duplicate {
				t.Fatalf("event %d not accepted: %+v", i, r)
			}
			ids = append(ids, evs[i].ID)
		}
	}
	return ids
}

func tlogKeys(n int) []ed25519.PrivateKey {
	var out []ed25519.PrivateKey
	for i := range n {
		seed := make([]byte, 32)
		seed[0], seed[1] = 0x71, byte(i)
		out = append(out, ed25519.NewKeyFromSeed(seed))
	}
	return out
}

// TestTlogIndependentVerifier checks a real relay's transparency log
// from the outside: the signed checkpoint; every entry bundle against
// /export; every hash tile byte for byte against the tree the verifier
// computes from the entries; an inclusion proof for every event; and a
// consistency proof between every pair of sizes of a 100-event prefix.
func TestTlogIndependentVerifier(t *testing.T) {
	p := startProc(t, filepath.Join(t.TempDir(), "tlog.db"), "--rate-agent", "0", "--rate-ip", "0")
	cl := client.New(p.base)
	rng := rand.New(rand.NewPCG(34, 1))
	keys := tlogKeys(5)

	// A single publish answers the leaf index.
	first := &protocol.Event{CreatedAt: time.Now().Unix(), Kind: 1, Content: "first", Tags: [][]string{}}
	first.Sign(keys[0])
	resp, err := http.Post(p.base+"/events", "application/json", bytes.NewReader(protocol.AppendJSON(nil, first)))
	if err != nil {
		t.Fatal(err)
	}
	var ans struct {
		LeafIndex *int64 `json:"leaf_index"`
	}
	json.NewDecoder(resp.Body).Decode(&ans)
	resp.Body.Close()
	if ans.LeafIndex == nil {
		t.Fatal("publish answer without leaf_index")
	}
	if origin, _, _, _ := tlogCheckpoint(t, p.base); origin != strings.TrimPrefix(p.base, "http://")+"/tlog" {
		t.Fatalf("origin %q for %s", origin, p.base)
	}
	ids := append([]string{first.ID}, tlogPublish(t, cl, keys, rng, 99)...)

	// Consistency between every pair of sizes of the first 100 entries.
	size, _ := tlogWait(t, p.base, *ans.LeafIndex+100)
	entries := tlogEntries(t, p.base, size)
	mem := &memTree{}
	var roots []tlog.Hash
	for i, e := range entries[:100] {
		r, _ := tlog.TreeHash(int64(i), mem)
		roots = append(roots, r)
		mem.add(t, int64(i), e)
	}
	r, _ := tlog.TreeHash(100, mem)
	roots = append(roots, r)
	for to := int64(0); to <= 100; to++ {
		for from := int64(0); from <= to; from++ {
			b, _ := tlogGet(t, p.base, fmt.Sprintf("/tlog/consistency?from=%d&to=%d", from, to))
			var c struct {
				FromRoot string `json:"from_root"`
				ToRoot   string `json:"to_root"`
				Proof    []string
			}
			if err := json.Unmarshal(b, &c); err != nil {
				t.Fatal(err)
			}
			if c.FromRoot != hex.EncodeToString(roots[from][:]) || c.ToRoot != hex.EncodeToString(roots[to][:]) {
				t.Fatalf("consistency %d→%d: roots %s %s", from, to, c.FromRoot, c.ToRoot)
			}
			if from == 0 {
				if len(c.Proof) != 0 {
					t.Fatalf("consistency from the empty tree: %d hashes", len(c.Proof))
				}
				continue
			}
			if err := tlog.CheckTree(unhex(t, c.Proof), to, roots[to], from, roots[from]); err != nil {
				t.Fatalf("consistency %d→%d: %v", from, to, err)
			}
		}
	}

	ids = append(ids, tlogPublish(t, cl, keys, rng, 200+rng.IntN(300))...)
	size, root := tlogWait(t, p.base, *ans.LeafIndex+int64(len(ids)))

	// The entries are the log's ids in /export's order, the published
	// ones among them in publish order from the answered leaf index.
	entries = tlogEntries(t, p.base, size)
	export, _ := tlogGet(t, p.base, "/export")
	lines := strings.Split(strings.TrimSpace(string(export)), "\n")
	if int64(len(lines)) < size { // (the relay may have appended since)
		t.Fatalf("export has %d events, tree %d entries", len(lines), size)
	}
	mem = &memTree{}
	for i, e := range entries {
		var ev struct{ ID string }
		json.Unmarshal([]byte(lines[i]), &ev)
		if hex.EncodeToString(e) != ev.ID {
			t.Fatalf("entry %d is %x, export %s", i, e, ev.ID)
		}
		mem.add(t, int64(i), e)
	}
	// (The relay's own events, its announcement, may come in between.)
	if hex.EncodeToString(entries[*ans.LeafIndex]) != ids[0] {
		t.Fatalf("the first published event is not entry %d", *ans.LeafIndex)
	}
	next := *ans.LeafIndex
	for i, id := range ids {
		for next < size && hex.EncodeToString(entries[next]) != id {
			next++
		}
		if next == size {
			t.Fatalf("published event %d is not among the entries in publish order", i)
		}
	}
	if got, _ := tlog.TreeHash(size, mem); got != root {
		t.Fatalf("entries hash to %x, checkpoint root %x", got, root)
	}

	// Every hash tile byte for byte against the verifier's own tree, and
	// full tiles immutable.
	for _, tl := range tlog.NewTiles(8, 0, size) {
		want, err := tlog.ReadTileData(tl, mem)
		if err != nil {
			t.Fatal(err)
		}
		got, h := tlogGet(t, p.base, "/tlog/"+c2spPath(tl))
		if !bytes.Equal(got, want) {
			t.Fatalf("tile %s differs from the entries' tree", c2spPath(tl))
		}
		if full := tl.W == 256; full != strings.Contains(h.Get("Cache-Control"), "immutable") {
			t.Fatalf("tile %s Cache-Control %q", c2spPath(tl), h.Get("Cache-Control"))
		}
	}

	// An inclusion proof for every event.
	for i, e := range entries {
		id := hex.EncodeToString(e)
		b, _ := tlogGet(t, p.base, "/tlog/proof?id="+id)
		var pr struct {
			Index, Size int64
			Root        string
			Proof       []string
			Checkpoint  string
		}
		if err := json.Unmarshal(b, &pr); err != nil {
			t.Fatal(err)
		}
		raw, _ := hex.DecodeString(id)
		pr.Root = strings.TrimSpace(pr.Root)
		r, _ := hex.DecodeString(pr.Root)
		if pr.Index != int64(i) || pr.Size < size || pr.Checkpoint == "" {
			t.Fatalf("proof of %d: index %d size %d", i, pr.Index, pr.Size)
		}
		if err := tlog.CheckRecord(unhex(t, pr.Proof), pr.Size, tlog.Hash(r), pr.Index, tlog.RecordHash(raw)); err != nil {
			t.Fatalf("inclusion of %d: %v", i, err)
		}
		if pr.Size == size && tlog.Hash(r) != root {
			t.Fatalf("proof root %s, checkpoint %x", pr.Root, root)
		}
	}
}

// tlogWait waits for a verified checkpoint of at least n entries (the
// relay signs one a second at most after the log grows) and returns its
// size and root.
func tlogWait(t *testing.T, base string, n int64) (int64, tlog.Hash) {
	t.Helper()
	for {
		_, size, root, _ := tlogCheckpoint(t, base)
		if size >= n {
			return size, root
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func unhex(t *testing.T, hs []string) []tlog.Hash {
	t.Helper()
	out := make([]tlog.Hash, len(hs))
	for i, s := range hs {
		b, err := hex.DecodeString(s)
		if err != nil || len(b) != 32 {
			t.Fatalf("proof hash %q", s)
		}
		out[i] = tlog.Hash(b)
	}
	return out
}

// tlogVerifyAll checks the relay's latest checkpoint against its log from
// the outside: its entries are /export's ids in order and hash to its
// root. It returns the checkpoint's size and root.
func tlogVerifyAll(t *testing.T, base string) (int64, tlog.Hash) {
	t.Helper()
	export, h := tlogGet(t, base, "/export")
	through, _ := strconv.ParseInt(h.Get("X-ANP2-Through-Seq"), 10, 64)
	size, root := tlogWait(t, base, through)
	lines := strings.Split(strings.TrimSpace(string(export)), "\n")
	entries := tlogEntries(t, base, size)
	mem := &memTree{}
	for i, e := range entries {
		if int64(i) < through {
			var ev struct{ ID string }
			json.Unmarshal([]byte(lines[i]), &ev)
			if hex.EncodeToString(e) != ev.ID {
				t.Fatalf("entry %d is %x, export %s", i, e, ev.ID)
			}
		}
		mem.add(t, int64(i), e)
	}
	if got, _ := tlog.TreeHash(size, mem); got != root {
		t.Fatalf("entries hash to %x, checkpoint root %x", got, root)
	}
	return size, root
}

// tlogConsistent checks the relay proves its tree of size `to` (root
// toRoot) extends the tree of size from (root fromRoot).
func tlogConsistent(t *testing.T, base string, from int64, fromRoot tlog.Hash, to int64, toRoot tlog.Hash) {
	t.Helper()
	b, _ := tlogGet(t, base, fmt.Sprintf("/tlog/consistency?from=%d&to=%d", from, to))
	var c struct{ Proof []string }
	json.Unmarshal(b, &c)
	if err := tlog.CheckTree(unhex(t, c.Proof), to, toRoot, from, fromRoot); err != nil {
		t.Fatalf("consistency %d→%d: %v", from, to, err)
	}
}

// TestTlogSurvivesKill9 kills a relay with SIGKILL while it appends and
// checks the restarted relay's tree is its log's and extends the last
// checkpoint seen before the kill; then deletes the tree files under the
// stopped relay (an upgrade from a relay without them) and checks the
// tree built from the log has the same root.
func TestTlogSurvivesKill9(t *testing.T) {
	db := filepath.Join(t.TempDir(), "tlogkill.db")
	p := startProc(t, db, "--rate-agent", "0", "--rate-ip", "0")
	keys := tlogKeys(8)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	for w := range keys {
		go func() {
			defer func() { done <- struct{}{} }()
			cl := client.New(p.base)
			for i := 0; ctx.Err() == nil; i++ {
				e := &protocol.Event{CreatedAt: time.Now().Unix(), Kind: 1, Content: fmt.Sprint(w, "-", i), Tags: [][]string{}}
				e.Sign(keys[w])
				cl.Publish(ctx, e, false)
			}
		}()
	}
	var seen int64
	var seenRoot tlog.Hash
	for seen < 300 {
		_, seen, seenRoot, _ = tlogCheckpoint(t, p.base)
		time.Sleep(50 * time.Millisecond)
	}
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	p.cmd.Wait()
	cancel()
	for range keys {
		<-done
	}
	q := startProc(t, db)
	size, root := tlogVerifyAll(t, q.base)
	if size < seen {
		t.Fatalf("tree of %d entries after the kill, %d before", size, seen)
	}
	tlogConsistent(t, q.base, seen, seenRoot, size, root)
	q.cmd.Process.Kill()
	q.cmd.Wait()

	matches, _ := filepath.Glob(db + ".tlog*")
	if len(matches) == 0 {
		t.Fatal("no tree file beside the log")
	}
	for _, m := range matches {
		if err := os.Remove(m); err != nil {
			t.Fatal(err)
		}
	}
	r := startProc(t, db)
	// (The relay may have appended its own announcement since.)
	size2, root2 := tlogVerifyAll(t, r.base)
	if size2 < size {
		t.Fatalf("tree rebuilt from the log has %d entries, was %d", size2, size)
	}
	tlogConsistent(t, r.base, size, root, size2, root2)
}

// tlogAudit runs `anp2 audit` and returns its output and whether it
// exited zero.
func tlogAudit(t *testing.T, args ...string) (string, bool) {
	t.Helper()
	out, err := exec.Command(binary, append([]string{"audit"}, args...)...).CombinedOutput()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatal(err)
	}
	return string(out), err == nil
}

// tlogRewrite replaces the event at seq in the stopped relay's SQLite log
// with another validly signed event: a rewritten past.
func tlogRewrite(t *testing.T, db string, seq int64) {
	t.Helper()
	w, err := sql.Open("sqlite", db)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	e := &protocol.Event{CreatedAt: time.Now().Unix(), Kind: 1, Content: "rewritten", Tags: [][]string{}}
	e.Sign(tlogKeys(9)[8])
	id, _ := hex.DecodeString(e.ID)
	agent, _ := hex.DecodeString(e.AgentID)
	res, err := w.Exec(`UPDATE events SET id = ?, agent_id = ?, created_at = ?, kind = 1, body = ?, raw = NULL WHERE seq = ?`,
		id, agent, e.CreatedAt, string(protocol.AppendJSON(nil, e)), seq)
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		t.Fatalf("rewrote %d rows", n)
	}
}

// TestTlogAuditCatchesRewrite audits a relay twice (the second audit
// checks consistency with the first), then rewrites one event of its log
// while it is stopped: the audit names the entries that no longer hash
// to the signed root; with the tree files deleted too (the relay builds
// a new tree from the rewritten log and signs it), the audit names the
// inconsistency with the checkpoint it saw before.
func TestTlogAuditCatchesRewrite(t *testing.T) {
	dir := t.TempDir()
	db, state := filepath.Join(dir, "audit.db"), filepath.Join(dir, "audit.state")
	// The origin names the relay's public URL, the same across restarts:
	// one loopback address, where the auditor's signed /export read must
	// reach it (a D4 header names the relay's public base URL).
	addr := httpLoopbackAddr(t)
	public := []string{"--public-base-url=http://" + addr, "--addr", addr}
	p := startProc(t, db, append([]string{"--rate-agent", "0", "--rate-ip", "0"}, public...)...)
	cl := client.New(p.base)
	rng := rand.New(rand.NewPCG(34, 2))
	keys := tlogKeys(3)
	tlogPublish(t, cl, keys, rng, 300)
	tlogVerifyAll(t, p.base)
	if out, ok := tlogAudit(t, p.base, "--state", state); !ok {
		t.Fatalf("audit of an honest relay failed:\n%s", out)
	}
	tlogPublish(t, cl, keys, rng, 50)
	tlogVerifyAll(t, p.base)
	out, ok := tlogAudit(t, p.base, "--state", state)
	if !ok || !strings.Contains(out, "consistent with the last audit") {
		t.Fatalf("second audit:\n%s", out)
	}
	p.cmd.Process.Kill()
	p.cmd.Wait()

	tlogRewrite(t, db, 100)
	q := startProc(t, db, public...)
	out, ok = tlogAudit(t, q.base, "--state", state)
	if ok || !strings.Contains(out, "not the checkpoint's root") {
		t.Fatalf("audit of a rewritten log:\n%s", out)
	}
	t.Logf("rewritten log: %s", out)
	q.cmd.Process.Kill()
	q.cmd.Wait()

	matches, _ := filepath.Glob(db + ".tlog*")
	for _, m := range matches {
		os.Remove(m)
	}
	r := startProc(t, db, public...)
	out, ok = tlogAudit(t, r.base, "--state", state)
	if ok || !strings.Contains(out, "seen at the last audit (the past was rewritten") {
		t.Fatalf("audit of a rewritten log with a rebuilt tree:\n%s", out)
	}
	t.Logf("rewritten log and tree: %s", out)
	// A fresh auditor (no state) finds nothing wrong: only the history
	// an auditor saw before can reveal a rewrite of the whole tree.
	if out, ok := tlogAudit(t, r.base); !ok {
		t.Fatalf("fresh audit:\n%s", out)
	}
}

// TestTlogTwoProcessesOnePostgres runs two relay processes over one
// PostgreSQL log, publishing through both: each serves a tree that is the
// log's (entries = /export, root = checkpoint), under the same key, and
// the smaller of their trees is a prefix of the larger.
func TestTlogTwoProcessesOnePostgres(t *testing.T) {
	pg := pgtest.DB(t)
	dir := t.TempDir()
	id := []string{"--relay-key", filepath.Join(dir, "relay.key"), "--public-base-url", "http://relay.test", "--rate-agent", "0", "--rate-ip", "0"}
	relays := []*relayProc{startProc(t, pg, id...), startProc(t, pg, id...)}
	rng := rand.New(rand.NewPCG(34, 3))
	for i, r := range relays {
		tlogPublish(t, client.New(r.base), tlogKeys(3+i), rng, 150)
	}
	var sizes []int64
	var roots []tlog.Hash
	for _, r := range relays {
		size, root := tlogVerifyAll(t, r.base)
		sizes, roots = append(sizes, size), append(roots, root)
	}
	if sizes[0] < 300 || sizes[1] < 300 {
		t.Fatalf("trees of %v entries, 300 published", sizes)
	}
	small, big := 0, 1
	if sizes[0] > sizes[1] {
		small, big = 1, 0
	}
	tlogConsistent(t, relays[big].base, sizes[small], roots[small], sizes[big], roots[big])
	k0, _ := tlogGet(t, relays[0].base, "/tlog/key")
	k1, _ := tlogGet(t, relays[1].base, "/tlog/key")
	if !bytes.Equal(k0, k1) {
		t.Fatalf("keys %s and %s", k0, k1)
	}
}

// tlogFreeAddr returns a loopback address nothing listens on now.
func tlogFreeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// TestTlogRelaysWitnessEachOther runs two relay processes, each the
// other's witness: each one's checkpoint comes to carry the other's
// C2SP cosignature, checked here with the keys they publish and
// golang.org/x/mod/sumdb/note alone (the cosignature algorithm, 0x04, is
// the few lines of tlogCosignVerifier).
func TestTlogRelaysWitnessEachOther(t *testing.T) {
	dir := t.TempDir()
	addrs := []string{tlogFreeAddr(t), tlogFreeAddr(t)}
	args := func(i int, extra ...string) []string {
		return append([]string{"--addr", addrs[i], "--relay-key", filepath.Join(dir, fmt.Sprint(i, ".key")), "--rate-agent", "0", "--rate-ip", "0"}, extra...)
	}
	// First runs to learn each relay's keys.
	var logKeys, witnessKeys []string
	for i := range addrs {
		p := startProc(t, filepath.Join(dir, fmt.Sprint(i, ".db")), args(i)...)
		k, _ := tlogGet(t, p.base, "/tlog/key")
		w, _ := tlogGet(t, p.base, "/tlog/witness/key")
		logKeys, witnessKeys = append(logKeys, strings.TrimSpace(string(k))), append(witnessKeys, strings.TrimSpace(string(w)))
		p.cmd.Process.Kill()
		p.cmd.Wait()
	}
	var procs []*relayProc
	for i := range addrs {
		o := 1 - i
		procs = append(procs, startProc(t, filepath.Join(dir, fmt.Sprint(i, ".db")), args(i,
			"--tlog-witnessed", logKeys[o], "--tlog-witness", "http://"+addrs[o]+"="+witnessKeys[o])...))
	}
	rng := rand.New(rand.NewPCG(34, 4))
	for i, p := range procs {
		tlogPublish(t, client.New(p.base), tlogKeys(2+i), rng, 20)
	}
	for i, p := range procs {
		lv, err := note.NewVerifier(logKeys[i])
		if err != nil {
			t.Fatal(err)
		}
		wv := tlogCosignVerifier(t, witnessKeys[1-i])
		deadline := time.Now().Add(20 * time.Second)
		for {
			raw, _ := tlogGet(t, p.base, "/tlog/checkpoint")
			n, err := note.Open(raw, note.VerifierList(lv, wv))
			if err == nil && len(n.Sigs) == 2 {
				if size, _ := strconv.ParseInt(strings.Split(n.Text, "\n")[1], 10, 64); size >= 20 {
					break
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("relay %d's checkpoint not cosigned by its witness:\n%s", i, raw)
			}
			time.Sleep(100 * time.Millisecond)
		}
		if out, ok := tlogAudit(t, p.base, "--witness", witnessKeys[1-i]); !ok || !strings.Contains(out, "cosigned by witness") {
			t.Fatalf("audit with the relay's witness:\n%s", out)
		}
		// A relay does not witness itself.
		if out, ok := tlogAudit(t, p.base, "--witness", witnessKeys[i]); ok || !strings.Contains(out, "no cosignature of witness") {
			t.Fatalf("audit requiring a witness that did not cosign:\n%s", out)
		}
	}
}

// tlogCosignVerifier verifies C2SP tlog-cosignature/v1 signatures (Ed25519
// over "cosignature/v1\ntime <t>\n" and the note text; the signature is
// the 8-byte timestamp and the Ed25519 signature) under the witness key
// vkey (name+hash+base64(0x04 ‖ public key)).
func tlogCosignVerifier(t *testing.T, vkey string) note.Verifier {
	parts := strings.SplitN(vkey, "+", 3)
	if len(parts) != 3 {
		t.Fatalf("witness key %q", vkey)
	}
	h, err := strconv.ParseUint(parts[1], 16, 32)
	key, err2 := base64.StdEncoding.DecodeString(parts[2])
	if err != nil || err2 != nil || len(key) != 33 || key[0] != 4 {
		t.Fatalf("witness key %q", vkey)
	}
	id := sha256.Sum256(append([]byte(parts[0]+"\n"), key...))
	if uint32(h) != binenc.BigEndian.Uint32(id[:]) {
		t.Fatalf("witness key %q: key hash", vkey)
	}
	return tlogCosigVerifier{name: parts[0], hash: uint32(h), pub: key[1:]}
}

type tlogCosigVerifier struct {
	name string
	hash uint32
	pub  ed25519.PublicKey
}

func (v tlogCosigVerifier) Name() string    { return v.name }
func (v tlogCosigVerifier) KeyHash() uint32 { return v.hash }
func (v tlogCosigVerifier) Verify(msg, sig []byte) bool {
	if len(sig) != 72 {
		return false
	}
	signed := append(fmt.Appendf(nil, "cosignature/v1\ntime %d\n", binenc.BigEndian.Uint64(sig)), msg...)
	return ed25519.Verify(v.pub, signed, sig[8:])
}

// TestTlogStallsAtAGap deletes an event from the log of a stopped relay
// (and its tree files, so the tree is built from the log): the tree stops
// at the gap, says so in /metrics, answers 503 tlog_stalled for a proof
// past it, and an audit fails.
func TestTlogStallsAtAGap(t *testing.T) {
	db := filepath.Join(t.TempDir(), "gap.db")
	p := startProc(t, db, "--rate-agent", "0", "--rate-ip", "0")
	ids := tlogPublish(t, client.New(p.base), tlogKeys(2), rand.New(rand.NewPCG(34, 5)), 20)
	tlogVerifyAll(t, p.base)
	p.cmd.Process.Kill()
	p.cmd.Wait()
	w, err := sql.Open("sqlite", db)
	if err != nil {
		t.Fatal(err)
	}
	var gap int64
	if err := w.QueryRow(`SELECT MAX(seq) - 10 FROM events`).Scan(&gap); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Exec(`DELETE FROM events WHERE seq = ?`, gap); err != nil {
		t.Fatal(err)
	}
	w.Close()
	matches, _ := filepath.Glob(db + ".tlog*")
	for _, m := range matches {
		os.Remove(m)
	}
	q := startProc(t, db)
	metrics, _ := tlogGet(t, q.base, "/metrics")
	if !bytes.Contains(metrics, []byte("anp2_tlog_stalled 1")) || !bytes.Contains(metrics, []byte(fmt.Sprintf("anp2_tlog_size %d\n", gap-1))) {
		t.Fatalf("metrics after a gap at seq %d:\n%s", gap, metrics)
	}
	resp, err := http.Get(q.base + "/tlog/proof?id=" + ids[len(ids)-1])
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !bytes.Contains(b, []byte(`"tlog_stalled"`)) {
		t.Fatalf("proof past the gap: %d %s", resp.StatusCode, b)
	}
	if out, ok := tlogAudit(t, q.base); ok || !strings.Contains(out, "audit failed") {
		t.Fatalf("audit of a log with a gap:\n%s", out)
	} else {
		t.Logf("gap: %s", out)
	}
}

// TestTlogWitnessCatchesRewrite: relay A mirrors relay B and so
// witnesses B's log. B's log is rewritten while B is stopped (one event
// replaced, its tree built again from the rewritten log); when B is back
// A finds B's new checkpoint inconsistent with the one it verified and
// publishes the evidence as a kind 24 signed by its relay key.
func TestTlogWitnessCatchesRewrite(t *testing.T) {
	dir := t.TempDir()
	addrB := tlogFreeAddr(t)
	dbB := filepath.Join(dir, "b.db")
	argsB := []string{"--addr", addrB, "--public-base-url", "http://b.example", "--rate-agent", "0", "--rate-ip", "0"}
	b := startProc(t, dbB, argsB...)
	a := startProc(t, filepath.Join(dir, "a.db"), "--peer", "http://"+addrB, "--mirror-interval", "1s")
	tlogPublish(t, client.New(b.base), tlogKeys(2), rand.New(rand.NewPCG(34, 6)), 50)
	size, _ := tlogVerifyAll(t, b.base)
	want := fmt.Sprintf(`anp2_tlog_witnessed_size{origin="b.example/tlog"} %d`, size)
	tlogEventually(t, "A witnesses B's checkpoint", func() bool {
		m, _ := tlogGet(t, a.base, "/metrics")
		return bytes.Contains(m, []byte(want))
	})
	if n := tlog2PeerAlarms(t, a.base, "http://"+addrB); n != 0 {
		t.Fatalf("/relays shows %d alarms against B before any", n)
	}
	b.cmd.Process.Kill()
	b.cmd.Wait()
	tlogRewrite(t, dbB, 10)
	matches, _ := filepath.Glob(dbB + ".tlog*")
	for _, m := range matches {
		os.Remove(m)
	}
	startProc(t, dbB, argsB...)
	tlogEventually(t, "A's alarm", func() bool {
		m, _ := tlogGet(t, a.base, "/metrics")
		return bytes.Contains(m, []byte("anp2_tlog_witness_alarms_total 1"))
	})
	if n := tlog2PeerAlarms(t, a.base, "http://"+addrB); n != 1 {
		t.Fatalf("/relays shows %d alarms against B, want 1", n)
	}
	tlogEventually(t, "A's kind 24 report", func() bool {
		body, _ := tlogGet(t, a.base, "/events?kinds=24")
		return bytes.Contains(body, []byte(`b.example/tlog`)) && bytes.Contains(body, []byte(`"kind":24`))
	})
}

// tlogEventually waits up to 30 s for cond.
func tlogEventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not reached in 30 s", what)
		}
	}
}
