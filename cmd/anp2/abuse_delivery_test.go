package main

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anp2net/relay/protocol"
)

// The trigger and delivery attacks of SPEC §20.2, against a real anp2
// serve process with webhook receivers on loopback.

// deliveryRelay starts anp2 serve allowed to call loopback receivers,
// without publish or header rate limits, with env added.
func deliveryRelay(t *testing.T, env ...string) *relayProc {
	t.Helper()
	env = append([]string{"ANP2_WEBHOOK_ALLOW_PRIVATE=1"}, env...)
	return startProcEnv(t, env, filepath.Join(t.TempDir(), "delivery.db"),
		"--rate-agent", "0", "--rate-ip", "0", "--rate-auth", "0")
}

// deliveryKey is the i-th key of a test.
func deliveryKey(i int) ed25519.PrivateKey {
	seed := make([]byte, 32)
	seed[0], seed[1], seed[31] = byte(i), byte(i>>8), 0xd1
	return ed25519.NewKeyFromSeed(seed)
}

// deliveryRegister posts spec to POST /triggers as k, with an
// Authorization event mined to bits (0: none), and returns the status
// and the decoded answer.
func deliveryRegister(t *testing.T, base string, k ed25519.PrivateKey, spec string, bits int) (int, map[string]any) {
	t.Helper()
	return deliveryPost(t, base+"/triggers", spec, deliveryAuth(t, k, base+"/triggers", spec, bits))
}

// deliveryAuth is a D4 header for POST url with body, its event mined to
// bits leading zero bits (D3) as a client does it, independently of the
// relay's own helper.
func deliveryAuth(t *testing.T, k ed25519.PrivateKey, url, body string, bits int) string {
	t.Helper()
	sum := sha256.Sum256([]byte(body))
	e := &protocol.Event{AgentID: protocol.AgentIDOf(k), CreatedAt: time.Now().Unix(), Kind: protocol.KindHTTPAuth,
		Tags: [][]string{{"u", url}, {"method", "POST"}, {"payload", hex.EncodeToString(sum[:])}, {"nonce", strconv.FormatInt(time.Now().UnixNano(), 10)}}}
	if bits > 0 { // Mine replaces the nonce, from a random start
		if err := protocol.Mine(context.Background(), e, bits); err != nil {
			t.Fatal(err)
		}
	} else {
		// Two unmined headers of one body in one second would be the same
		// event, which the relay refuses as a replay (auth_replayed).
		var n [8]byte
		_, _ = rand.Read(n[:])
		e.Tags = append(e.Tags, []string{"nonce", hex.EncodeToString(n[:])})
	}
	e.Sign(k)
	return "ANP2 " + base64.StdEncoding.EncodeToString(protocol.AppendJSON(nil, e))
}

func deliveryPost(t *testing.T, url, body, auth string) (int, map[string]any) {
	t.Helper()
	st, _, b := httpDo(t, "POST", url, []byte(body), "Content-Type", "application/json", "Authorization", auth)
	var ans map[string]any
	_ = json.Unmarshal(b, &ans)
	return st, ans
}

// deliveryTriggers returns k's triggers as GET /triggers lists them.
func deliveryTriggers(t *testing.T, base string, k ed25519.PrivateKey) []map[string]any {
	t.Helper()
	st, _, b := httpDo(t, "GET", base+"/triggers", nil, "Authorization", protocol.HTTPAuth(k, "GET", base+"/triggers", nil, time.Now().Unix()))
	var ans struct{ Triggers []map[string]any }
	if st != 200 || json.Unmarshal(b, &ans) != nil {
		t.Fatalf("GET /triggers: %d %s", st, b)
	}
	return ans.Triggers
}

// deliveryPublish publishes a kind 1 post by k with content and tags.
func deliveryPublish(t *testing.T, base string, k ed25519.PrivateKey, content string, tags ...[]string) {
	t.Helper()
	if st, _, code := publishRaw(t, base, signed(k, protocol.KindPost, content, tags...)); st != 200 {
		t.Fatalf("publish: %d %s", st, code)
	}
}

