package explorer_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/anp2net/relay/protocol"
	"github.com/chromedp/chromedp"
)

// TestLiveKeepsUp publishes 1000 events at about 500 a second (batches of
// 50 every 100 ms) to a live page and requires that it shows every one
// exactly once. It measures, and logs, the longest gap between animation
// frames meanwhile (how long the page froze at worst) and how long the
// last event took to show; those are figures, not assertions.
func TestLiveKeepsUp(t *testing.T) {
	needBrowser(t)
	ctx := tab(t)
	open(t, ctx, "live?t=explorer-load", "live")
	status := ""
	if _, ok := waitFor(10*time.Second, func() bool {
		chromedp.Run(ctx, chromedp.Text("#live-status", &status, chromedp.ByQuery))
		return len(status) >= 4 && status[:4] == "live"
	}); !ok {
		t.Fatalf("not live: %q", status)
	}
	// Record the longest gap between frames from now on.
	if err := chromedp.Run(ctx, chromedp.Evaluate(`window.maxGap = 0; (function f(t0) { requestAnimationFrame((t) => { if (t0) window.maxGap = Math.max(window.maxGap, t - t0); f(t); }); })(0); true`, nil)); err != nil {
		t.Fatal(err)
	}
	const total, batch = 1000, 50
	now := time.Now().Unix()
	var evs []*protocol.Event
	for i := range total {
		evs = append(evs, bt.w.erin.Sign(protocol.KindPost, now, fmt.Sprintf("load %d", i), []string{"t", "explorer-load"}))
	}
	start := time.Now()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for i := 0; i < total; i += batch {
		<-tick.C
		body := []byte{'['}
		for j, e := range evs[i : i+batch] {
			if j > 0 {
				body = append(body, ',')
			}
			body = protocol.AppendJSON(body, e)
		}
		body = append(body, ']')
		resp, err := http.Post(bt.base+"/events/batch", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !bytes.Contains(b, []byte(fmt.Sprintf(`"accepted":%d`, batch))) {
			t.Fatalf("batch: %d %.300s", resp.StatusCode, b)
		}
	}
	sent := time.Since(start)
	count := func() int {
		var n int
		chromedp.Run(ctx, chromedp.Evaluate(`Number(document.getElementById('live-feed').dataset.count || 0)`, &n))
		return n
	}
	took, ok := waitFor(30*time.Second, func() bool { return count() >= total })
	if !ok || count() != total {
		t.Fatalf("the live page shows %d of %d events", count(), total)
	}
	var maxGap float64
	var rows int
	chromedp.Run(ctx, chromedp.Evaluate(`window.maxGap`, &maxGap), chromedp.Evaluate(`document.querySelectorAll('#live-feed li').length`, &rows))
	t.Logf("%d events in %v (%.0f/s): all shown %v after the last publish; longest frame gap %.0f ms; %d rows kept",
		total, sent.Round(time.Millisecond), float64(total)/sent.Seconds(), took.Round(time.Millisecond), maxGap, rows)
}
