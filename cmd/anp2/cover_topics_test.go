package main

import (
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// TestCoverTopicsAnnounced: anp2 serve --topics (or ANP2_TOPICS) puts the
// relay's topics in its kind 10, and GET /relays lists them on its own
// entry (seed §12.9.2 topic relay).
func TestCoverTopicsAnnounced(t *testing.T) {
	db := filepath.Join(t.TempDir(), "relay.db")
	r := startProcEnv(t, []string{"ANP2_TOPICS=translate.fr-en, ocr"}, db)
	var got []string
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get(r.base + "/relays")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var out struct {
			Relays []struct {
				Standing string   `json:"standing"`
				Topics   []string `json:"topics"`
			} `json:"relays"`
		}
		if json.Unmarshal(b, &out) != nil {
			t.Fatalf("GET /relays: %s", b)
		}
		for _, rl := range out.Relays {
			if rl.Standing == "self" {
				got = rl.Topics
			}
		}
		if got != nil {
			break
		}
		time.Sleep(100 * time.Millisecond) // the announcement is published just after start
	}
	if !slices.Equal(got, []string{"ocr", "translate.fr-en"}) {
		t.Fatalf("self topics %v", got)
	}
}
