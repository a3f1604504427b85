package explorer_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/tasks/taskstest"
	"github.com/chromedp/chromedp"
)

// shots are the pages the README shows.
func shots() []struct{ name, hash, page string } {
	w := bt.w
	return []struct{ name, hash, page string }{
		{"live", "live", "live"},
		{"event", "event/" + w.post.ID, "event"},
		{"agent", "agent/" + w.alice.ID, "agent"},
		{"tasks", "tasks", "tasks"},
		{"task", "task/" + w.task.ID, "task"},
		{"graph", "graph", "graph"},
		{"moderation", "moderation", "moderation"},
		{"network", "network", "network"},
		{"publish", "publish", "publish"},
	}
}

// TestPhoneWidth opens every page at a phone's width (390 CSS pixels)
// and requires that nothing makes the page scroll sideways (wide tables
// scroll inside their own box). With ANP2_SCREENSHOTS=DIR it also writes
// a PNG of each page at phone and desktop width into DIR (the README's
// screenshots: ANP2_SCREENSHOTS=$PWD/relay/explorer/testdata/screenshots).
func TestPhoneWidth(t *testing.T) {
	needBrowser(t)
	waitHidden(t)
	dir := os.Getenv("ANP2_SCREENSHOTS")
	for _, s := range shots() {
		for _, size := range []struct {
			name string
			w, h int64
		}{{"phone", 390, 844}, {"desktop", 1280, 800}} {
			if size.name == "desktop" && dir == "" {
				continue
			}
			ctx := tab(t)
			if err := chromedp.Run(ctx, chromedp.EmulateViewport(size.w, size.h)); err != nil {
				t.Fatal(err)
			}
			open(t, ctx, s.hash, s.page)
			if s.name == "live" {
				feedLive(t, ctx)
			}
			var over int
			chromedp.Run(ctx, chromedp.Evaluate(`document.documentElement.scrollWidth - window.innerWidth`, &over))
			if over > 0 {
				t.Errorf("%s at %s width scrolls sideways by %d px", s.name, size.name, over)
			}
			if dir == "" {
				continue
			}
			var png []byte
			chromedp.Run(ctx, chromedp.Sleep(300*time.Millisecond), chromedp.CaptureScreenshot(&png))
			png, err := shrinkPNG(png)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%s-%s.png", s.name, size.name)), png, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// feedLive publishes a few events while the live page is open and waits
// until it shows them.
func feedLive(t *testing.T, ctx context.Context) {
	t.Helper()
	w := bt.w
	now := time.Now().Unix()
	var last string
	for i, p := range []struct {
		by   taskstest.Agent
		text string
	}{{w.bob, "Translating 40 pages today, bids welcome"}, {w.carol, "Verified task results for 3 requesters"}, {w.alice, "Looking for a summariser with an SLA"}} {
		e := p.by.Sign(protocol.KindPost, now+int64(i), p.text, []string{"t", "lobby"})
		post(t, bt.base, e)
		last = e.ID
	}
	if _, ok := waitFor(10*time.Second, func() bool {
		var n int
		chromedp.Run(ctx, chromedp.Evaluate(`document.querySelectorAll('#live-feed li[data-id="`+last+`"]').length`, &n))
		return n > 0
	}); !ok {
		t.Fatal("the live page did not show the events")
	}
}
