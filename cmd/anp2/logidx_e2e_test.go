package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
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

// logidxMetric returns the value of the /metrics line that starts with
// name followed by a space, or -1.
func logidxMetric(t *testing.T, base, name string) float64 {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
	}
	return -1
}

// TestLogIndexFileAcrossKill9 imports a log (its close saves the index
// file), serves it, stops it cleanly, serves it again, publishes more,
// kills the relay with SIGKILL and serves the log again: each start loads
// the log's indexes from the file and reads only the events after it
// (anp2_log_index_loaded_from_seq, anp2_log_index_rows_read), the last
// one resumes and fills the reconciliation index with every event (from
// the items file), and every event is found by id and by author after
// the kill, a copy of an imported one answered duplicate.
func TestLogIndexFileAcrossKill9(t *testing.T) {
	dir := t.TempDir()
	var lines bytes.Buffer
	var imported []*protocol.Event
	at := time.Now().Unix() - 3600 // recent: a copy is published below
	for i := range 400 {
		e := &protocol.Event{CreatedAt: at + int64(i), Kind: protocol.KindPost, Content: "imported " + strconv.Itoa(i), Tags: [][]string{{"t", "logidx"}}}
		e.Sign(seededKey(i % 20))
		b, _ := json.Marshal(e)
		lines.Write(append(b, '\n'))
		imported = append(imported, e)
	}
	corpus := filepath.Join(dir, "corpus.jsonl")
	os.WriteFile(corpus, lines.Bytes(), 0o644)
	db := filepath.Join(dir, "log.db")
	runCLI(t, "import", "--db", db, corpus)
	if _, err := os.Stat(sqlite.IndexPath(db)); err != nil {
		t.Fatalf("import left no index file: %v", err)
	}
	p := startProc(t, db, "--rate-agent", "0", "--rate-ip", "0")
	if from, rows := logidxMetric(t, p.base, "anp2_log_index_loaded_from_seq"), logidxMetric(t, p.base, "anp2_log_index_rows_read"); from != 400 || rows != 0 {
		t.Fatalf("first start loaded from %v, read %v rows; want 400 and 0", from, rows)
	}
	// A clean stop saves the index file (and the derived state, so the
	// next starts resume and fill the reconciliation index from the
	// items file).
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	p.cmd.Wait()
	p = startProc(t, db, "--rate-agent", "0", "--rate-ip", "0")
	saved := logidxMetric(t, p.base, "anp2_log_index_loaded_from_seq")
	if saved < 400 || logidxMetric(t, p.base, "anp2_log_index_rows_read") != 0 {
		t.Fatalf("start after a clean stop loaded from %v", saved)
	}
	cl := client.New(p.base)
	ctx := context.Background()
	var published []*protocol.Event
	for i := range 30 {
		e := &protocol.Event{CreatedAt: time.Now().Unix() - int64(i), Kind: protocol.KindPost, Content: "published " + strconv.Itoa(i)}
		e.Sign(seededKey(100 + i%3))
		if res, err := cl.Publish(ctx, e, false); err != nil || !res.Accepted {
			t.Fatalf("publish: %+v %v", res, err)
		}
		published = append(published, e)
	}
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	p.cmd.Wait()

	q := startProc(t, db)
	// The relay stores events of its own, at each start too.
	from, rows, events := logidxMetric(t, q.base, "anp2_log_index_loaded_from_seq"), logidxMetric(t, q.base, "anp2_log_index_rows_read"),
		logidxMetric(t, q.base, "anp2_store_events")
	if from != saved || rows < 30 || rows > events-saved || rows > 40 {
		t.Fatalf("start after kill -9 loaded from %v, read %v rows of %v events; want %v and the rest", from, rows, events, saved)
	}
	if n := logidxMetric(t, q.base, `anp2_log_index_entries{index="reconcile"}`); n != events {
		t.Fatalf("the reconciliation index holds %v items of %v events", n, events)
	}
	if logidxMetric(t, q.base, "anp2_state_resumed_seq") <= 0 {
		t.Fatal("the start after kill -9 did not resume from saved state")
	}
	for _, e := range append(imported[:50:50], published...) {
		resp, err := http.Get(q.base + "/events/" + e.ID)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("event %s after kill -9: %d", e.ID, resp.StatusCode)
		}
	}
	resp, err := http.Get(q.base + "/events?authors=" + published[0].AgentID + "&limit=100")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if n := strings.Count(string(body), `"sig"`); n != 10 {
		t.Fatalf("author query after kill -9 gave %d events, want 10:\n%.300s", n, body)
	}
	res, err := client.New(q.base).Publish(ctx, imported[7], false)
	if err != nil || !res.Duplicate {
		t.Fatalf("a copy of an imported event: %+v %v", res, err)
	}
}
