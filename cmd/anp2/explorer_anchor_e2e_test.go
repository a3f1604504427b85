package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/anp2net/relay/client"
)

// TestExplorerVerifyAnchorsFlag: `serve --explorer-verify-anchors` lets
// the explorer fetch a profile's human_anchor page through the default
// anchor client, which refuses a loopback address even when the profile
// names it as its platform (no request reaches the local server); without
// the flag the relay fetches nothing and says the anchor was not checked.
func TestExplorerVerifyAnchorsFlag(t *testing.T) {
	var hits atomic.Int64
	local := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer local.Close()
	host := strings.TrimPrefix(local.URL, "https://")
	id, _ := client.GenerateIdentity()
	dir := t.TempDir()
	for i, c := range []struct {
		flags   []string
		code    string
		fetched bool
	}{
		{nil, "anchor_not_checked", false},
		{[]string{"--explorer-verify-anchors"}, client.AnchorFetchFailed, true},
	} {
		p := startProc(t, filepath.Join(dir, fmt.Sprint(i, ".db")), c.flags...)
		cl := client.NewAgent(p.base, id)
		prof := client.ProfileEvent(client.Profile{Name: "local", Extra: map[string]any{"human_anchor": map[string]any{
			"platform": strings.Split(host, ":")[0], "handle": "@me", "verification_url": local.URL + "/me"}}})
		if _, err := cl.Send(context.Background(), prof); err != nil {
			t.Fatal(err)
		}
		resp, err := http.Get(p.base + "/explorer/api/human_anchor/" + id.AgentID())
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var ans struct {
			Status, Code, Reason string
			Fetched              bool
		}
		if err := json.Unmarshal(b, &ans); err != nil || ans.Status != "not_verified" || ans.Code != c.code || ans.Fetched != c.fetched {
			t.Fatalf("flags %v: %s", c.flags, b)
		}
		if c.fetched && !strings.Contains(ans.Reason, "non-public address") {
			t.Fatalf("flags %v: %s", c.flags, b)
		}
		p.cmd.Process.Kill()
		p.cmd.Wait()
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("%d requests reached the loopback server", n)
	}
}
