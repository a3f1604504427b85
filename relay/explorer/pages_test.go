package explorer_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// waitHidden waits until the relay's moderation hides the world's
// flagged post (snapshots refresh about once a second).
func waitHidden(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var m struct{ Count int }
		if getJSON(t, bt.base+"/explorer/api/moderation", &m) == 200 && m.Count >= 1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the flagged post never became hidden")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestPagesRender opens every page on the loaded relay and checks that
// it shows the data the relay holds.
func TestPagesRender(t *testing.T) {
	needBrowser(t)
	waitHidden(t)
	w := bt.w
	var state struct{ Digest string }
	getJSON(t, bt.base+"/state", &state)
	for _, c := range []struct {
		hash, page string
		want       []string
	}{
		{"live", "live", []string{"Pause", "kinds"}},
		{"event/" + w.post.ID, "event", []string{"Hello ANP2", "✓ SHA-256 of the canonical bytes equals the id", "✓ Ed25519 signature", "A reply to Alice", "Not revoked", "Alice Explorer"}},
		{"event/" + w.revoked.ID, "event", []string{"revoked", "Revoked by its author"}},
		{"event/" + w.hidden.ID, "event", []string{"Hidden: moderation", "spam"}},
		{"agent/" + w.alice.ID, "agent", []string{"Alice Explorer", "transform.text.demo", "1 sent, 0 received", "paid as requester", "Bob Builder", "worked with them"}},
		{"agent/" + w.bob.ID, "agent", []string{"Bob Builder", "0 sent, 1 received", "earned (fee 1)", "Tasks as provider"}},
		{"tasks", "tasks", []string{"paid · 1", "pending · 1", "accepted · 1", "transform.text.demo"}},
		{"task/" + w.task.ID, "task", []string{"paid", "passed", "task request", "task accept", "task result", "task verify", "payment", "id and signature verified here"}},
		{"graph", "graph", []string{"5 agents, 15 votes", "Alice Explorer"}},
		{"moderation", "moderation", []string{"Dave Doubtful", "spam", "advertising", "the relay does not show this event to you"}},
		{"network", "network", []string{"State digest", "trust", "moderation", "Relays and peers", "Branches", "Governance"}},
		{"publish", "publish", []string{"Generate a key", "Sign and dry-run"}},
		{"api", "api", []string{"operations, OpenAPI 3.1.0", "/task/{task_id}", "A task's derived state and its events", "/subscribe"}},
		{"search?q=Alice", "search", []string{"Alice Explorer"}},
		{"search?q=%23explorer-test", "search", []string{"Hello ANP2", "A reply to Alice"}},
		{"search?q=" + w.task.ID, "task", []string{"paid"}},
		{"search?q=" + w.carol.ID, "agent", []string{"Carol Checker"}},
	} {
		t.Run(strings.ReplaceAll(c.hash, "/", "_"), func(t *testing.T) {
			ctx := tab(t)
			text := open(t, ctx, c.hash, c.page)
			for _, s := range c.want {
				if !strings.Contains(text, s) {
					t.Errorf("#/%s lacks %q:\n%s", c.hash, s, text)
				}
			}
		})
	}
	// The digest the network page shows is the relay's (same minute).
	ctx := tab(t)
	open(t, ctx, "network", "network")
	var shown string
	chromedp.Run(ctx, chromedp.Text("#state-digest", &shown, chromedp.ByQuery))
	var now struct{ Digest string }
	getJSON(t, bt.base+"/state", &now)
	if shown != state.Digest && shown != now.Digest {
		t.Errorf("network page digest %q, relay %q", shown, now.Digest)
	}
}

// TestCanonicalBytesOnEventPage: the canonical bytes the event page shows
// are the relay's (protocol.CanonicalPayload) byte for byte.
func TestCanonicalBytesOnEventPage(t *testing.T) {
	needBrowser(t)
	ctx := tab(t)
	open(t, ctx, "event/"+bt.w.post.ID, "event")
	var shown string
	if err := chromedp.Run(ctx, chromedp.Text("#canonical", &shown, chromedp.ByQuery)); err != nil {
		t.Fatal(err)
	}
	if want := string(bt.w.post.CanonicalPayload()); shown != want {
		t.Fatalf("canonical bytes:\n page  %s\n relay %s", shown, want)
	}
	_ = fmt.Sprint
}

// TestGraphSearch: typing in the trust graph's search box finds agents by
// name and by id prefix.
func TestGraphSearch(t *testing.T) {
	needBrowser(t)
	ctx := tab(t)
	open(t, ctx, "graph", "graph")
	for q, want := range map[string]string{"carol": "1", bt.w.bob.ID[:10]: "1", "e": "5", "nobody here": "0"} {
		var got string
		err := chromedp.Run(ctx,
			chromedp.SetValue("#graph-search", q, chromedp.ByQuery),
			chromedp.Evaluate(`document.getElementById('graph-search').dispatchEvent(new Event('input')); true`, nil),
			chromedp.AttributeValue("#graph-info", "data-matches", &got, nil, chromedp.ByQuery))
		if err != nil || got != want {
			t.Errorf("search %q: %q matches (%v), want %s", q, got, err, want)
		}
	}
}

// TestLiveRefusedFilter: a filter the relay refuses shows the relay's
// error code instead of an empty feed.
func TestLiveRefusedFilter(t *testing.T) {
	needBrowser(t)
	ctx := tab(t)
	open(t, ctx, "live?filter=colour:red", "live")
	var s string
	if _, ok := waitFor(10*time.Second, func() bool {
		chromedp.Run(ctx, chromedp.Text("#live-status", &s, chromedp.ByQuery))
		return strings.Contains(s, "filter-axis-unknown")
	}); !ok {
		t.Fatalf("live status %q", s)
	}
}
