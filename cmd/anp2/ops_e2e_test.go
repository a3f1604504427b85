package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/anp2net/relay/client"
	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/sqlite"
)

// TestOneRelayPerLog: a second relay on a log a running relay holds exits
// non-zero naming the holder (its pid and address), and an auditor may
// still read the log; after the holder dies by SIGKILL the OS has dropped
// its lock and a restart succeeds.
func TestOneRelayPerLog(t *testing.T) {
	db := filepath.Join(t.TempDir(), "one.db")
	p := startProc(t, db)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, binary, "serve", "--addr", "127.0.0.1:0", "--db", db).CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("second relay on the same log: %v\n%s", err, out)
	}
	holder := fmt.Sprintf("pid=%d", p.cmd.Process.Pid)
	addr := "addr=" + strings.TrimPrefix(p.base, "http://")
	if !strings.Contains(string(out), "in use by another process") || !strings.Contains(string(out), holder) || !strings.Contains(string(out), addr) {
		t.Fatalf("second relay's refusal does not name the holder (%s %s):\n%s", holder, addr, out)
	}
	if out, err := exec.CommandContext(ctx, binary, "import", "--db", db, "../../testdata/vectors/anp2-network-sample.jsonl").CombinedOutput(); err == nil {
		t.Fatalf("import into a log a relay holds succeeded:\n%s", out)
	}
	// Reading needs no lock: an audit of the running relay's file.
	if out := runCLI(t, "replay", "--compare", p.base, db); !strings.Contains(out, "match:") {
		t.Fatalf("replay of a held log: %s", out)
	}
	p.cmd.Process.Signal(syscall.SIGKILL)
	p.cmd.Wait()
	startProc(t, db)
}

// publishRaw posts e and returns the status, Retry-After and code.
func publishRaw(t *testing.T, base string, e *protocol.Event) (int, string, string) {
	t.Helper()
	b, _ := json.Marshal(e)
	st, hdr, body := httpDo(t, "POST", base+"/events", b, "Content-Type", "application/json")
	var ans struct {
		Code string `json:"code"`
	}
	json.Unmarshal(body, &ans)
	return st, hdr.Get("Retry-After"), ans.Code
}

// TestDiskFull runs a relay on a 4 MiB tmpfs and fills it: publishes are
// 507 storage_full with Retry-After and counted in /metrics, reads go on,
// publishing resumes once space is freed, and after a SIGKILL and restart
// every acknowledged event is there. It needs root (mount); otherwise it
// skips.
func TestDiskFull(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "fs")
	os.Mkdir(dir, 0o755)
	unmount, err := mountTmpfs(dir, "4m")
	if err != nil {
		t.Skipf("cannot mount a small tmpfs to fill (needs root on Linux): %v", err)
	}
	t.Cleanup(unmount)
	db := filepath.Join(dir, "full.db")
	p := startProc(t, db, "--rate-agent", "0", "--rate-ip", "0")
	k := seededKey(1)
	var acked []string
	publish := func(i int) (int, string, string) {
		e := signed(k, protocol.KindPost, "post "+strconv.Itoa(i), []string{"t", "full"})
		st, ra, code := publishRaw(t, p.base, e)
		if st == 200 {
			acked = append(acked, e.ID)
		}
		return st, ra, code
	}
	for i := range 20 {
		if st, _, code := publish(i); st != 200 {
			t.Fatalf("publish %d before the disk filled: %d %s", i, st, code)
		}
	}
	filler := filepath.Join(dir, "filler")
	f, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	for chunk := make([]byte, 4096); ; {
		if _, err := f.Write(chunk); err != nil {
			break
		}
	}
	f.Close()
	refused := 0
	for i := 20; i < 30 && refused < 3; i++ {
		st, ra, code := publish(i)
		switch {
		case st == 507 && code == "storage_full" && ra != "":
			refused++
		case st == 200 && refused == 0: // the WAL's last page had room
		default:
			t.Fatalf("publish on a full disk: %d %q Retry-After %q", st, code, ra)
		}
	}
	if refused < 3 {
		t.Fatalf("only %d publishes refused on a full disk", refused)
	}
	if st, _, body := httpDo(t, "GET", p.base+"/events?t=full&limit=100", nil); st != 200 || bytes.Count(body, []byte(`"id"`)) < len(acked) {
		t.Fatalf("read on a full disk: %d, %s", st, body)
	}
	if _, _, body := httpDo(t, "GET", p.base+"/metrics", nil); !bytes.Contains(body, []byte(`anp2_events_rejected_total{code="storage_full"}`)) {
		t.Fatalf("/metrics does not count storage_full:\n%s", body)
	}
	os.Remove(filler)
	for i := 100; i < 105; i++ {
		if st, _, code := publish(i); st != 200 {
			t.Fatalf("publish after space returned: %d %s", st, code)
		}
	}
	p.cmd.Process.Signal(syscall.SIGKILL)
	p.cmd.Wait()
	q := startProc(t, db)
	for _, id := range acked {
		if st, _, _ := httpDo(t, "GET", q.base+"/events/"+id, nil); st != 200 {
			t.Fatalf("acknowledged event %s lost (%d) after the disk filled and the relay restarted", id, st)
		}
	}
	t.Logf("%d publishes refused with 507 while full; all %d acknowledged events present after restart", refused, len(acked))
}