// TestAbuseDeliveryTriggerCostsProofOfWork: registering a trigger costs
// a fresh key 20 bits of proof of work on its Authorization event (the
// default of anp2 serve), one proof per trigger: a plain header, too few
// bits or a replayed header is 400 trigger_pow_required and registers
// nothing.
func TestAbuseDeliveryTriggerCostsProofOfWork(t *testing.T) {
	p := deliveryRelay(t)
	k := deliveryKey(1)
	spec := `{"match":{"kinds":[1]},"target":{"type":"webhook","url":"http://127.0.0.1:9/hook"}}`
	plain := protocol.HTTPAuth(k, "POST", p.base+"/triggers", []byte(spec), time.Now().Unix())
	if st, ans := deliveryPost(t, p.base+"/triggers", spec, plain); st != 400 || ans["code"] != "trigger_pow_required" {
		t.Fatalf("without proof of work: %d %v", st, ans)
	}
	if st, ans := deliveryRegister(t, p.base, k, spec, 12); st != 400 || ans["code"] != "trigger_pow_required" {
		t.Fatalf("12 bits: %d %v", st, ans)
	}
	auth := deliveryAuth(t, k, p.base+"/triggers", spec, 20)
	if st, ans := deliveryPost(t, p.base+"/triggers", spec, auth); st != 201 {
		t.Fatalf("20 bits: %d %v", st, ans)
	}
	// A proof pays once: the core refuses the header a second time
	// (auth_replayed, SPEC §3.2), and the trigger route's own memory of
	// spent proofs would refuse it after that.
	if st, ans := deliveryPost(t, p.base+"/triggers", spec, auth); st != 401 || ans["code"] != "auth_replayed" {
		t.Fatalf("replayed proof: %d %v", st, ans)
	}
	if n := len(deliveryTriggers(t, p.base, k)); n != 1 {
		t.Fatalf("%d triggers registered, want 1", n)
	}
}

// blackHole is a webhook target that never answers: it holds every
// request until the relay gives up on it (the 10 s send timeout) or the
// test ends, and counts them.
type blackHole struct {
	*httptest.Server
	mu                              sync.Mutex
	arrived, inflight, most, closed int
	stop                            chan struct{}
}

func newBlackHole(t *testing.T) *blackHole {
	h := &blackHole{stop: make(chan struct{})}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Reading the body lets the server see the relay hang up (its
		// context then ends).
		_, _ = io.Copy(io.Discard, r.Body)
		h.mu.Lock()
		h.arrived++
		h.inflight++
		h.most = max(h.most, h.inflight)
		h.mu.Unlock()
		select {
		case <-r.Context().Done():
		case <-h.stop:
		}
		h.mu.Lock()
		h.inflight--
		h.closed++
		h.mu.Unlock()
	}))
	t.Cleanup(func() { close(h.stop); h.Close() })
	return h
}

func (h *blackHole) counts() (arrived, inflight, most, closed int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.arrived, h.inflight, h.most, h.closed
}

