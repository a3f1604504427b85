package explorer_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay"
	"github.com/anp2net/relay/relay/directory"
	"github.com/anp2net/relay/relay/explorer"
	"github.com/anp2net/relay/relay/relaytest"
	"github.com/anp2net/relay/tasks/taskstest"
	"github.com/chromedp/chromedp"
)

// anchorSite is a real HTTPS server standing in for x.com and
// twitter.com (a certificate for those names only its client trusts,
// every connection of that client dialled to it), serving pages by path.
type anchorSite struct {
	client *http.Client
	hits   atomic.Int64
}

func newAnchorSite(t *testing.T, pages map[string]string) *anchorSite {
	t.Helper()
	s := &anchorSite{}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		if p, ok := pages[r.URL.Path]; ok {
			fmt.Fprint(w, p)
			return
		}
		http.NotFound(w, r)
	}))
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "anchor test"}, DNSNames: []string{"x.com", "twitter.com"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	roots := x509.NewCertPool()
	roots.AddCert(cert)
	addr := srv.Listener.Addr().String()
	s.client = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots},
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		}}}
	return s
}

// anchorWorld is agents whose profiles declare various anchors, and the
// site alice's anchor points at.
type anchorWorld struct {
	alice, mallory, nobody, stray taskstest.Agent
	site                          *anchorSite
}

// anchorHostile is a handle that would be markup if parsed as HTML.
const anchorHostile = `<img src=x onerror="window.pwned=1">@owner`

// newAnchorWorld returns the agents and the site: alice anchored at a
// page showing her id; mallory claiming alice's page (the seed's
// impersonation); nobody without an anchor; stray with an anchor on a
// host not its platform's.
func newAnchorWorld(t *testing.T) *anchorWorld {
	w := &anchorWorld{alice: taskstest.NewAgent("anchor-alice"), mallory: taskstest.NewAgent("anchor-mallory"),
		nobody: taskstest.NewAgent("anchor-nobody"), stray: taskstest.NewAgent("anchor-stray")}
	w.site = newAnchorSite(t, map[string]string{"/alice/status/1": "<html><p>My agent on ANP2: " + w.alice.ID + "</p></html>"})
	return w
}

// publish stores the world's profiles in r.
func (w *anchorWorld) publish(t *testing.T, r *relaytest.Relay) {
	now := r.Clock.Now().Unix()
	anchor := func(platform, url string) map[string]any {
		return map[string]any{"platform": platform, "handle": anchorHostile, "verification_url": url, "verified_at": now - 3600}
	}
	r.PostAll(t, []*protocol.Event{
		w.alice.Sign(protocol.KindProfile, now-10, map[string]any{"name": "Anchored Alice", "human_anchor": anchor("x.com", "https://twitter.com/alice/status/1")}),
		w.mallory.Sign(protocol.KindProfile, now-10, map[string]any{"name": "Mallory", "human_anchor": anchor("x.com", "https://x.com/alice/status/1")}),
		w.nobody.Sign(protocol.KindProfile, now-10, map[string]any{"name": "Nobody"}),
		w.stray.Sign(protocol.KindProfile, now-10, map[string]any{"name": "Stray", "human_anchor": anchor("x.com", "https://evil.example/x")}),
	}, 1)
}

func getAnchor(t *testing.T, r *relaytest.Relay, id string) (int, map[string]any) {
	t.Helper()
	a := r.Do(t, http.MethodGet, "/explorer/api/human_anchor/"+id, "", nil)
	if a.Status != http.StatusOK {
		return a.Status, nil
	}
	return a.Status, a.JSON(t)
}

// TestHumanAnchorRoute: GET /explorer/api/human_anchor/{id}. By default
// the relay fetches nothing: an anchor that passes the offline checks is
// anchor_not_checked, one whose URL is not on its platform's hosts is
// anchor_host_mismatch, a profile without one is absent. With
// VerifyAnchors the page is fetched: alice's verifies (once: a second
// read is answered from the cache), mallory's claim on alice's page
// does not. Bad ids and unknown parameters are 400.
func TestHumanAnchorRoute(t *testing.T) {
	check := func(t *testing.T, r *relaytest.Relay, id, status, code string, fetched bool) {
		t.Helper()
		s, ans := getAnchor(t, r, id)
		if s != http.StatusOK || ans["status"] != status || (ans["code"] != nil && ans["code"] != code) || (ans["code"] == nil && code != "") || ans["fetched"] != fetched {
			t.Errorf("%s: %d %v, want %s %q fetched %v", id[:8], s, ans, status, code, fetched)
		}
	}
	t.Run("not fetching", func(t *testing.T) {
		w := newAnchorWorld(t)
		r := relaytest.Start(t, []relay.Module{explorer.NewModule(), directory.NewModule()})
		w.publish(t, r)
		check(t, r, w.alice.ID, "not_verified", "anchor_not_checked", false)
		check(t, r, w.stray.ID, "not_verified", "anchor_host_mismatch", false)
		check(t, r, w.nobody.ID, "absent", "", false)
		check(t, r, strings.Repeat("ab", 32), "absent", "", false)
		if n := w.site.hits.Load(); n != 0 {
			t.Errorf("the relay fetched %d pages", n)
		}
		for _, p := range []string{"/explorer/api/human_anchor/ABC", "/explorer/api/human_anchor/" + w.alice.ID + "?x=1"} {
			if a := r.Do(t, http.MethodGet, p, "", nil); a.Status != http.StatusBadRequest {
				t.Errorf("%s: %d %s", p, a.Status, a.Body)
			}
		}
	})
	t.Run("fetching", func(t *testing.T) {
		w := newAnchorWorld(t)
		r := relaytest.Start(t, []relay.Module{explorer.NewModule().VerifyAnchors(w.site.client), directory.NewModule()})
		w.publish(t, r)
		check(t, r, w.alice.ID, "verified", "", true)
		check(t, r, w.alice.ID, "verified", "", true)
		if n := w.site.hits.Load(); n != 1 {
			t.Errorf("%d fetches for two reads of one profile, want 1", n)
		}
		check(t, r, w.mallory.ID, "not_verified", "anchor_id_not_found", true)
		check(t, r, w.stray.ID, "not_verified", "anchor_host_mismatch", false)
		check(t, r, w.nobody.ID, "absent", "", false)
	})
}

