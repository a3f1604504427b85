package relay

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anp2net/relay/client"
	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/sqlite"
)

// clock is an injectable relay clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

type testRelay struct {
	*httptest.Server
	store *sqlite.Store
	clock *clock
	srv   *Server
}

// vectorTime is near the conformance vectors' created_at.
const vectorTime = 1763800000

func startRelay(t *testing.T, tweak ...func(*Config)) *testRelay {
	t.Helper()
	return startRelayTB(t, tweak...)
}

func startRelayB(b *testing.B) *testRelay {
	return startRelayTB(b, func(c *Config) { c.RatePerAgent, c.RatePerIP = 0, 0 })
}

func startRelayTB(t testing.TB, tweak ...func(*Config)) *testRelay {
	t.Helper()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "relay.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	clk := &clock{t: time.Unix(vectorTime, 0)}
	cfg := DefaultConfig()
	cfg.Now = clk.now
	cfg.Checker.PoW.ActiveFrom = 0 // the vectors expect PoW to be mandatory
	for _, f := range tweak {
		f(&cfg)
	}
	srv, err := New(cfg, st)
	if err != nil {
		t.Fatal(err)
	}
	ts := newServer(t, srv)
	t.Cleanup(func() { st.Close() })
	return &testRelay{Server: ts, store: st, clock: clk, srv: srv}
}

// newServer serves srv on a loopback port until the test ends.
func newServer(t testing.TB, srv *Server) *httptest.Server {
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	return ts
}

type answer struct {
	status int
	header http.Header
	body   []byte
}

func (a answer) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(a.body, &m); err != nil {
		t.Fatalf("body %q: %v", a.body, err)
	}
	return m
}

func (a answer) code(t *testing.T) string {
	t.Helper()
	c, _ := a.json(t)["code"].(string)
	return c
}

func (r *testRelay) do(t *testing.T, method, path, ct string, body []byte, hdr ...string) answer {
	t.Helper()
	req, _ := http.NewRequest(method, r.URL+path, bytes.NewReader(body))
	if ct != "" {
		req.Header.Set("Content-Type", ct)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, resp.Header, b}
}

func (r *testRelay) post(t *testing.T, e *protocol.Event) answer {
	return r.do(t, "POST", "/events", "application/json", protocol.AppendJSON(nil, e))
}

func (r *testRelay) count(t *testing.T) int64 {
	st, err := r.store.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return st.Events
}

func key(i int) ed25519.PrivateKey {
	seed := make([]byte, 32)
	seed[0], seed[1], seed[31] = byte(i), byte(i>>8), 0x5a
	return ed25519.NewKeyFromSeed(seed)
}

func mk(k ed25519.PrivateKey, createdAt, kind int64, content string, tags ...[]string) *protocol.Event {
	e := &protocol.Event{CreatedAt: createdAt, Kind: kind, Content: content, Tags: tags}
	if e.Tags == nil {
		e.Tags = [][]string{}
	}
	e.Sign(k)
	return e
}

func TestVectorsOverHTTP(t *testing.T) {
	r := startRelay(t, func(c *Config) { c.Checker.Limits.MaxFuture = 1 << 40 })
	f, err := os.Open("../testdata/vectors/events.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	accepted := 0
	for sc.Scan() {
		var v struct {
			Name   string          `json:"name"`
			Event  json.RawMessage `json:"event"`
			Valid  bool            `json:"valid"`
			Reason string          `json:"reason"`
		}
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			t.Fatal(err)
		}
		a := r.do(t, "POST", "/events", "application/json", v.Event)
		if v.Valid {
			if a.status != 200 {
				t.Errorf("%s: %d %s", v.Name, a.status, a.body)
			}
			accepted++
			continue
		}
		if a.status != 400 || !strings.HasPrefix(a.code(t), map[string]string{"id": "id_", "sig": "invalid_sig", "pow": "pow_"}[v.Reason]) {
			t.Errorf("%s (%s): %d %s", v.Name, v.Reason, a.status, a.body)
		}
	}
	if got := r.count(t); got != int64(accepted) {
		t.Fatalf("log holds %d events, %d were accepted", got, accepted)
	}
}