// damagePage writes 2000 random bytes into the page of file that holds
// needle (or the last page when needle is nil).
func damagePage(t *testing.T, file string, needle []byte, rng *rand.Rand) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	const page = 4096
	at := len(b) - page
	if needle != nil {
		at = bytes.Index(b, needle) / page * page
		if at < 0 {
			t.Fatalf("%q not in %s", needle, file)
		}
	}
	junk := make([]byte, 2000)
	for i := range junk {
		junk[i] = byte(rng.UintN(256))
	}
	copy(b[at:], junk) // the page header and cell pointers: every read of the page fails
	if err := os.WriteFile(file, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// exportIDs returns the ids a relay's export carries.
func exportIDs(t *testing.T, base string) map[string]bool {
	t.Helper()
	cl := client.New(base)
	cl.Key = seededKey(99)
	ids := map[string]bool{}
	if _, err := cl.Export(context.Background(), 0, func(_ int64, raw json.RawMessage) error {
		var e protocol.Event
		if err := json.Unmarshal(raw, &e); err != nil {
			return err
		}
		ids[e.ID] = true
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return ids
}

// TestRepairDamagedLog damages a real log of 3,000 events (random bytes
// in the page holding a middle event and in the file's last page): serve
// refuses it pointing at 'anp2 repair'; the repair reports the rows it
// lost, and the repaired log serves; with --peer a relay holding the full
// log, the repaired log ends with every event.
func TestRepairDamagedLog(t *testing.T) {
	dir := t.TempDir()
	var lines bytes.Buffer
	var ids []string
	at := int64(1767225600) // fixed, so the log's layout is the same every run
	for i := range 3000 {
		e := &protocol.Event{CreatedAt: at + int64(i), Kind: protocol.KindPost, Content: "event " + strconv.Itoa(i), Tags: [][]string{{"t", "repair"}}}
		e.Sign(seededKey(i % 50))
		b, _ := json.Marshal(e)
		lines.Write(append(b, '\n'))
		ids = append(ids, e.ID)
	}
	corpus := filepath.Join(dir, "corpus.jsonl")
	os.WriteFile(corpus, lines.Bytes(), 0o644)
	full := filepath.Join(dir, "full.db")
	runCLI(t, "import", "--db", full, corpus)
	raw, _ := os.ReadFile(full)
	t.Logf("a log of %d short posts takes %d bytes (%d per event)", len(ids), len(raw), len(raw)/len(ids))
	rng := rand.New(rand.NewPCG(1, 2))
	for _, name := range []string{"a.db", "b.db"} {
		os.WriteFile(filepath.Join(dir, name), raw, 0o644)
		damagePage(t, filepath.Join(dir, name), []byte(ids[1500]), rng)
		damagePage(t, filepath.Join(dir, name), nil, rng)
		// The index and items files the log had before it was damaged.
		for _, companion := range []func(string) string{sqlite.IndexPath, sqlite.ItemsPath} {
			if b, err := os.ReadFile(companion(full)); err == nil {
				os.WriteFile(companion(filepath.Join(dir, name)), b, 0o644)
			}
		}
	}

	a := filepath.Join(dir, "a.db")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, binary, "serve", "--addr", "127.0.0.1:0", "--db", a).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "anp2 repair --db "+a) {
		t.Fatalf("serve on a damaged log: %v\n%s", err, out)
	}
	t.Logf("serve on the damaged log: %v\n%s", err, out)
	out = []byte(runCLI(t, "repair", "--db", a))
	t.Logf("repair without a peer:\n%s", out)
	if !bytes.Contains(out, []byte("could not read")) || !bytes.Contains(out, []byte("damaged one is kept as")) {
		t.Fatalf("repair did not report the lost rows:\n%s", out)
	}
	kept, _ := filepath.Glob(a + ".damaged-*")
	if len(kept) == 0 {
		t.Fatal("the damaged log was not kept")
	}
	// The damaged log's index file went with it; the one beside the
	// repaired log is the repaired log's own.
	for _, companion := range []string{sqlite.IndexPath(kept[0]), sqlite.ItemsPath(kept[0]), sqlite.ItemsPath(a)} {
		if _, err := os.Stat(companion); err != nil {
			t.Fatalf("after the repair: %v", err)
		}
	}
	if st, err := sqlite.Open(a, nil); err != nil {
		t.Fatal(err)
	} else if load := st.IndexLoad(); st.Close() != nil || load.Why != "" || load.Rows != 0 {
		t.Fatalf("the repaired log's index file: %+v", load)
	}
	p := startProc(t, a)
	got := exportIDs(t, p.base)
	missing := 0
	for _, id := range ids {
		if !got[id] {
			missing++
		}
	}
	if missing == 0 || missing > 500 || !bytes.Contains(out, []byte(fmt.Sprintf("could not read %d seqs", missing))) {
		t.Fatalf("repaired log lacks %d of %d events; the repair said:\n%s", missing, len(ids), out)
	}

	peer := startProc(t, full)
	b := filepath.Join(dir, "b.db")
	fixed := filepath.Join(dir, "fixed.db")
	out = []byte(runCLI(t, "repair", "--db", b, "--out", fixed, "--peer", peer.base))
	t.Logf("repair with a peer:\n%s", out)
	if !bytes.Contains(out, []byte("could not read")) || !bytes.Contains(out, []byte(" 0 events named as lost are still missing")) {
		t.Fatalf("repair with a peer:\n%s", out)
	}
	if damagedNow, _ := os.ReadFile(b); !bytes.Equal(damagedNow[:100], raw[:100]) {
		t.Fatal("--out changed the damaged log")
	}
	q := startProc(t, fixed)
	got = exportIDs(t, q.base)
	for _, id := range ids {
		if !got[id] {
			t.Fatalf("event %s missing after a repair with --peer", id)
		}
	}
	t.Logf("without a peer the repaired log lacked %d of %d events; with one, none", missing, len(ids))
}
