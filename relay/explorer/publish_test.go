package explorer_test

import (
	"strings"
	"testing"
	"time"

	"github.com/anp2net/relay/protocol"
	"github.com/chromedp/chromedp"
)

// TestPublishForm: the publish page generates a key in the browser, mines
// proof of work in its worker, shows the relay's dry-run violations for a
// bad event and publishes a good one; the relay stores it and it verifies
// with the relay's own checks.
func TestPublishForm(t *testing.T) {
	needBrowser(t)
	ctx := tab(t)
	open(t, ctx, "publish", "publish")
	text := func(sel string) string {
		var s string
		chromedp.Run(ctx, chromedp.Text(sel, &s, chromedp.ByQuery))
		return s
	}
	// A trust vote whose content is not JSON: the dry run lists why.
	err := chromedp.Run(ctx,
		chromedp.Click("#pub-generate", chromedp.ByQuery),
		chromedp.WaitVisible(`//code[@id="pub-agent" and string-length(text()) = 64]`),
		chromedp.SetValue("#pub-kind", "6", chromedp.ByQuery),
		chromedp.SetValue("#pub-content", "not json", chromedp.ByQuery),
		chromedp.SetValue("#pub-tags", `[["p","`+bt.w.alice.ID+`"]]`, chromedp.ByQuery),
		chromedp.Click("#pub-check", chromedp.ByQuery),
		chromedp.WaitVisible("#pub-violations", chromedp.ByQuery),
	)
	if err != nil {
		t.Fatal(err)
	}
	if v := text("#pub-violations"); !strings.Contains(v, "invalid_score") {
		t.Fatalf("violations: %q", v)
	}
	agent := text("#pub-agent")
	// A profile (kind 0): the relay requires 12 bits of PoW, mined in the
	// page's worker.
	err = chromedp.Run(ctx,
		chromedp.SetValue("#pub-kind", "0", chromedp.ByQuery),
		chromedp.SetValue("#pub-pow", "12", chromedp.ByQuery),
		chromedp.SetValue("#pub-content", `{"name":"Published from a browser","about":"é ✓ <&> \u2028"}`, chromedp.ByQuery),
		chromedp.SetValue("#pub-tags", `[["t","explorer-test"]]`, chromedp.ByQuery),
		chromedp.Click("#pub-check", chromedp.ByQuery),
		chromedp.WaitVisible("#pub-valid", chromedp.ByQuery),
		chromedp.Click("#pub-publish", chromedp.ByQuery),
		chromedp.WaitVisible("#pub-accepted", chromedp.ByQuery),
	)
	if err != nil {
		t.Fatalf("%v (result: %q)", err, text("#pub-result"))
	}
	res := text("#pub-accepted")
	id := res[strings.LastIndex(res, " ")+1:]
	if !protocol.IsHex64(id) {
		t.Fatalf("accepted: %q", res)
	}
	var e protocol.Event
	if st := getJSON(t, bt.base+"/events/"+id, &e); st != 200 {
		t.Fatalf("the relay does not hold %s: %d", id, st)
	}
	if e.AgentID != agent || e.Kind != 0 || e.CheckID() != nil || e.CheckSig() != nil || !strings.Contains(e.Content, "Published from a browser") {
		t.Fatalf("stored event: %+v", e)
	}
	if d, _, _ := protocol.DeclaredPoW(&e); d != 12 {
		t.Fatalf("declared PoW %d", d)
	}
	if id, _ := e.IDBytes(); protocol.LeadingZeroBits(id) < 12 {
		t.Fatalf("mined %d bits", protocol.LeadingZeroBits(id))
	}
	if d := time.Now().Unix() - e.CreatedAt; d < -5 || d > 60 {
		t.Fatalf("created_at %d is %d s from now", e.CreatedAt, d)
	}
	// The key never reached the relay: the form has no request carrying
	// it (the page sends only signed events), checked by the seed not
	// appearing in anything the relay stored.
	var seed string
	chromedp.Run(ctx, chromedp.Value("#pub-seed", &seed, chromedp.ByQuery))
	var all []protocol.Event
	getJSON(t, bt.base+"/events?authors="+agent, &all)
	for _, x := range all {
		if strings.Contains(x.Content, seed) || strings.Contains(x.Sig, seed) {
			t.Fatal("the seed reached the relay")
		}
	}
}