func TestBadInputIsA4xxAndLeavesTheLogUntouched(t *testing.T) {
	r := startRelay(t)
	k := key(1)
	good := mk(k, vectorTime, 1, "hello")
	future := mk(k, vectorTime+301, 1, "later")
	old := mk(k, vectorTime-8*86400, 1, "old")
	big := mk(k, vectorTime, 1, strings.Repeat("x", 65537))
	forged := *good
	forged.Content = "changed"
	badSig := *good
	badSig.Sig = strings.Repeat("0", 128)
	revokeOther := mk(key(2), vectorTime, 9, "{}", []string{"e", good.ID})
	if a := r.post(t, good); a.status != 200 {
		t.Fatal(a.status, string(a.body))
	}
	before := r.count(t)
	cases := []struct {
		name   string
		ct     string
		body   []byte
		status int
		code   string
	}{
		{"not json", "application/json", []byte("{"), 422, ""},
		{"missing field", "application/json", []byte(`{"id":"00"}`), 422, ""},
		{"future", "application/json", protocol.AppendJSON(nil, future), 400, protocol.CodeTooFarFuture},
		{"old", "application/json", protocol.AppendJSON(nil, old), 400, protocol.CodeTooFarPast},
		{"big content", "application/json", protocol.AppendJSON(nil, big), 400, protocol.CodeContentTooLarge},
		{"forged content", "application/json", protocol.AppendJSON(nil, &forged), 400, protocol.CodeIDMismatch},
		{"bad sig", "application/json", protocol.AppendJSON(nil, &badSig), 400, protocol.CodeBadSignature},
		{"revoke someone else's", "application/json", protocol.AppendJSON(nil, revokeOther), 400, CodeRevokeNotOwner},
		{"kind 0 without pow", "application/json", protocol.AppendJSON(nil, mk(k, vectorTime, 0, "{}")), 400, protocol.CodePoWRequired},
		{"bad cbor", protocol.ContentTypeCBOR, []byte{0xbf, 0xff}, 422, ""},
		{"xml", "application/xml", []byte("<e/>"), 415, CodeUnsupportedType},
		{"huge body", "application/json", bytes.Repeat([]byte(" "), 2<<20), 413, CodeBodyTooLarge},
	}
	for _, c := range cases {
		a := r.do(t, "POST", "/events", c.ct, c.body)
		if a.status != c.status {
			t.Errorf("%s: status %d want %d: %s", c.name, a.status, c.status, a.body)
			continue
		}
		m := a.json(t)
		if c.status == 422 {
			if list, ok := m["detail"].([]any); !ok || len(list) == 0 {
				t.Errorf("%s: 422 without field list: %s", c.name, a.body)
			}
			continue
		}
		if m["code"] != c.code || m["detail"] == "" {
			t.Errorf("%s: body %s, want code %s", c.name, a.body, c.code)
		}
	}
	if r.count(t) != before {
		t.Fatal("rejected input changed the log")
	}
}

func TestDuplicateIsIdempotent(t *testing.T) {
	r := startRelay(t)
	e := mk(key(1), vectorTime, 1, "once")
	a1, a2 := r.post(t, e).json(t), r.post(t, e).json(t)
	if a1["duplicate"] != false || a2["duplicate"] != true || a2["accepted"] != true {
		t.Fatalf("%v %v", a1, a2)
	}
	if r.count(t) != 1 {
		t.Fatal("duplicate stored twice")
	}
}

// TestJSONAndCBORPathsAgree publishes the same events as JSON to one relay
// and as CBOR to another, then requires byte-identical query answers.
func TestJSONAndCBORPathsAgree(t *testing.T) {
	viaJSON, viaCBOR := startRelay(t), startRelay(t)
	var evs []*protocol.Event
	for i := 0; i < 20; i++ {
		evs = append(evs, mk(key(i%3), vectorTime-int64(i), int64(1+i%2), fmt.Sprintf("<%d> & ünï \u2028", i), []string{"t", fmt.Sprint("x", i%4)}))
	}
	for _, e := range evs {
		cb, _ := protocol.EncodeCBOR(e)
		if a := viaCBOR.do(t, "POST", "/api/events", protocol.ContentTypeCBOR, cb); a.status != 200 || a.json(t)["id"] != e.ID {
			t.Fatalf("cbor publish: %d %s", a.status, a.body)
		}
		if a := viaJSON.post(t, e); a.status != 200 {
			t.Fatalf("json publish: %d %s", a.status, a.body)
		}
	}
	for _, q := range []string{"/events?limit=1000", "/events?t=x1", "/events?kinds=2&limit=5"} {
		a, b := viaJSON.do(t, "GET", q, "", nil), viaCBOR.do(t, "GET", q, "", nil)
		if a.status != 200 || !bytes.Equal(a.body, b.body) {
			t.Fatalf("%s differs:\n%s\n%s", q, a.body, b.body)
		}
		c := viaJSON.do(t, "GET", q, "", nil, "Accept", protocol.ContentTypeCBOR)
		if c.header.Get("Content-Type") != protocol.ContentTypeCBOR {
			t.Fatalf("Accept cbor ignored: %s", c.header.Get("Content-Type"))
		}
	}
	// The CBOR-carried event keeps its raw bytes.
	raw := viaCBOR.do(t, "GET", "/events/"+evs[0].ID+"/raw", "", nil)
	want, _ := protocol.EncodeCBOR(evs[0])
	if !bytes.Equal(raw.body, want) || raw.header.Get("Content-Type") != protocol.ContentTypeCBOR {
		t.Fatal("raw CBOR bytes not kept")
	}
}

