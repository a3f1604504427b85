package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/anp2net/relay/client"
	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/eventlog"
	"github.com/anp2net/relay/relay/postgres/pgtest"
	"github.com/anp2net/relay/relay/reconcile"
)

// redactRun runs anp2 with args and returns its combined output and
// whether it exited zero.
func redactRun(t *testing.T, args ...string) (string, bool) {
	t.Helper()
	out, err := exec.Command(binary, args...).CombinedOutput()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatal(err)
	}
	return string(out), err == nil
}

// redactGet answers GET base+path: status and body.
func redactGet(t *testing.T, base, path string) (int, []byte) {
	t.Helper()
	resp, err := http.Get(base + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// redactPublish publishes e and returns the relay's status and body.
func redactPublish(t *testing.T, base string, e *protocol.Event) (int, []byte) {
	t.Helper()
	resp, err := http.Post(base+"/events", "application/json", bytes.NewReader(protocol.AppendJSON(nil, e)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// redactEvent signs an event of kind by key.
func redactEvent(key ed25519.PrivateKey, kind int64, content string, tags ...[]string) *protocol.Event {
	if tags == nil {
		tags = [][]string{}
	}
	e := &protocol.Event{CreatedAt: time.Now().Unix(), Kind: kind, Content: content, Tags: tags}
	e.Sign(key)
	return e
}

// redactMustPublish publishes e and requires it stored.
func redactMustPublish(t *testing.T, base string, e *protocol.Event) {
	t.Helper()
	if code, b := redactPublish(t, base, e); code != http.StatusOK {
		t.Fatalf("publish kind %d: %d %s", e.Kind, code, b)
	}
}

// redactStop kills a relay process and waits for it.
func redactStop(p *relayProc) {
	p.cmd.Process.Kill()
	p.cmd.Wait()
}

// redactRelayKey reads the public key of a relay key file.
func redactRelayKey(t *testing.T, path string) (ed25519.PrivateKey, string) {
	t.Helper()
	k, err := loadKey(path)
	if err != nil {
		t.Fatal(err)
	}
	return k, protocol.AgentIDOf(k)
}

// TestRedactWithholdsAndEveryToolAgrees redacts a post and a trust vote
// of a real relay's log with anp2 redact (refused while the relay runs),
// restarts the relay and checks every read path: 451 with the reason,
// no list or tag query returns them, /export gives tombstones, the tree
// keeps their entries, a publish of them again is 451, the trust view no
// longer counts the vote; a kind 25 by an ordinary agent hides nothing;
// then anp2 replay of the relay and of its database file derives the
// same /state, and anp2 audit reports both withheld entries and passes.
func TestRedactWithholdsAndEveryToolAgrees(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "redact.db")
	addr := httpLoopbackAddr(t)
	public := []string{"--public-base-url=http://" + addr, "--addr", addr}
	p := startProc(t, db, public...)
	keys := tlogKeys(3)
	alice, bob := keys[0], keys[1]
	post := redactEvent(alice, 1, "content under a court order", []string{"t", "redact-topic"})
	vote := redactEvent(bob, 6, `{"score":1}`, []string{"p", protocol.AgentIDOf(alice)})
	other := redactEvent(keys[2], 1, "an ordinary post", []string{"t", "redact-topic"})
	for _, e := range []*protocol.Event{post, vote, other} {
		redactMustPublish(t, p.base, e)
	}
	// A kind 25 by anyone but a counted relay key is an ordinary event.
	fake := redactEvent(bob, protocol.KindRedaction, `{"id":"`+other.ID+`","reason":"spite"}`, []string{"e", other.ID})
	redactMustPublish(t, p.base, fake)
	if code, b := redactGet(t, p.base, "/events/"+other.ID); code != http.StatusOK {
		t.Fatalf("an ordinary agent's kind 25 withheld an event: %d %s", code, b)
	}
	var trust struct {
		ScoreIn    float64 `json:"score_in"`
		VoterCount int     `json:"voter_count"`
	}
	waitFor(t, "the vote counted", func() bool {
		err := client.New(p.base).GetJSON(context.Background(), "/trust/"+protocol.AgentIDOf(alice), nil, &trust)
		return err == nil && trust.VoterCount == 1
	})

	out, ok := redactRun(t, "redact", "--db", db, "--id", post.ID, "--reason", "court order 7")
	if ok || !strings.Contains(out, "held by a running relay") || !strings.Contains(out, "stop that process") {
		t.Fatalf("redact of a served log:\n%s", out)
	}
	redactStop(p)
	for _, e := range []*protocol.Event{post, vote} {
		out, ok := redactRun(t, "redact", "--db", db, "--id", e.ID, "--reason", "court order 7")
		if !ok || !strings.Contains(out, "withheld "+e.ID) {
			t.Fatalf("redact %s:\n%s", e.ID, out)
		}
	}
	if out, ok := redactRun(t, "redact", "--db", db, "--id", post.ID, "--reason", "again"); ok || !strings.Contains(out, "already withheld") {
		t.Fatalf("second redact:\n%s", out)
	}
	// The body is gone from the file, not only from the answers.
	raw, err := exec.Command("grep", "-c", "content under a court order", db).CombinedOutput()
	if err == nil {
		t.Fatalf("the log file still holds the body: %s", raw)
	}

	q := startProc(t, db, public...)
	for _, path := range []string{"/events/" + post.ID, "/events/" + post.ID + "/raw", "/api/events/" + vote.ID} {
		code, b := redactGet(t, q.base, path)
		var e struct{ Detail, Code string }
		json.Unmarshal(b, &e)
		if code != http.StatusUnavailableForLegalReasons || e.Code != "withheld" || !strings.Contains(e.Detail, "court order 7") {
			t.Fatalf("GET %s: %d %s", path, code, b)
		}
	}
	for _, path := range []string{"/events?t=redact-topic", "/events?include_revoked=true&limit=500",
		"/events?ids=" + post.ID + "," + vote.ID + "&include_revoked=true", "/events?kinds=1&include_revoked=true",
		"/events?authors=" + protocol.AgentIDOf(alice) + "&include_revoked=true", "/history/" + protocol.AgentIDOf(alice) + "?kind=0"} {
		code, b := redactGet(t, q.base, path)
		// The redactions name the ids (and the reason); no body is there.
		if code != http.StatusOK || bytes.Contains(b, []byte(`{"id":"`+post.ID)) || bytes.Contains(b, []byte(`{"id":"`+vote.ID)) ||
			bytes.Contains(b, []byte("content under a court order")) {
			t.Fatalf("GET %s: %d %s", path, code, b)
		}
	}
	if code, b := redactGet(t, q.base, "/events?t=redact-topic"); !bytes.Contains(b, []byte(other.ID)) {
		t.Fatalf("the other post is gone: %d %s", code, b)
	}
	// /stream from the log's start: its stored events up to the other
	// post (stored after both, before the redactions) carry no body.
	if seen := redactStreamUntil(t, q.base, other.ID); strings.Contains(seen, `{"id":"`+post.ID) ||
		strings.Contains(seen, `{"id":"`+vote.ID) || strings.Contains(seen, "content under a court order") {
		t.Fatalf("/stream:\n%s", seen)
	}
	code, exp := redactGet(t, q.base, "/export")
	if code != http.StatusOK || bytes.Contains(exp, []byte("content under a court order")) {
		t.Fatalf("/export: %d %s", code, exp)
	}
	tombs := 0
	for _, line := range bytes.Split(exp, []byte("\n")) {
		if id, w, ok := eventlog.WithheldOf(line); ok {
			tombs++
			if (id != post.ID && id != vote.ID) || w.Reason != "court order 7" {
				t.Fatalf("tombstone %s", line)
			}
		}
	}
	if tombs != 2 {
		t.Fatalf("/export carries %d tombstones, want 2:\n%s", tombs, exp)
	}
	if code, b := redactGet(t, q.base, "/tlog/proof?id="+post.ID); code != http.StatusOK {
		t.Fatalf("the withheld event lost its entry: %d %s", code, b)
	}
	if code, b := redactPublish(t, q.base, post); code != http.StatusUnavailableForLegalReasons {
		t.Fatalf("publishing the withheld event again: %d %s", code, b)
	}
	trust.VoterCount = -1
	if err := client.New(q.base).GetJSON(context.Background(), "/trust/"+protocol.AgentIDOf(alice), nil, &trust); err != nil || trust.VoterCount != 0 {
		t.Fatalf("trust after the vote was withheld: %+v %v", trust, err)
	}
	var list struct {
		Redactors []string
		Withheld  []struct{ ID, Reason string }
	}
	_, relayID := redactRelayKey(t, db+".relay-key")
	if err := client.New(q.base).GetJSON(context.Background(), "/withheld", nil, &list); err != nil ||
		len(list.Withheld) != 2 || len(list.Redactors) != 1 || list.Redactors[0] != relayID {
		t.Fatalf("GET /withheld: %+v %v", list, err)
	}

	for _, src := range []string{q.base, db} {
		out, ok := redactRun(t, "replay", "--compare", q.base, src)
		if !ok || !strings.Contains(out, "match:") || !strings.Contains(out, `"revoked": 2`) {
			t.Fatalf("replay --compare %s:\n%s", src, out)
		}
	}
	// The relay's own log needs no key: the tombstones alone withhold.
	if out, ok := redactRun(t, "replay", db); !ok || !strings.Contains(out, `"revoked": 2`) {
		t.Fatalf("replay without --compare:\n%s", out)
	}
	out, ok = redactRun(t, "audit", q.base)
	if !ok || strings.Count(out, "withheld: entry") != 2 || !strings.Contains(out, "2 entries withheld") {
		t.Fatalf("audit:\n%s", out)
	}
	t.Logf("audit:\n%s", out)
}

// TestRedactAuditStillFailsOnARealMismatch: a log with a withheld entry
// whose past is then rewritten fails the audit; so does a tombstone that
// no signed redaction explains.
func TestRedactAuditStillFailsOnARealMismatch(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "mismatch.db")
	addr := httpLoopbackAddr(t)
	public := []string{"--public-base-url=http://" + addr, "--addr", addr}
	p := startProc(t, db, public...)
	keys := tlogKeys(2)
	var evs []*protocol.Event
	for i := range 5 {
		e := redactEvent(keys[i%2], 1, "post "+string(rune('a'+i)))
		redactMustPublish(t, p.base, e)
		evs = append(evs, e)
	}
	redactStop(p)
	if out, ok := redactRun(t, "redact", "--db", db, "--id", evs[1].ID, "--reason", "takedown"); !ok {
		t.Fatal(out)
	}
	q := startProc(t, db, public...)
	st := filepath.Join(dir, "audit.state")
	if out, ok := redactRun(t, "audit", q.base, "--state", st); !ok || !strings.Contains(out, "withheld: entry") || !strings.Contains(out, evs[1].ID) {
		t.Fatalf("audit of a redacted log:\n%s", out)
	}
	redactStop(q)

	// A tombstone the log's redactions do not explain.
	w, err := sql.Open("sqlite", db)
	if err != nil {
		t.Fatal(err)
	}
	tomb := eventlog.Tombstone(evs[3].ID, eventlog.Withholding{Reason: "quietly", Redaction: strings.Repeat("ab", 32), CreatedAt: evs[3].CreatedAt})
	idb, _ := hex.DecodeString(evs[3].ID)
	if _, err := w.Exec(`UPDATE events SET body = ? WHERE id = ?`, string(tomb), idb); err != nil {
		t.Fatal(err)
	}
	w.Close()
	r := startProc(t, db, public...)
	out, ok := redactRun(t, "audit", r.base)
	if ok || !strings.Contains(out, "WITHHELD WITHOUT A REDACTION") || !strings.Contains(out, evs[3].ID) {
		t.Fatalf("audit of an unexplained tombstone:\n%s", out)
	}
	redactStop(r)

	// The body put back, and another entry's event replaced.
	if w, err = sql.Open("sqlite", db); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Exec(`UPDATE events SET body = ? WHERE id = ?`, string(protocol.AppendJSON(nil, evs[3])), idb); err != nil {
		t.Fatal(err)
	}
	w.Close()
	tlogRewrite(t, db, 4)
	s := startProc(t, db, public...)
	out, ok = redactRun(t, "audit", s.base, "--state", st)
	if ok || !strings.Contains(out, "rewritten") {
		t.Fatalf("audit of a rewritten log:\n%s", out)
	}
	t.Logf("rewritten: %s", out)
}

// TestRedactPeersOptIn: a peer relay applies another relay's redaction
// (withholds the event and takes its body out of its log) only when its
// operator names that relay's key with --honor-redactions; reconciling
// with the redacting relay never lists the withheld id, and a mirror of
// it converges.
func TestRedactPeersOptIn(t *testing.T) {
	dir := t.TempDir()
	dbA := filepath.Join(dir, "a.db")
	a := startProc(t, dbA)
	keyA, idA := redactRelayKey(t, dbA+".relay-key")
	keys := tlogKeys(2)
	kept := redactEvent(keys[0], 1, "kept")
	gone := redactEvent(keys[1], 6, `{"score":0.5}`, []string{"p", protocol.AgentIDOf(keys[0])}, []string{"t", "peer-topic"})
	redactMustPublish(t, a.base, kept)
	redactMustPublish(t, a.base, gone)
	redactStop(a)
	if out, ok := redactRun(t, "redact", "--db", dbA, "--id", gone.ID, "--reason", "takedown"); !ok {
		t.Fatal(out)
	}
	a = startProc(t, dbA)

	// A fresh mirror of A gets everything but the withheld event, and a
	// second round has nothing left to do.
	dbM := filepath.Join(dir, "m.db")
	var res struct{ Need, Have, Fetched int }
	for round := range 2 {
		out, ok := redactRun(t, "mirror", "--db", dbM, "--peer", a.base)
		if !ok {
			t.Fatal(out)
		}
		json.Unmarshal([]byte(out[:strings.LastIndex(out, "}")+1]), &res)
		if round == 1 && (res.Need != 0 || res.Have != 0) {
			t.Fatalf("second mirror round: %s", out)
		}
	}
	// Reconciling with A, whole or filtered, never lists the withheld id.
	for _, q := range []string{"", "?since=0", "?kinds=1", "?authors=" + gone.AgentID} {
		if need := redactNeed(t, a.base+"/sync"+q); slices.Contains(need, gone.ID) || q == "" && !slices.Contains(need, kept.ID) {
			t.Fatalf("POST /sync%s lists %v", q, need)
		}
	}
	m := startProc(t, dbM)
	if code, _ := redactGet(t, m.base, "/events/"+kept.ID); code != http.StatusOK {
		t.Fatalf("the mirror lacks the kept event: %d", code)
	}
	if code, _ := redactGet(t, m.base, "/events/"+gone.ID); code != http.StatusNotFound {
		t.Fatalf("the mirror holds the withheld event: %d", code)
	}

	// Two peers hold the event and A's redaction (and an agent's own kind
	// 25): only the one that honors A's key withholds it.
	redaction := redactEvent(keyA, protocol.KindRedaction, `{"id":"`+gone.ID+`","reason":"takedown"}`, []string{"e", gone.ID})
	honors := startProc(t, filepath.Join(dir, "p.db"), "--honor-redactions", idA)
	ignores := startProc(t, filepath.Join(dir, "q.db"))
	for _, peer := range []*relayProc{honors, ignores} {
		redactMustPublish(t, peer.base, gone)
		redactMustPublish(t, peer.base, redaction)
	}
	if code, b := redactGet(t, honors.base, "/events/"+gone.ID); code != http.StatusUnavailableForLegalReasons || !bytes.Contains(b, []byte("takedown")) {
		t.Fatalf("honoring peer: %d %s", code, b)
	}
	if code, b := redactGet(t, honors.base, "/events?t=peer-topic"); code != http.StatusOK || bytes.Contains(b, []byte(gone.ID)) {
		t.Fatalf("honoring peer's list: %d %s", code, b)
	}
	if code, b := redactGet(t, honors.base, "/export"); code != http.StatusOK || bytes.Contains(b, []byte(`{"id":"`+gone.ID+`","agent_id"`)) {
		t.Fatalf("honoring peer's export: %d %s", code, b)
	}
	if code, b := redactGet(t, ignores.base, "/events/"+gone.ID); code != http.StatusOK {
		t.Fatalf("peer that does not honor A: %d %s", code, b)
	}
	for _, peer := range []*relayProc{honors, ignores} {
		if out, ok := redactRun(t, "replay", "--compare", peer.base, peer.base); !ok || !strings.Contains(out, "match:") {
			t.Fatalf("replay of %s:\n%s", peer.base, out)
		}
	}
	// The honoring peer takes the body out of its log as well; a replay
	// of its database matches it.
	dbP := filepath.Join(dir, "p.db")
	waitFor(t, "the honoring peer's log holds the tombstone", func() bool { return redactHoldsTombstone(t, dbP, gone.ID) })
	if out, ok := redactRun(t, "replay", "--compare", honors.base, dbP); !ok || !strings.Contains(out, "match:") {
		t.Fatalf("replay of the honoring peer's database:\n%s", out)
	}
	// A log that holds the body and A's redaction derives another state
	// when A's key counts: the key is part of what a replay must know.
	dbQ := filepath.Join(dir, "q.db")
	at := strconv.FormatInt(time.Now().Unix(), 10)
	with, _ := redactRun(t, "replay", "--at", at, "--redactor", idA, dbQ)
	without, _ := redactRun(t, "replay", "--at", at, dbQ)
	if dw, dn := redactDigest(t, with), redactDigest(t, without); dw == dn {
		t.Fatalf("the redactor key changed nothing: %s", dw)
	}
	if redactHoldsTombstone(t, dbQ, gone.ID) {
		t.Fatal("a peer that does not honor A's key replaced the body")
	}
}

// redactHoldsTombstone reports whether the SQLite log at db holds the
// tombstone of id (read without the writer lock, as replay reads).
func redactHoldsTombstone(t *testing.T, db, id string) bool {
	t.Helper()
	r, err := sql.Open("sqlite", db)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	idb, _ := hex.DecodeString(id)
	var body []byte
	if err := r.QueryRow(`SELECT body FROM events WHERE id = ?`, idb).Scan(&body); err != nil {
		return false
	}
	_, _, ok := eventlog.WithheldOf(body)
	return ok
}

// redactDigest returns the state digest a replay printed.
func redactDigest(t *testing.T, out string) string {
	t.Helper()
	m := regexp.MustCompile(`"digest": "([0-9a-f]{64})"`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no digest in:\n%s", out)
	}
	return m[1]
}

// TestRedactDiscardsSavedState: a relay stopped cleanly saves its derived
// state with a trust vote in it; anp2 redact withholds the vote and
// deletes the snapshot, so the restarted relay folds the whole log and
// no longer counts the vote (the tail after the snapshot could not take
// it out: its body is gone), and a replay agrees.
func TestRedactDiscardsSavedState(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "saved.db")
	p := startProc(t, db)
	keys := tlogKeys(2)
	vote := redactEvent(keys[1], 6, `{"score":1}`, []string{"p", protocol.AgentIDOf(keys[0])})
	redactMustPublish(t, p.base, vote)
	p.cmd.Process.Signal(syscall.SIGTERM)
	p.cmd.Wait()
	if snaps, _ := filepath.Glob(filepath.Join(db+".state", "snap-*")); len(snaps) == 0 {
		t.Fatal("a clean stop saved no derived state")
	}
	out, ok := redactRun(t, "redact", "--db", db, "--id", vote.ID, "--reason", "takedown")
	if !ok || !strings.Contains(out, "discarded 1 saved derived state") {
		t.Fatalf("redact:\n%s", out)
	}
	q := startProc(t, db)
	var trust struct {
		VoterCount int `json:"voter_count"`
	}
	if err := client.New(q.base).GetJSON(context.Background(), "/trust/"+protocol.AgentIDOf(keys[0]), nil, &trust); err != nil || trust.VoterCount != 0 {
		t.Fatalf("the withheld vote still counts: %+v %v", trust, err)
	}
	if out, ok := redactRun(t, "replay", "--compare", q.base, q.base); !ok || !strings.Contains(out, "match:") {
		t.Fatalf("replay:\n%s", out)
	}
}

// TestRedactPostgres: on a PostgreSQL log anp2 redact is refused while a
// relay process serves the database, and once it is stopped withholds the
// event, which the restarted relay answers 451 and a replay agrees with.
func TestRedactPostgres(t *testing.T) {
	pg := pgtest.DB(t)
	keyFile := filepath.Join(t.TempDir(), "relay.key")
	id := []string{"--relay-key", keyFile}
	p := startProc(t, pg, id...)
	e := redactEvent(tlogKeys(1)[0], 1, "to be withheld", []string{"t", "pg"})
	redactMustPublish(t, p.base, e)
	out, ok := redactRun(t, "redact", "--db", pg, "--relay-key", keyFile, "--id", e.ID, "--reason", "takedown")
	if ok || !strings.Contains(out, "relay processes serve") {
		t.Fatalf("redact of a served PostgreSQL log:\n%s", out)
	}
	redactStop(p)
	waitFor(t, "the stopped relay's session ends", func() bool {
		out, ok = redactRun(t, "redact", "--db", pg, "--relay-key", keyFile, "--id", e.ID, "--reason", "takedown")
		return ok || !strings.Contains(out, "relay processes serve")
	})
	if !ok {
		t.Fatalf("redact:\n%s", out)
	}
	q := startProc(t, pg, id...)
	if code, b := redactGet(t, q.base, "/events/"+e.ID); code != http.StatusUnavailableForLegalReasons {
		t.Fatalf("GET: %d %s", code, b)
	}
	if code, b := redactGet(t, q.base, "/events?t=pg&include_revoked=true"); code != http.StatusOK || bytes.Contains(b, []byte(`{"id":"`+e.ID)) {
		t.Fatalf("list: %d %s", code, b)
	}
	if out, ok := redactRun(t, "replay", "--compare", q.base, q.base); !ok || !strings.Contains(out, "match:") {
		t.Fatalf("replay:\n%s", out)
	}
}

// redactStreamUntil reads GET /stream from the log's start until a data
// line carries id, and returns what it read.
func redactStreamUntil(t *testing.T, base, id string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/stream", nil)
	req.Header.Set("Last-Event-ID", "0")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var seen strings.Builder
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 1<<16), 1<<20)
	for sc.Scan() {
		seen.WriteString(sc.Text() + "\n")
		if strings.HasPrefix(sc.Text(), "data:") && strings.Contains(sc.Text(), `{"id":"`+id) {
			return seen.String()
		}
	}
	t.Fatalf("the stream ended before %s: %v\n%s", id, sc.Err(), seen.String())
	return ""
}

