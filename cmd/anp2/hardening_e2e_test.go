package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/anp2net/relay/client"
	"github.com/anp2net/relay/protocol"
)

// seededKey returns a deterministic test key.
func seededKey(i int) ed25519.PrivateKey {
	seed := make([]byte, 32)
	seed[0], seed[1], seed[30] = byte(i), byte(i>>8), 0xe2
	return ed25519.NewKeyFromSeed(seed)
}

// signed returns an event by k created now.
func signed(k ed25519.PrivateKey, kind int64, content string, tags ...[]string) *protocol.Event {
	e := &protocol.Event{CreatedAt: time.Now().Unix(), Kind: kind, Content: content, Tags: tags}
	if e.Tags == nil {
		e.Tags = [][]string{}
	}
	e.Sign(k)
	return e
}

// httpDo sends one request and returns status, headers and body.
func httpDo(t *testing.T, method, url string, body []byte, hdr ...string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultTransport.RoundTrip(req) // no transparent gzip: the test sees the wire
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}

// hideByFlags publishes a post and three spam flags from three agents, and
// waits until an anonymous reader is refused the post. It returns the post
// and how long after the third flag's 200 the post was first refused.
func hideByFlags(t *testing.T, cl *client.Client, base string) (*protocol.Event, time.Duration) {
	t.Helper()
	ctx := context.Background()
	post := signed(seededKey(100), protocol.KindPost, "to be hidden")
	if _, err := cl.Publish(ctx, post, false); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		f := signed(seededKey(101+i), protocol.KindFlag, `{"category":"spam"}`, []string{"e", post.ID})
		if _, err := cl.Publish(ctx, f, false); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	for deadline := start.Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if st, _, _ := httpDo(t, "GET", base+"/events/"+post.ID, nil); st == http.StatusForbidden {
			return post, time.Since(start)
		}
		if time.Now().After(deadline) {
			t.Fatal("three flags did not hide the post within 20 s")
		}
	}
}

// TestFlagsTakeEffectInSeconds: on a real relay process, three flags hide a
// post for anonymous readers within seconds, whatever second of the minute
// they land in (the relay once waited for the next whole minute: up to
// 60 s). The time is logged; the bound is generous for a shared machine.
func TestFlagsTakeEffectInSeconds(t *testing.T) {
	p := startProc(t, filepath.Join(t.TempDir(), "flags.db"))
	_, took := hideByFlags(t, client.New(p.base), p.base)
	t.Logf("hidden %v after the third flag", took)
	if took > 10*time.Second {
		t.Fatalf("hidden only %v after the third flag", took)
	}
}

// TestExportKeepsHiddenEventsFromAnonymousReaders closes the leak of
// hidden events through anonymous GET /export on a real relay process: an
// anonymous export leaves the hidden post out and says how many it left
// out; an authenticated one (any key) carries it; and `anp2 replay URL
// --compare URL`, which authenticates, still matches the relay's /state
// (hidden events count in derived state).
func TestExportKeepsHiddenEventsFromAnonymousReaders(t *testing.T) {
	p := startProc(t, filepath.Join(t.TempDir(), "hidden.db"))
	cl := client.New(p.base)
	post, _ := hideByFlags(t, cl, p.base)

	carries := func(body []byte) bool {
		for _, line := range bytes.Split(bytes.TrimSpace(body), []byte("\n")) {
			var e protocol.Event
			if json.Unmarshal(line, &e) == nil && e.ID == post.ID {
				return true
			}
		}
		return false
	}
	st, hdr, body := httpDo(t, "GET", p.base+"/export", nil)
	if st != 200 || carries(body) {
		t.Fatalf("anonymous export: %d, carries the hidden post: %v", st, carries(body))
	}
	if got := hdr.Get("X-ANP2-Hidden-Omitted"); got != "1" {
		t.Fatalf("anonymous export: X-ANP2-Hidden-Omitted %q, want 1", got)
	}
	auth := protocol.HTTPAuth(seededKey(7), "GET", p.base+"/export", nil, time.Now().Unix())
	st, hdr, body = httpDo(t, "GET", p.base+"/export", nil, "Authorization", auth)
	if st != 200 || !carries(body) || hdr.Get("X-ANP2-Hidden-Omitted") != "" {
		t.Fatalf("authenticated export: %d, carries the hidden post: %v, omitted %q", st, carries(body), hdr.Get("X-ANP2-Hidden-Omitted"))
	}
	// The Go client refuses an anonymous export that left events out.
	if _, err := cl.Export(context.Background(), 0, func(int64, json.RawMessage) error { return nil }); err == nil {
		t.Fatal("client accepted an incomplete anonymous export")
	}
	out := runCLI(t, "replay", "--compare", p.base, p.base)
	if !strings.Contains(out, "match:") {
		t.Fatalf("replay of a log with a hidden event: %s", out)
	}
}

