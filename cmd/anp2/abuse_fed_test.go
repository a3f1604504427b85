package main

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/tasks/taskstest"
)

// The federation attacks of SPEC §20.1, each against a real `anp2 serve`
// process mirroring a hostile peer server on loopback.

// fedPeerServer is a hostile peer: routes answers the paths it overrides;
// anything else goes to upstream (a real relay) when set, or is 404.
type fedPeerServer struct {
	*httptest.Server
	routes   map[string]http.HandlerFunc
	upstream *httputil.ReverseProxy
}

func fedStartPeer(t *testing.T, upstream string, routes map[string]http.HandlerFunc) *fedPeerServer {
	t.Helper()
	p := &fedPeerServer{routes: routes}
	if upstream != "" {
		u, err := url.Parse(upstream)
		if err != nil {
			t.Fatal(err)
		}
		p.upstream = httputil.NewSingleHostReverseProxy(u)
	}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h := p.routes[r.Method+" "+r.URL.Path]; h != nil {
			h(w, r)
			return
		}
		if p.upstream != nil {
			p.upstream.ServeHTTP(w, r)
			return
		}
		http.Error(w, `{"detail":"Not Found","code":"not_found"}`, http.StatusNotFound)
	}))
	t.Cleanup(p.Close)
	return p
}

// fedEndless writes a 200 answer whose body is prefix and then one line
// of up to max bytes that never ends, and reports how many bytes the
// client took before it hung up (on done).
func fedEndless(prefix string, max int64, done chan<- int64) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		n, _ := w.Write([]byte(prefix))
		sent := int64(n)
		chunk := bytes.Repeat([]byte("x"), 64<<10)
		for sent < max {
			n, err := w.Write(chunk)
			sent += int64(n)
			if err != nil {
				break
			}
		}
		done <- sent
	}
}

// fedGossip pushes evs to base's POST /gossip, signed by key with a
// payload tag when key is set, and returns the answer.
func fedGossip(t *testing.T, base string, key ed25519.PrivateKey, evs ...*protocol.Event) (accepted int, codes []string) {
	t.Helper()
	body, _ := json.Marshal(evs)
	hdr := []string{"Content-Type", "application/json"}
	if key != nil {
		hdr = append(hdr, "Authorization", protocol.HTTPAuth(key, "POST", base+"/gossip", body, time.Now().Unix()))
	}
	st, _, ans := httpDo(t, "POST", base+"/gossip", body, hdr...)
	var g struct {
		Accepted int `json:"accepted"`
		Rejected []struct {
			Code string `json:"code"`
		} `json:"rejected"`
	}
	if st != 200 || json.Unmarshal(ans, &g) != nil {
		t.Fatalf("gossip: %d %s", st, ans)
	}
	for _, r := range g.Rejected {
		codes = append(codes, r.Code)
	}
	return g.Accepted, codes
}

// fedOutbound returns the relay's outbound state for peer from GET /relays.
func fedOutbound(t *testing.T, base, peer string) (state, lastError string) {
	t.Helper()
	_, _, b := httpDo(t, "GET", base+"/relays", nil)
	var r struct {
		Peers []struct {
			Peer      string `json:"peer"`
			Direction string `json:"direction"`
			State     string `json:"state"`
			LastError string `json:"last_error"`
		} `json:"peers"`
	}
	json.Unmarshal(b, &r)
	for _, p := range r.Peers {
		if p.Direction == "outbound" && p.Peer == peer {
			return p.State, p.LastError
		}
	}
	return "", ""
}