// redactNeed reconciles an empty set with url (POST /sync) and returns
// the ids the relay lists.
func redactNeed(t *testing.T, url string) []string {
	t.Helper()
	sess := reconcile.NewSession(reconcile.NewIndex(nil))
	var need []string
	for msg := sess.Initiate(); msg != nil; {
		resp, err := http.Post(url, "application/negentropy", bytes.NewReader(msg))
		if err != nil {
			t.Fatal(err)
		}
		reply, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("POST %s: %d %s", url, resp.StatusCode, reply)
		}
		var n [][32]byte
		if msg, _, n, err = sess.Reconcile(reply); err != nil {
			t.Fatal(err)
		}
		for _, id := range n {
			need = append(need, hex.EncodeToString(id[:]))
		}
	}
	return need
}

// TestRedactMigrate copies a log with a withheld event to PostgreSQL and
// back: the tombstone lands at its seq each way, a relay over the copy
// withholds the event (451) and derives the same state as the original,
// and its transparency log has the same entries.
func TestRedactMigrate(t *testing.T) {
	pg := pgtest.DB(t)
	dir := t.TempDir()
	db := filepath.Join(dir, "orig.db")
	keyFile := filepath.Join(dir, "relay.key")
	id := []string{"--relay-key", keyFile, "--public-base-url", "http://relay.test"}
	p := startProc(t, db, id...)
	keys := tlogKeys(2)
	vote := redactEvent(keys[1], 6, `{"score":1}`, []string{"p", protocol.AgentIDOf(keys[0])})
	for _, e := range []*protocol.Event{redactEvent(keys[0], 1, "before"), vote, redactEvent(keys[0], 1, "after")} {
		redactMustPublish(t, p.base, e)
	}
	redactStop(p)
	if out, ok := redactRun(t, "redact", "--db", db, "--relay-key", keyFile, "--id", vote.ID, "--reason", "takedown"); !ok {
		t.Fatal(out)
	}
	p = startProc(t, db, id...)
	at := "--at=" + strconv.FormatInt(time.Now().Unix(), 10)
	back := filepath.Join(dir, "back.db")
	for _, m := range [][2]string{{db, pg}, {pg, back}} {
		if out, ok := redactRun(t, "migrate", "--from", m[0], "--to", m[1]); !ok {
			t.Fatalf("migrate %s to %s:\n%s", m[0], m[1], out)
		}
	}
	q := startProc(t, pg, id...)
	if code, b := redactGet(t, q.base, "/events/"+vote.ID); code != http.StatusUnavailableForLegalReasons {
		t.Fatalf("GET over the PostgreSQL copy: %d %s", code, b)
	}
	for _, c := range [][2]string{{p.base, pg}, {q.base, db}, {p.base, back}} {
		if out, ok := redactRun(t, "replay", at, "--compare", c[0], c[1]); !ok || !strings.Contains(out, "match:") {
			t.Fatalf("replay %s against %s:\n%s", c[1], c[0], out)
		}
	}
	// The original's 5 entries (its kind 10, three events, the kind 25)
	// hash alike in the copy.
	var roots []string
	for _, base := range []string{p.base, q.base} {
		tlogWait(t, base, 5)
		b, _ := tlogGet(t, base, "/tlog/consistency?from=5&to=5")
		var c struct {
			ToRoot string `json:"to_root"`
		}
		if err := json.Unmarshal(b, &c); err != nil || c.ToRoot == "" {
			t.Fatalf("consistency: %s %v", b, err)
		}
		roots = append(roots, c.ToRoot)
	}
	if roots[0] != roots[1] {
		t.Fatalf("the copy's tree differs: %v", roots)
	}
}
