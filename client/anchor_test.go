package client_test

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
	"sync"
	"testing"
	"time"

	"github.com/anp2net/relay/client"
	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay"
	"github.com/anp2net/relay/relay/directory"
	"github.com/anp2net/relay/relay/relaytest"
)

// anchorPlatform is a real HTTPS server standing in for the platforms
// (x.com, twitter.com, example.com, evil.example): a certificate for
// those names that only its client trusts, and a client whose every
// connection goes to it, so the whole path (TLS, host name, redirects,
// body) is the one a verifier takes on the internet.
type anchorPlatform struct {
	srv    *httptest.Server
	client *http.Client
	mu     sync.Mutex
	hits   map[string]int // requests by Host
	pages  map[string]string
}

func newAnchorPlatform(t *testing.T) *anchorPlatform {
	t.Helper()
	p := &anchorPlatform{hits: map[string]int{}, pages: map[string]string{}}
	p.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		p.hits[r.Host]++
		page, ok := p.pages[r.URL.Path]
		p.mu.Unlock()
		switch {
		case strings.HasPrefix(r.URL.Path, "/redirect/"):
			http.Redirect(w, r, "https://"+strings.TrimPrefix(r.URL.Path, "/redirect/"), http.StatusFound)
		case ok:
			fmt.Fprint(w, page)
		default:
			http.NotFound(w, r)
		}
	}))
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "anchor test"},
		DNSNames:  []string{"x.com", "twitter.com", "example.com", "evil.example"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	p.srv.TLS = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
	p.srv.StartTLS()
	t.Cleanup(p.srv.Close)
	roots := x509.NewCertPool()
	roots.AddCert(cert)
	addr := p.srv.Listener.Addr().String()
	p.client = &http.Client{Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: roots},
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		},
	}}
	return p
}

func (p *anchorPlatform) page(path, body string) { p.mu.Lock(); p.pages[path] = body; p.mu.Unlock() }

func (p *anchorPlatform) requests() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, v := range p.hits {
		n += v
	}
	return n
}

// anchorProfile is a kind 0 by id with anchor as its human_anchor (none
// when nil), mined and signed.
func anchorProfile(t *testing.T, id *client.Identity, anchor any) *protocol.Event {
	t.Helper()
	return anchorProfileAt(t, id, anchor, time.Now().Unix())
}

func anchorProfileAt(t *testing.T, id *client.Identity, anchor any, at int64) *protocol.Event {
	t.Helper()
	extra := map[string]any{}
	if anchor != nil {
		extra["human_anchor"] = anchor
	}
	e := client.ProfileEvent(client.Profile{Name: "anchored", Extra: extra})
	e.CreatedAt = at
	if err := client.Sign(context.Background(), id, e, time.Unix(at, 0)); err != nil {
		t.Fatal(err)
	}
	return e
}

func anchor(platform, url string) map[string]any {
	return map[string]any{"platform": platform, "handle": "@owner", "verification_url": url, "verified_at": 1779758800}
}

