package a2a_test

import (
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/anp2net/relay/a2a"
	"github.com/anp2net/relay/relay"
)

func getCard(t *testing.T, url string) a2a.AgentCard {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d", url, resp.StatusCode)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("content type %q", ct)
	}
	var c a2a.AgentCard
	if err := json.NewDecoder(resp.Body).Decode(&c); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestCard checks the card at all four paths, its url derived from the
// request (with the /api prefix kept) and its flags.
func TestCard(t *testing.T) {
	r := startRelay(t)
	for _, tc := range []struct{ path, wantURL string }{
		{"/.well-known/agent-card.json", r.base + "/a2a"},
		{"/.well-known/agent.json", r.base + "/a2a"},
		{"/api/.well-known/agent-card.json", r.base + "/api/a2a"},
		{"/api/.well-known/agent.json", r.base + "/api/a2a"},
	} {
		c := getCard(t, r.base+tc.path)
		if c.URL != tc.wantURL {
			t.Errorf("%s: url %q, want %q", tc.path, c.URL, tc.wantURL)
		}
		if c.ProtocolVersion != "0.3.0" || c.PreferredTransport != "JSONRPC" {
			t.Errorf("%s: protocolVersion %q preferredTransport %q", tc.path, c.ProtocolVersion, c.PreferredTransport)
		}
		if len(c.Skills) == 0 || c.Skills[0].ID != "anp2.introduce" || len(c.Skills[0].Tags) == 0 {
			t.Errorf("%s: skills %+v", tc.path, c.Skills)
		}
		want := a2a.Capabilities{Streaming: true, PushNotifications: false, StateTransitionHistory: true}
		if c.Capabilities != want {
			t.Errorf("%s: capabilities %+v, want %+v", tc.path, c.Capabilities, want)
		}
		if c.SupportsAuthenticatedExtendedCard {
			t.Errorf("%s: claims an extended card", tc.path)
		}
		if len(c.AdditionalInterfaces) != 1 || c.AdditionalInterfaces[0].URL != c.URL {
			t.Errorf("%s: additionalInterfaces %+v", tc.path, c.AdditionalInterfaces)
		}
	}
	// agent/getCard returns the same card as the well-known path.
	var viaRPC a2a.AgentCard
	call(t, r.base, "agent/getCard", nil).result(t, &viaRPC)
	if got := getCard(t, r.base+"/.well-known/agent.json"); !reflect.DeepEqual(got, viaRPC) {
		t.Errorf("agent/getCard differs from the well-known card:\n%+v\n%+v", viaRPC, got)
	}
}

// TestCardPublicBaseURL: a configured public base URL wins over the Host.
func TestCardPublicBaseURL(t *testing.T) {
	r := startRelay(t, func(c *relay.Config) { c.PublicBaseURL = "https://relay.example/api/" })
	for _, p := range []string{"/.well-known/agent-card.json", "/api/.well-known/agent.json"} {
		if c := getCard(t, r.base+p); c.URL != "https://relay.example/api/a2a" || c.Provider.URL != "https://relay.example/api" {
			t.Errorf("%s: url %q provider %+v", p, c.URL, c.Provider)
		}
	}
}