// TestAgentPageShowsAnchor: the agent page says verified, not verified
// (with the reason) or absent, as the relay's explorer found, and shows
// a hostile handle as text.
func TestAgentPageShowsAnchor(t *testing.T) {
	needBrowser(t)
	w := newAnchorWorld(t)
	r := relaytest.Start(t, []relay.Module{explorer.NewModule().VerifyAnchors(w.site.client), directory.NewModule()})
	w.publish(t, r)
	for _, c := range []struct {
		agent  taskstest.Agent
		status string
		want   []string
	}{
		{w.alice, "verified", []string{"✓ verified", "contains this agent's id", "x.com", anchorHostile, "https://twitter.com/alice/status/1"}},
		{w.mallory, "not_verified", []string{"✗ not verified", "to be treated as absent", "does not contain the agent_id", anchorHostile}},
		{w.stray, "not_verified", []string{"✗ not verified", "is not one of platform"}},
		{w.nobody, "absent", []string{"none declared"}},
	} {
		ctx := tab(t)
		var text, status string
		var injected int
		var pwned bool
		err := chromedp.Run(ctx,
			chromedp.Navigate(r.URL+"/explorer/#/agent/"+c.agent.ID),
			chromedp.WaitVisible(`main[data-ready="agent"]`, chromedp.ByQuery),
			chromedp.Text("#human-anchor", &text, chromedp.ByQuery),
			chromedp.AttributeValue("#human-anchor", "data-anchor-status", &status, nil, chromedp.ByQuery),
			chromedp.Evaluate(`document.querySelectorAll('main img').length`, &injected),
			chromedp.Evaluate(`window.pwned !== undefined`, &pwned))
		if err != nil {
			t.Fatalf("%s: %v", c.agent.ID[:8], err)
		}
		if status != c.status {
			t.Errorf("%s: shown %q, want %q: %s", c.agent.ID[:8], status, c.status, text)
		}
		for _, s := range c.want {
			if !strings.Contains(text, s) {
				t.Errorf("%s: anchor section lacks %q: %s", c.agent.ID[:8], s, text)
			}
		}
		if injected != 0 || pwned {
			t.Errorf("%s: the handle became markup (%d img, script ran %v)", c.agent.ID[:8], injected, pwned)
		}
	}
}

// TestHumanAnchorChecksBounded: at most four checks run at once; a fifth
// agent's page is not fetched while they do (anchor_busy), and is once
// they finish. The site holds each request until released, so the test
// knows when four are in flight without timing anything.
func TestHumanAnchorChecksBounded(t *testing.T) {
	arrived, release := make(chan struct{}, 16), make(chan struct{})
	var agents []taskstest.Agent
	for i := range 5 {
		agents = append(agents, taskstest.NewAgent(fmt.Sprint("anchor-busy-", i)))
	}
	site := newAnchorSite(t, nil)
	inner := site.client.Transport
	site.client = &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		arrived <- struct{}{}
		<-release
		return inner.RoundTrip(r)
	})}
	r := relaytest.Start(t, []relay.Module{explorer.NewModule().VerifyAnchors(site.client)})
	now := r.Clock.Now().Unix()
	for i, a := range agents {
		r.Post(t, a.Sign(protocol.KindProfile, now-10, map[string]any{"name": "busy", "human_anchor": map[string]any{
			"platform": "x.com", "handle": "@b", "verification_url": fmt.Sprintf("https://x.com/%d", i)}}))
	}
	done := make(chan map[string]any, 4)
	for _, a := range agents[:4] {
		go func() { // no t.Fatal off the test's goroutine
			ans := map[string]any{}
			if resp, err := http.Get(r.URL + "/explorer/api/human_anchor/" + a.ID); err == nil {
				json.NewDecoder(resp.Body).Decode(&ans)
				resp.Body.Close()
			}
			done <- ans
		}()
	}
	for range 4 {
		<-arrived
	}
	if _, ans := getAnchor(t, r, agents[4].ID); ans["code"] != "anchor_busy" || ans["fetched"] != false {
		t.Errorf("fifth check while four run: %v", ans)
	}
	close(release)
	for range 4 {
		if ans := <-done; ans["code"] != "anchor_fetch_failed" || ans["fetched"] != true {
			t.Errorf("a held check: %v", ans) // the site has no such page: a 404
		}
	}
	if _, ans := getAnchor(t, r, agents[4].ID); ans["code"] != "anchor_fetch_failed" || ans["fetched"] != true {
		t.Errorf("fifth check once the others finished: %v", ans)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