// TestVerifyHumanAnchor runs the seed §4.1.1 checks against real HTTPS:
// a page that shows the agent's id verifies it (x.com's anchor may live
// on twitter.com, the id may be in upper case); a host that is not the
// platform's, plain HTTP or a malformed block fail without a request; a
// page without the id, a 404, and a redirect off the platform fail; an
// agent pointing at another agent's page (the impersonation the seed
// warns of) fails; so does a profile altered after signing.
func TestVerifyHumanAnchor(t *testing.T) {
	p := newAnchorPlatform(t)
	alice, _ := client.GenerateIdentity()
	mallory, _ := client.GenerateIdentity()
	p.page("/alice", "<html><p>I run agent "+alice.AgentID()+" on ANP2</p></html>")
	p.page("/alice-upper", "agent "+strings.ToUpper(alice.AgentID()))
	p.page("/nothing", "<html>a page about something else</html>")
	tampered := anchorProfile(t, alice, anchor("x.com", "https://x.com/alice"))
	tampered.Content = strings.Replace(tampered.Content, "anchored", "Anchored", 1)
	for _, c := range []struct {
		name     string
		e        *protocol.Event
		status   client.AnchorStatus
		code     string
		requests int
	}{
		{"absent", anchorProfile(t, alice, nil), client.AnchorAbsent, "", 0},
		{"null", anchorProfile(t, alice, json.RawMessage("null")), client.AnchorAbsent, "", 0},
		{"x.com on x.com", anchorProfile(t, alice, anchor("x.com", "https://x.com/alice")), client.AnchorVerified, "", 1},
		{"x.com on twitter.com", anchorProfile(t, alice, anchor("X.com", "https://twitter.com/alice")), client.AnchorVerified, "", 1},
		{"id in upper case", anchorProfile(t, alice, anchor("example.com", "https://example.com/alice-upper")), client.AnchorVerified, "", 1},
		{"redirect within the platform", anchorProfile(t, alice, anchor("x.com", "https://twitter.com/redirect/x.com/alice")), client.AnchorVerified, "", 2},
		{"host not the platform's", anchorProfile(t, alice, anchor("x.com", "https://evil.example/alice")), client.AnchorNotVerified, client.AnchorHostMismatch, 0},
		{"example.com is not x.com", anchorProfile(t, alice, anchor("example.com", "https://x.com/alice")), client.AnchorNotVerified, client.AnchorHostMismatch, 0},
		{"plain http", anchorProfile(t, alice, anchor("x.com", "http://x.com/alice")), client.AnchorNotVerified, client.AnchorNotHTTPS, 0},
		{"credentials in the URL", anchorProfile(t, alice, anchor("x.com", "https://evil.example@x.com/alice")), client.AnchorNotVerified, client.AnchorNotHTTPS, 0},
		{"not an object", anchorProfile(t, alice, "@owner on x.com"), client.AnchorNotVerified, client.AnchorMalformed, 0},
		{"no url", anchorProfile(t, alice, map[string]any{"platform": "x.com", "handle": "@owner"}), client.AnchorNotVerified, client.AnchorMalformed, 0},
		{"page without the id", anchorProfile(t, alice, anchor("x.com", "https://x.com/nothing")), client.AnchorNotVerified, client.AnchorIDNotFound, 1},
		{"no page", anchorProfile(t, alice, anchor("x.com", "https://x.com/gone")), client.AnchorNotVerified, client.AnchorFetchFailed, 1},
		{"redirect off the platform", anchorProfile(t, alice, anchor("x.com", "https://x.com/redirect/evil.example/alice")), client.AnchorNotVerified, client.AnchorFetchFailed, 1},
		{"impersonation", anchorProfile(t, mallory, anchor("x.com", "https://x.com/alice")), client.AnchorNotVerified, client.AnchorIDNotFound, 1},
		{"altered after signing", tampered, client.AnchorNotVerified, client.AnchorBadProfile, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := p.requests()
			res := client.VerifyHumanAnchor(context.Background(), p.client, c.e)
			if res.Status != c.status || res.Code != c.code {
				t.Errorf("got %s %s (%s), want %s %s", res.Status, res.Code, res.Reason, c.status, c.code)
			}
			if n := p.requests() - before; n != c.requests {
				t.Errorf("%d requests to the platform, want %d", n, c.requests)
			}
			if res.AgentID != c.e.AgentID || (c.status != client.AnchorAbsent && c.code != client.AnchorBadProfile && c.name != "not an object" && res.Anchor == nil) {
				t.Errorf("result %+v does not name the agent and its anchor", res)
			}
		})
	}
}

// TestAnchorClientRefusesPrivateAddresses: the default client never
// connects to a loopback address, even when the profile's platform is
// that address (a verifier running on a server cannot be aimed at it).
func TestAnchorClientRefusesPrivateAddresses(t *testing.T) {
	p := newAnchorPlatform(t)
	alice, _ := client.GenerateIdentity()
	host, _, _ := net.SplitHostPort(p.srv.Listener.Addr().String())
	e := anchorProfile(t, alice, anchor(host, "https://"+p.srv.Listener.Addr().String()+"/alice"))
	res := client.VerifyHumanAnchor(context.Background(), nil, e)
	if res.Status != client.AnchorNotVerified || res.Code != client.AnchorFetchFailed || !strings.Contains(res.Reason, "non-public address") {
		t.Fatalf("got %+v", res)
	}
	if n := p.requests(); n != 0 {
		t.Fatalf("%d requests reached the loopback server", n)
	}
}