// TestGossipFromAnonymousGetsPublishRules closes the gossip bypass on a
// real relay process: a backdated kind 0 with no proof of work, pushed to
// POST /gossip by nobody in particular, is refused as POST /events refuses
// it and never becomes a registered agent.
func TestGossipFromAnonymousGetsPublishRules(t *testing.T) {
	p := startProc(t, filepath.Join(t.TempDir(), "gossip.db"))
	k := seededKey(200)
	profile := &protocol.Event{CreatedAt: 1779000000, Kind: protocol.KindProfile, Content: `{"name":"sybil"}`, Tags: [][]string{}}
	profile.Sign(k) // before PoW's activation date, so a peer's history may carry it
	body, _ := json.Marshal([]*protocol.Event{profile})
	st, _, ans := httpDo(t, "POST", p.base+"/gossip", body, "Content-Type", "application/json")
	var g struct {
		Accepted int `json:"accepted"`
		Rejected []struct {
			Code string `json:"code"`
		} `json:"rejected"`
	}
	if st != 200 || json.Unmarshal(ans, &g) != nil || g.Accepted != 0 || len(g.Rejected) != 1 ||
		g.Rejected[0].Code != protocol.CodeTooFarPast {
		t.Fatalf("anonymous gossip of a backdated profile: %d %s", st, ans)
	}
	if st, _, _ := httpDo(t, "GET", p.base+"/agents/"+protocol.AgentIDOf(k), nil); st != 404 {
		t.Fatalf("the pushed profile registered an agent: %d", st)
	}
}

// TestSignatureChecksAreChargedFirst closes the CPU exhaustion hole on a
// real relay process: every signature check an address asks for (publish
// or dry-run, valid or not) is charged to its allowance before it is made,
// so junk signatures run out of allowance; junk signed in a victim's name
// does not spend the victim's own allowance.
func TestSignatureChecksAreChargedFirst(t *testing.T) {
	p := startProc(t, filepath.Join(t.TempDir(), "cpu.db"), "--rate-ip", "6", "--rate-agent", "3")
	victim := seededKey(300)
	junk := func(i int) []byte {
		e := signed(victim, protocol.KindPost, fmt.Sprint("junk ", i))
		e.Sig = strings.Repeat("ab", 64)
		return protocol.AppendJSON(nil, e)
	}
	codes := []int{}
	for i := range 4 {
		st, _, _ := httpDo(t, "POST", p.base+"/events", junk(i), "Content-Type", "application/json")
		codes = append(codes, st)
	}
	for i := range 2 {
		st, _, _ := httpDo(t, "POST", p.base+"/events/dry-run", junk(10+i), "Content-Type", "application/json")
		codes = append(codes, st)
	}
	if fmt.Sprint(codes) != "[400 400 400 400 200 200]" {
		t.Fatalf("junk signatures within the allowance: %v", codes)
	}
	st, hdr, body := httpDo(t, "POST", p.base+"/events", junk(20), "Content-Type", "application/json")
	if st != 429 || hdr.Get("Retry-After") == "" {
		t.Fatalf("junk past the allowance was verified: %d %s", st, body)
	}
	st, _, _ = httpDo(t, "POST", p.base+"/events/dry-run", junk(21), "Content-Type", "application/json")
	if st != 429 {
		t.Fatalf("a dry run past the allowance was verified: %d", st)
	}
	// The victim, from another loopback address, still has its whole agent
	// allowance: three posts go through, the fourth is over it.
	other := &http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{
		LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}).DialContext}}
	for i := range 4 {
		resp, err := other.Post(p.base+"/events", "application/json",
			bytes.NewReader(protocol.AppendJSON(nil, signed(victim, protocol.KindPost, fmt.Sprint("real ", i)))))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if want := map[bool]int{true: 200, false: 429}[i < 3]; resp.StatusCode != want {
			t.Fatalf("the victim's post %d after junk in its name: %d %s, want %d", i, resp.StatusCode, b, want)
		}
	}
}