func TestRateLimits(t *testing.T) {
	r := startRelay(t, func(c *Config) { c.RatePerIP = 100 })
	k := key(1)
	for i := 0; i < 60; i++ {
		if a := r.post(t, mk(k, vectorTime, 1, fmt.Sprint(i))); a.status != 200 {
			t.Fatalf("event %d: %d %s", i, a.status, a.body)
		}
	}
	a := r.post(t, mk(k, vectorTime, 1, "61st"))
	if a.status != 429 || a.code(t) != CodeRateLimited || a.header.Get("Retry-After") == "" {
		t.Fatalf("61st event: %d %s %v", a.status, a.body, a.header)
	}
	// Another agent from the same address is still under the IP limit.
	if a := r.post(t, mk(key(2), vectorTime, 1, "other")); a.status != 200 {
		t.Fatalf("other agent: %d", a.status)
	}
	for i := 0; i < 39; i++ {
		r.post(t, mk(key(3+i), vectorTime, 1, "fill"))
	}
	if a := r.post(t, mk(key(99), vectorTime, 1, "ip full")); a.status != 429 {
		t.Fatalf("IP limit not applied: %d", a.status)
	}
	r.clock.add(61 * time.Second)
	if a := r.post(t, mk(k, vectorTime+61, 1, "later")); a.status != 200 {
		t.Fatalf("after the window: %d %s", a.status, a.body)
	}
}

func TestRevokeHidesOnlyOwnEvents(t *testing.T) {
	r := startRelay(t)
	a, b := key(1), key(2)
	mine := mk(a, vectorTime, 1, "mine")
	r.post(t, mine)
	rv := mk(a, vectorTime+1, 9, `{"reason":"oops"}`, []string{"e", mine.ID})
	if ans := r.post(t, rv); ans.status != 200 {
		t.Fatal(string(ans.body))
	}
	if ans := r.do(t, "GET", "/events/"+mine.ID, "", nil); ans.status != 404 || ans.code(t) != CodeRevoked {
		t.Fatalf("revoked event served: %d %s", ans.status, ans.body)
	}
	if ans := r.do(t, "GET", "/events/"+mine.ID+"?include_revoked=true", "", nil); ans.status != 200 {
		t.Fatalf("include_revoked: %d", ans.status)
	}
	var list []protocol.Event
	json.Unmarshal(r.do(t, "GET", "/events?kinds=1", "", nil).body, &list)
	if len(list) != 0 {
		t.Fatalf("revoked event listed: %v", list)
	}
	// A revoke naming an event that is not (yet) here is accepted but binds
	// only the revoker's own events.
	theirs := mk(b, vectorTime, 1, "theirs")
	early := mk(a, vectorTime+2, 9, "{}", []string{"e", theirs.ID})
	if ans := r.post(t, early); ans.status != 200 {
		t.Fatal(string(ans.body))
	}
	r.post(t, theirs)
	if ans := r.do(t, "GET", "/events/"+theirs.ID, "", nil); ans.status != 200 {
		t.Fatalf("someone else's revoke hid an event: %d", ans.status)
	}
}

func TestDryRunListsEveryViolation(t *testing.T) {
	r := startRelay(t)
	e := mk(key(1), vectorTime+1000, 0, strings.Repeat("x", 70000))
	e.Sig = strings.Repeat("1", 128)
	a := r.do(t, "POST", "/events/dry-run", "application/json", protocol.AppendJSON(nil, e))
	var ans dryRunAnswer
	if err := json.Unmarshal(a.body, &ans); err != nil || a.status != 200 {
		t.Fatal(a.status, string(a.body))
	}
	codes := map[string]bool{}
	for _, v := range ans.Violations {
		codes[v.Code] = true
	}
	for _, want := range []string{protocol.CodeContentTooLarge, protocol.CodeTooFarFuture, protocol.CodeBadSignature, protocol.CodePoWRequired} {
		if !codes[want] {
			t.Errorf("dry-run missed %s: %+v", want, ans.Violations)
		}
	}
	if ans.Valid || r.count(t) != 0 {
		t.Fatal("dry-run stored or passed an invalid event")
	}
}