// TestRelayStoresHumanAnchorUnverified: the relay stores a profile's
// human_anchor verbatim and serves it in GET /agents/{id}, without
// fetching its verification_url or judging it (seed §4.1.1: the relay
// does not verify; consumers must). The consumer's check of the same
// event, read back from the relay, is what fetches and verifies.
func TestRelayStoresHumanAnchorUnverified(t *testing.T) {
	p := newAnchorPlatform(t)
	r := relaytest.Start(t, []relay.Module{directory.NewModule()}, func(cfg *relay.Config) {
		cfg.Checker.PoW = protocol.DefaultPoWPolicy()
		cfg.Checker.PoW.ActiveFrom = 0
	})
	alice, _ := client.GenerateIdentity()
	p.page("/alice", "agent "+alice.AgentID())
	// An anchor that would not verify (no page) is stored all the same.
	for i, path := range []string{"/missing", "/alice"} {
		e := anchorProfileAt(t, alice, anchor("x.com", "https://x.com"+path), r.Clock.Now().Unix()+int64(i))
		if a := r.Post(t, e); a.Status != http.StatusOK {
			t.Fatalf("publish: %d %s", a.Status, a.Body)
		}
		stored, err := client.New(r.URL).Event(context.Background(), e.ID)
		if err != nil {
			t.Fatal(err)
		}
		if stored.Content != e.Content {
			t.Fatalf("stored content %q, published %q", stored.Content, e.Content)
		}
	}
	var agent struct {
		Profile struct {
			HumanAnchor client.HumanAnchor `json:"human_anchor"`
		}
	}
	if err := json.Unmarshal(r.Do(t, http.MethodGet, "/agents/"+alice.AgentID(), "", nil).Body, &agent); err != nil {
		t.Fatal(err)
	}
	if want := (client.HumanAnchor{Platform: "x.com", Handle: "@owner", VerificationURL: "https://x.com/alice", VerifiedAt: 1779758800}); agent.Profile.HumanAnchor != want {
		t.Fatalf("/agents profile.human_anchor %+v, want %+v", agent.Profile.HumanAnchor, want)
	}
	if n := p.requests(); n != 0 {
		t.Fatalf("the relay fetched the verification_url %d times", n)
	}
	evs, err := client.New(r.URL).Query(context.Background(), client.Filter{Authors: []string{alice.AgentID()}, Kinds: []int64{protocol.KindProfile}, Limit: 1})
	if err != nil || len(evs) != 1 {
		t.Fatalf("%d profiles, %v", len(evs), err)
	}
	if res := client.VerifyHumanAnchor(context.Background(), p.client, evs[0]); res.Status != client.AnchorVerified || p.requests() != 1 {
		t.Fatalf("consumer's check: %+v, %d requests", res, p.requests())
	}
}

// FuzzParseHumanAnchor: any content parses or fails without panicking; an
// anchor without error has a platform and a URL, and CheckAnchorURL
// accepts only https URLs whose host is the platform's.
func FuzzParseHumanAnchor(f *testing.F) {
	f.Add(`{"name":"a","human_anchor":{"platform":"x.com","handle":"@a","verification_url":"https://twitter.com/a/status/1","verified_at":1779758800}}`)
	f.Add(`{"human_anchor":{"platform":"x.com","verification_url":"https://evil.example@x.com/"}}`)
	f.Add(`{"human_anchor":"x.com"}`)
	f.Add(`{"human_anchor":{"platform":1}}`)
	f.Add(`{"human_anchor":null}`)
	f.Add(`[]`)
	f.Fuzz(func(t *testing.T, content string) {
		a, err := client.ParseHumanAnchor(content)
		if err != nil || a == nil {
			return
		}
		if a.Platform == "" || a.VerificationURL == "" {
			t.Fatalf("accepted %+v", a)
		}
		if u, _, err := client.CheckAnchorURL(a); err == nil {
			hosts := client.PlatformHosts(a.Platform)
			ok := false
			for _, h := range hosts {
				ok = ok || strings.EqualFold(strings.TrimSuffix(u.Hostname(), "."), h)
			}
			if u.Scheme != "https" || !ok || u.User != nil {
				t.Fatalf("CheckAnchorURL accepted %q for platform %q", a.VerificationURL, a.Platform)
			}
		}
	})
}
