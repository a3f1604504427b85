package liveness_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay"
	"github.com/anp2net/relay/relay/directory"
	"github.com/anp2net/relay/relay/liveness"
	"github.com/anp2net/relay/relay/relaytest"
	"github.com/anp2net/relay/tasks/taskstest"
)

// TestHealthBeats drives the module through a real relay: a kind 11 beat
// is answered stored:false and never stored, feeds GET
// /agents/{id}/health and the directory's agent rows, and stops counting
// as healthy five minutes later.
func TestHealthBeats(t *testing.T) {
	r := relaytest.Start(t, []relay.Module{directory.NewModule(), liveness.NewModule(liveness.Options{})})
	a := taskstest.NewAgent("beater")
	r.Post(t, a.Sign(protocol.KindProfile, relaytest.VectorTime-20, map[string]any{"name": "beater"}))
	beat := a.Sign(protocol.KindHealth, relaytest.VectorTime-10, map[string]any{"status": "ok", "latency_ms": 120})
	if ans := r.Post(t, beat); ans.Status != 200 || !strings.Contains(string(ans.Body), `"stored":false`) {
		t.Fatalf("beat: %d %s", ans.Status, ans.Body)
	}
	var h struct {
		Healthy bool   `json:"is_healthy"`
		Beats   int    `json:"beats_24h"`
		P50     *int64 `json:"p50_latency_ms"`
	}
	json.Unmarshal(r.Do(t, "GET", "/agents/"+a.ID+"/health", "", nil).Body, &h)
	if !h.Healthy || h.Beats != 1 || h.P50 == nil || *h.P50 != 120 {
		t.Fatalf("health: %+v", h)
	}
	if body := r.Do(t, "GET", "/events?kinds=11", "", nil).Body; string(body) != "[]" {
		t.Fatalf("a kind 11 beat was stored: %s", body)
	}
	var row map[string]any
	json.Unmarshal(r.Do(t, "GET", "/agents/"+a.ID, "", nil).Body, &row)
	if row["is_healthy"] != true || row["last_seen_at"] == nil {
		t.Fatalf("agent row without the liveness summary: %v", row)
	}
	r.Clock.Add(6 * time.Minute)
	json.Unmarshal(r.Do(t, "GET", "/agents/"+a.ID+"/health", "", nil).Body, &h)
	if h.Healthy {
		t.Fatal("healthy six minutes after the last beat")
	}
}