func TestQueryParameters(t *testing.T) {
	r := startRelay(t)
	k := key(1)
	for i := 0; i < 5; i++ {
		r.post(t, mk(k, vectorTime-int64(i), 1, fmt.Sprint(i), []string{"t", "w"}, []string{"x", "custom"}))
	}
	bad := []string{"?limit=0", "?limit=1001", "?kinds=-1", "?authors=ABC", "?e=zz", "?since=x", "?tpyo=1", "?limit=1&limit=2", "?include_revoked=maybe"}
	for _, q := range bad {
		if a := r.do(t, "GET", "/events"+q, "", nil); a.status != 400 || a.code(t) == "" {
			t.Errorf("%s: %d %s", q, a.status, a.body)
		}
	}
	var list []protocol.Event
	json.Unmarshal(r.do(t, "GET", "/api/events?x=custom&limit=2", "", nil).body, &list)
	if len(list) != 2 || list[0].CreatedAt != vectorTime {
		t.Fatalf("single-letter tag filter: %+v", list)
	}
	if a := r.do(t, "GET", "/history/"+protocol.AgentIDOf(k)+"?kind=1", "", nil); a.status != 400 {
		t.Fatalf("history of a non-overwrite kind: %d", a.status)
	}
}

func TestExportHealthMetrics(t *testing.T) {
	r := startRelay(t)
	for i := 0; i < 3; i++ {
		r.post(t, mk(key(i), vectorTime, 1, "x"))
	}
	r.post(t, mk(key(1), vectorTime, 11, `{"status":"ok"}`))
	a := r.do(t, "GET", "/export?after=1&seq=true", "", nil)
	lines := strings.Split(strings.TrimSpace(string(a.body)), "\n")
	if a.status != 200 || len(lines) != 2 || a.header.Get("X-ANP2-Through-Seq") != "3" || !strings.HasPrefix(lines[0], `{"seq":2,"event":{`) {
		t.Fatalf("export: %d %q %v", a.status, lines, a.header)
	}
	h := r.do(t, "GET", "/api/health", "", nil).json(t)
	if h["events"] != float64(3) {
		t.Fatalf("kind 11 stored or health wrong: %v", h)
	}
	m := string(r.do(t, "GET", "/metrics", "", nil).body)
	for _, want := range []string{"anp2_events_accepted_total 3", "anp2_ingest_seconds_count", "anp2_store_events 3"} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %q:\n%s", want, m)
		}
	}
	if a := r.do(t, "GET", "/nope", "", nil); a.status != 404 || a.code(t) != CodeNotFound {
		t.Fatalf("unknown route: %d %s", a.status, a.body)
	}
}

// viewsRelay is a relay whose clock sits at vectorTime, with no rate
// limits and no mandatory PoW (generated kind 50s are not mined).
func viewsRelay(t *testing.T, path string) *testRelay {
	t.Helper()
	st, err := sqlite.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	return relayOn(t, st)
}

func relayOn(t *testing.T, st *sqlite.Store) *testRelay {
	t.Helper()
	clk := &clock{t: time.Unix(vectorTime, 0)}
	cfg := DefaultConfig()
	cfg.Now, cfg.RatePerAgent, cfg.RatePerIP = clk.now, 0, 0
	cfg.Checker.PoW.Kinds = nil
	srv, err := New(cfg, st)
	if err != nil {
		t.Fatal(err)
	}
	r := &testRelay{store: st, clock: clk, srv: srv}
	r.Server = newServer(t, srv)
	return r
}

// publishAll posts evs with n concurrent publishers and fails on any
// rejection.
func publishAll(t *testing.T, base string, evs []*protocol.Event, n int) {
	t.Helper()
	c := client.New(base)
	work := make(chan *protocol.Event)
	errs := make(chan error, n)
	for range n {
		go func() {
			var first error
			for e := range work {
				if _, err := c.Publish(context.Background(), e, false); err != nil && first == nil {
					first = err
				}
			}
			errs <- first
		}()
	}
	for _, e := range evs {
		work <- e
	}
	close(work)
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// eventually polls cond until it holds or 10 s pass (snapshots refresh in
// the background; this waits for a state, it does not time anything).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("%s: condition not reached", what)
}