// TestEveryRouteSpeaksCORSAndGzip drives a real relay process as a browser
// and a compressing client would: preflights for POST with Content-Type
// and Authorization are answered, every route carries
// Access-Control-Allow-Origin, and answers (JSON, the export, the stream)
// are gzipped for clients that accept it.
func TestEveryRouteSpeaksCORSAndGzip(t *testing.T) {
	p := startProc(t, filepath.Join(t.TempDir(), "cors.db"))
	cl := client.New(p.base)
	for i := range 40 {
		if _, err := cl.Publish(context.Background(), signed(seededKey(400+i%5), protocol.KindPost, fmt.Sprint("post number ", i), []string{"t", "cors"}), false); err != nil {
			t.Fatal(err)
		}
	}
	st, hdr, _ := httpDo(t, "OPTIONS", p.base+"/api/events", nil, "Origin", "https://app.example",
		"Access-Control-Request-Method", "POST", "Access-Control-Request-Headers", "content-type,authorization")
	allow := strings.ToLower(hdr.Get("Access-Control-Allow-Headers"))
	if st/100 != 2 || hdr.Get("Access-Control-Allow-Origin") != "*" || !strings.Contains(hdr.Get("Access-Control-Allow-Methods"), "POST") ||
		!strings.Contains(allow, "content-type") || !strings.Contains(allow, "authorization") {
		t.Fatalf("preflight: %d %v", st, hdr)
	}
	for _, path := range []string{"/events?t=cors", "/api/health", "/trust_graph", "/state", "/export", "/relays", "/metrics",
		"/events/" + strings.Repeat("0", 64), "/.well-known/agent-card.json",
		"/stats", "/capabilities/search?q=x", "/welcome", "/onboarding/" + strings.Repeat("0", 64)} {
		st, hdr, _ := httpDo(t, "GET", p.base+path, nil, "Origin", "https://app.example")
		if hdr.Get("Access-Control-Allow-Origin") != "*" || st == 404 && !strings.HasPrefix(path, "/events/") {
			t.Errorf("GET %s (%d): no Access-Control-Allow-Origin", path, st)
		}
	}
	for _, path := range []string{"/events?t=cors&limit=40", "/export"} {
		_, plainHdr, plain := httpDo(t, "GET", p.base+path, nil)
		st, hdr, zipped := httpDo(t, "GET", p.base+path, nil, "Accept-Encoding", "gzip")
		if st != 200 || hdr.Get("Content-Encoding") != "gzip" || plainHdr.Get("Content-Encoding") != "" {
			t.Fatalf("GET %s with gzip: %d %q", path, st, hdr.Get("Content-Encoding"))
		}
		zr, err := gzip.NewReader(bytes.NewReader(zipped))
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(zr)
		if err != nil || !bytes.Equal(got, plain) || len(zipped) >= len(plain) {
			t.Fatalf("GET %s: gzip body differs or is not smaller (%d vs %d): %v", path, len(zipped), len(plain), err)
		}
	}
	// The stream flushes through the compressor: a live event arrives.
	req, _ := http.NewRequest("GET", p.base+"/stream?t=live", nil)
	req.Header.Set("Accept-Encoding", "gzip")
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.Header.Get("Content-Encoding") != "gzip" {
		t.Fatalf("stream: Content-Encoding %q", resp.Header.Get("Content-Encoding"))
	}
	live := signed(seededKey(499), protocol.KindPost, "live", []string{"t", "live"})
	go func() {
		time.Sleep(300 * time.Millisecond)
		cl.Publish(context.Background(), live, false)
	}()
	got := make(chan bool, 1)
	go func() {
		zr, err := gzip.NewReader(resp.Body)
		if err != nil {
			got <- false
			return
		}
		sc := bufio.NewScanner(zr)
		for sc.Scan() {
			if strings.Contains(sc.Text(), live.ID) {
				got <- true
				return
			}
		}
		got <- false
	}()
	select {
	case ok := <-got:
		if !ok {
			t.Fatal("gzipped stream ended without the live event")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("gzipped stream never delivered the live event")
	}
}