// TestAbuseDeliveryBlackHoleDoesNotStarveVictim: ten free keys with
// twenty triggers each aim at a target that never answers, and a post
// makes 200 deliveries to it. The target host gets at most its share of
// the workers (half of them) at once, so a victim's delivery, matched
// after them, goes out at once: before any request to the black hole has
// even timed out.
func TestAbuseDeliveryBlackHoleDoesNotStarveVictim(t *testing.T) {
	hole := newBlackHole(t)
	victimGot := make(chan int, 1)
	good := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _, _, closed := hole.counts()
		select {
		case victimGot <- closed:
		default:
		}
	}))
	defer good.Close()
	p := deliveryRelay(t, "ANP2_TRIGGER_POW=0")
	for i := range 10 {
		for range 20 {
			spec := `{"match":{"kinds":[1],"tags":{"t":["flood"]}},"target":{"type":"webhook","url":"` + hole.URL + `/hole"}}`
			if st, ans := deliveryRegister(t, p.base, deliveryKey(10+i), spec, 0); st != 201 {
				t.Fatalf("attacker trigger: %d %v", st, ans)
			}
		}
	}
	victim := deliveryKey(1)
	if st, ans := deliveryRegister(t, p.base, victim, `{"match":{"kinds":[1],"tags":{"t":["victim"]}},"target":{"type":"webhook","url":"`+good.URL+`/hook"}}`, 0); st != 201 {
		t.Fatalf("victim trigger: %d %v", st, ans)
	}
	deliveryPublish(t, p.base, deliveryKey(2), "flood", []string{"t", "flood"})
	// Every worker the black hole can get is taken before the victim's
	// event is published (64 of 128 by its host's share; all 128 before).
	for end := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, inflight, _, _ := hole.counts(); inflight >= 64 {
			break
		}
		if time.Now().After(end) {
			t.Fatal("the black hole never got 64 requests")
		}
	}
	deliveryPublish(t, p.base, deliveryKey(3), "help", []string{"t", "victim"})
	select {
	case closed := <-victimGot:
		if closed != 0 {
			t.Fatalf("the victim's delivery waited for %d black-hole requests to time out", closed)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("the victim's delivery never arrived")
	}
	if _, _, most, _ := hole.counts(); most > 64 {
		t.Fatalf("the black hole held %d workers at once, over its host's share of 64", most)
	}
}

// TestAbuseDeliveryRegexFilters: a pathological regex is refused at
// registration; an owner's fifty expensive-but-allowed regex filters
// over two 60 KB posts do not hold up another owner's deliveries of
// them: the owner's filter budget per event stops them, and the trigger
// that would cross it is paused, as GET /triggers shows.
func TestAbuseDeliveryRegexFilters(t *testing.T) {
	var mu sync.Mutex
	got := 0
	good := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/other" { // the costly owner's pause notices go to /costly
			return
		}
		mu.Lock()
		got++
		mu.Unlock()
	}))
	defer good.Close()
	p := deliveryRelay(t, "ANP2_TRIGGER_POW=0")
	costly, other := deliveryKey(1), deliveryKey(2)
	filter := func(re string) string {
		v, _ := json.Marshal(re)
		return `{"match":{"kinds":[1]},"filter":[{"path":"$.text","operator":"regex","value":` + string(v) + `}],` +
			`"target":{"type":"webhook","url":"` + good.URL + `/costly"}}`
	}
	if st, ans := deliveryRegister(t, p.base, costly, filter(`[\p{L}\p{N}]{1000}z`), 0); st != 400 || ans["code"] != "invalid_trigger" {
		t.Fatalf("pathological regex: %d %v", st, ans)
	}
	if n := len(deliveryTriggers(t, p.base, costly)); n != 0 {
		t.Fatalf("the refused trigger was registered (%d)", n)
	}
	for range 50 {
		if st, ans := deliveryRegister(t, p.base, costly, filter(`[\p{L}\p{N}]{100}z`), 0); st != 201 {
			t.Fatalf("allowed regex: %d %v", st, ans)
		}
	}
	if st, ans := deliveryRegister(t, p.base, other, `{"match":{"kinds":[1]},"target":{"type":"webhook","url":"`+good.URL+`/other"}}`, 0); st != 201 {
		t.Fatalf("other trigger: %d %v", st, ans)
	}
	text := `{"text":"` + strings.Repeat("a", 60_000) + `"}`
	deliveryPublish(t, p.base, deliveryKey(3), text)
	deliveryPublish(t, p.base, deliveryKey(4), text)
	for end := time.Now().Add(2 * time.Minute); ; time.Sleep(20 * time.Millisecond) {
		mu.Lock()
		n := got
		mu.Unlock()
		if n >= 2 {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("the other owner got %d of 2 deliveries", n)
		}
	}
	paused := 0
	for _, tr := range deliveryTriggers(t, p.base, costly) {
		if tr["status"] == "paused" {
			paused++
		}
	}
	if paused == 0 {
		t.Fatal("no costly trigger was paused")
	}
}
