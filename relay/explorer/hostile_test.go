package explorer_test

import (
	"strings"
	"testing"
	"time"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/tasks/taskstest"
	"github.com/chromedp/chromedp"
)

// TestHostileText: text from the network cannot deface the pages. A post
// with an unclosed U+202E (RIGHT-TO-LEFT OVERRIDE) does not reverse the
// author and the time shown after it: they stay to its right, and the
// element holding the text is bidi-isolated. A post of one 60,000-letter
// word makes no page scroll sideways at a phone's width (390 CSS pixels).
func TestHostileText(t *testing.T) {
	needBrowser(t)
	mallory := taskstest.NewAgent("mallory")
	now := time.Now().Unix()
	rlo := mallory.Sign(protocol.KindPost, now-2, "\u202Ereversed tail", []string{"t", "hostile-text"})
	long := mallory.Sign(protocol.KindPost, now-1, strings.Repeat("W", 60000), []string{"t", "hostile-text"})
	post(t, bt.base, rlo)
	post(t, bt.base, long)

	// Bidi: at desktop width the search row is one line, link first.
	ctx := tab(t)
	if err := chromedp.Run(ctx, chromedp.EmulateViewport(1280, 800)); err != nil {
		t.Fatal(err)
	}
	open(t, ctx, "search?q=%23hostile-text", "search")
	var row struct {
		Link, Agent, Time float64
		Isolated          bool
	}
	err := chromedp.Run(ctx, chromedp.Evaluate(`(() => {
		const link = document.querySelector('#search-events a[href="#/event/`+rlo.ID+`"]');
		const li = link.closest('li');
		const walk = document.createTreeWalker(link, NodeFilter.SHOW_TEXT);
		let text = null;
		while (walk.nextNode()) if (walk.currentNode.data.includes('\u202E')) text = walk.currentNode;
		let isolated = false;
		for (let el = text && text.parentElement; el && el !== li; el = el.parentElement)
			if (getComputedStyle(el).unicodeBidi.startsWith('isolate')) isolated = true;
		const x = (el) => el.getBoundingClientRect().left;
		return {Link: x(link), Agent: x(li.querySelector('a.agent')), Time: x(li.querySelector('span.muted')), Isolated: isolated};
	})()`, &row))
	if err != nil {
		t.Fatal(err)
	}
	if !(row.Link < row.Agent && row.Agent < row.Time) {
		t.Errorf("U+202E in a post moved its neighbours: post link at x=%v, author at x=%v, time at x=%v (want left to right)", row.Link, row.Agent, row.Time)
	}
	if !row.Isolated {
		t.Error("the post's text is not in a bidi-isolated element (unicode-bidi: isolate)")
	}

	// Overflow: every page that shows the long word, at phone width.
	for _, p := range []struct{ hash, page string }{
		{"search?q=%23hostile-text", "search"},
		{"event/" + long.ID, "event"},
		{"agent/" + mallory.ID, "agent"},
	} {
		ctx := tab(t)
		if err := chromedp.Run(ctx, chromedp.EmulateViewport(390, 844)); err != nil {
			t.Fatal(err)
		}
		open(t, ctx, p.hash, p.page)
		var over int
		chromedp.Run(ctx, chromedp.Evaluate(`document.documentElement.scrollWidth - window.innerWidth`, &over))
		if over > 0 {
			t.Errorf("#/%s at phone width scrolls sideways by %d px", p.hash, over)
		}
	}
}