// TestAbuseFedStrangerCannotBecomePeer: a stranger who announces a
// configured peer's URL in a kind 10 of its own (GET /relays shows that
// URL to anyone) is not a peer: its signed gossip gets a publisher's rules
// (no backdating, the agent allowance, the freeze). The key the peer's
// own GET /relays names is a peer's.
func TestAbuseFedStrangerCannotBecomePeer(t *testing.T) {
	peerKey := seededKey(900)
	var learned atomic.Int32
	peer := fedStartPeer(t, "", map[string]http.HandlerFunc{
		"GET /relays": func(w http.ResponseWriter, r *http.Request) {
			learned.Add(1)
			fmt.Fprintf(w, `{"self":{"agent_id":%q},"relays":[],"peers":[]}`, protocol.AgentIDOf(peerKey))
		},
		"GET /health": func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, `{"status":"ok","events":0,"max_seq":0}`) },
		"GET /events": func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, `[]`) },
	})
	var seeds []taskstest.Agent
	var ids []string
	for _, n := range []string{"fed-seed-a", "fed-seed-b"} {
		a := taskstest.NewAgent(n)
		seeds, ids = append(seeds, a), append(ids, a.ID)
	}
	p := startProc(t, filepath.Join(t.TempDir(), "fed.db"), "--peer", peer.URL, "--mirror-interval", "200ms",
		"--seed-keys", strings.Join(ids, ","), "--seed-threshold", "2")

	stranger := seededKey(901)
	now := time.Now().Unix()
	ann := signed(stranger, protocol.KindRelayAnnounce, fmt.Sprintf(`{"url":%q,"preferred_branch":"main","served_branches":["main"]}`, peer.URL), []string{"branch", "main"})
	if st, _, b := httpDo(t, "POST", p.base+"/events", protocol.AppendJSON(nil, ann), "Content-Type", "application/json"); st != 200 {
		t.Fatalf("stranger's kind 10: %d %s", st, b)
	}
	backdated := func(k ed25519.PrivateKey, days int64, text string) *protocol.Event {
		e := &protocol.Event{CreatedAt: now - days*86400, Kind: protocol.KindPost, Content: text, Tags: [][]string{}}
		e.Sign(k)
		return e
	}
	acc, codes := fedGossip(t, p.base, stranger, backdated(stranger, 30, "thirty days ago"), backdated(stranger, 400, "a year ago"))
	if acc != 0 || len(codes) != 2 || codes[0] != protocol.CodeTooFarPast || codes[1] != protocol.CodeTooFarPast {
		t.Fatalf("stranger's backdated gossip: accepted %d, rejected %v", acc, codes)
	}
	// The agent allowance (60 a minute) holds for the stranger's gossip.
	var flood []*protocol.Event
	for i := range 70 {
		flood = append(flood, signed(stranger, protocol.KindPost, fmt.Sprintf("flood %d", i)))
	}
	if acc, codes = fedGossip(t, p.base, stranger, flood...); acc > 60 || !slices.Contains(codes, "rate_limited") {
		t.Fatalf("stranger's gossip flood: accepted %d of 70, rejected %v", acc, codes)
	}

	// The peer's own key, once the relay read it from the peer's
	// GET /relays, may push history.
	waitFor(t, "the relay reads the peer's GET /relays", func() bool { return learned.Load() > 0 })
	if acc, codes := fedGossip(t, p.base, peerKey, backdated(peerKey, 30, "peer history")); acc != 1 {
		t.Fatalf("the peer's own gossip of history: accepted %d, rejected %v", acc, codes)
	}

	// During a freeze the stranger's gossip is refused like a publish.
	content := `{"act":"freeze_network","reason":"fed abuse"}`
	tag, err := protocol.Cosign(seeds[1].Key, 30, content)
	if err != nil {
		t.Fatal(err)
	}
	freeze := seeds[0].Sign(30, time.Now().Unix(), content, tag)
	if st, _, b := httpDo(t, "POST", p.base+"/events", protocol.AppendJSON(nil, freeze), "Content-Type", "application/json"); st != 200 {
		t.Fatalf("freeze: %d %s", st, b)
	}
	fresh := seededKey(902)
	if acc, codes := fedGossip(t, p.base, fresh, signed(fresh, protocol.KindPost, "during the freeze")); acc != 0 || len(codes) != 1 || codes[0] != "network_frozen" {
		t.Fatalf("stranger's gossip during a freeze: accepted %d, rejected %v", acc, codes)
	}
}

// TestAbuseFedEndlessExportLine: a peer whose /health claims a huge log
// and whose GET /export is one line that never ends cannot make the
// mirror buffer it: the line is cut at the cap, the peer is marked
// `error` and the connection closed after a few MiB.
func TestAbuseFedEndlessExportLine(t *testing.T) {
	done := make(chan int64, 4)
	peer := fedStartPeer(t, "", map[string]http.HandlerFunc{
		"GET /health": func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprint(w, `{"status":"ok","events":1000000000,"max_seq":1000000000}`)
		},
		"GET /relays": func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, `{"self":{},"relays":[],"peers":[]}`) },
		"GET /export": fedEndless("", 128<<20, done),
	})
	p := startProc(t, filepath.Join(t.TempDir(), "fed.db"), "--peer", peer.URL)
	var sent int64
	select {
	case sent = <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("the mirror never let go of the endless export")
	}
	t.Logf("the peer sent %.1f MiB of its endless export line", float64(sent)/(1<<20))
	if sent >= 64<<20 {
		t.Fatalf("the mirror read %d MiB of one export line", sent>>20)
	}
	waitFor(t, "the peer marked error", func() bool {
		st, le := fedOutbound(t, p.base, peer.URL)
		return st == "error" && strings.Contains(le, "line")
	})
}

// TestAbuseFedEndlessStreamLine: a peer that passes reconciliation (it
// fronts a real relay) and then sends one endless line on GET /stream is
// cut at the cap and marked `error`.
func TestAbuseFedEndlessStreamLine(t *testing.T) {
	done := make(chan int64, 4)
	peer := fedStartPeer(t, "", map[string]http.HandlerFunc{
		"GET /stream": fedEndless("data: ", 128<<20, done),
	})
	// The relay behind the peer is reached at the peer's URL, so that is
	// its public base URL: the mirror's signed /sync headers name it.
	up := startProc(t, filepath.Join(t.TempDir(), "up.db"), "--public-base-url", peer.URL)
	u, err := url.Parse(up.base)
	if err != nil {
		t.Fatal(err)
	}
	peer.upstream = httputil.NewSingleHostReverseProxy(u)
	p := startProc(t, filepath.Join(t.TempDir(), "fed.db"), "--peer", peer.URL)
	var sent int64
	select {
	case sent = <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("the mirror never let go of the endless stream line")
	}
	t.Logf("the peer sent %.1f MiB of its endless stream line", float64(sent)/(1<<20))
	if sent >= 64<<20 {
		t.Fatalf("the mirror read %d MiB of one stream line", sent>>20)
	}
	waitFor(t, "the peer marked error", func() bool {
		st, le := fedOutbound(t, p.base, peer.URL)
		return st == "error" && strings.Contains(le, "line")
	})
}
