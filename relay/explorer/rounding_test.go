package explorer_test

import (
	"regexp"
	"strings"
	"testing"
)

// longDecimal is a number shown with more than three decimals.
var longDecimal = regexp.MustCompile(`\d\.\d{4,}`)

// TestScoresRoundedTo3Digits (seed §4.7.3: dashboards SHOULD round
// scores to 3 digits): no page that shows a trust score, a weighted
// score or a weight derived from one (flag weights, verifier weights)
// shows a number with more than three decimals. The world's votes (0.9,
// 0.7, 0.5 around a ring of five) give weighted scores with many.
func TestScoresRoundedTo3Digits(t *testing.T) {
	needBrowser(t)
	waitHidden(t)
	w := bt.w
	for _, p := range []struct{ hash, page string }{
		{"agent/" + w.alice.ID, "agent"},
		{"agent/" + w.carol.ID, "agent"},
		{"graph", "graph"},
		{"moderation", "moderation"},
		{"event/" + w.hidden.ID, "event"},
		{"task/" + w.task.ID, "task"},
	} {
		ctx := tab(t)
		text := open(t, ctx, p.hash, p.page)
		if !strings.Contains(text, ".") {
			t.Errorf("#/%s shows no decimal number at all: the test would prove nothing", p.hash)
		}
		if m := longDecimal.FindAllString(text, 5); m != nil {
			t.Errorf("#/%s shows numbers with more than 3 decimals: %q", p.hash, m)
		}
	}
}
