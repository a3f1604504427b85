package funding_test

import (
	"strings"
	"testing"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/funding"
	"github.com/anp2net/relay/tasks/taskstest"
)

// TestFoldToleratesInvalidEvents: events that break the kind rules (a
// peer's, an old import's) are held, not counted, and the view says why;
// the latest valid declaration stays current.
func TestFoldToleratesInvalidEvents(t *testing.T) {
	a := taskstest.Pool(2)
	alice, bob := a[0], a[1]
	f := funding.NewFold()
	good := alice.Sign(protocol.KindFunding, 100, map[string]any{"addresses": []any{map[string]any{"chain": "BTC", "address": btcAddr}}}, []string{"chain", "BTC"})
	badNewer := alice.Sign(protocol.KindFunding, 200, map[string]any{"addresses": []any{map[string]any{"chain": "BTC", "address": "bc1q..."}}}, []string{"chain", "BTC"})
	badClaim := bob.Sign(protocol.KindDonation, 150, map[string]any{"type": "sent", "chain": "ETH", "tx_hash": "0x..."}, []string{"p", alice.ID}, []string{"chain", "ETH"})
	for _, e := range []*protocol.Event{badNewer, good, badClaim} {
		f.Add(e)
	}
	s := f.Summary(alice.ID, 0, 1000)
	if s.Declaration == nil || s.Declaration.EventID != good.ID || s.InvalidDeclarations != 1 {
		t.Fatalf("declaration %+v, invalid %d", s.Declaration, s.InvalidDeclarations)
	}
	if s.Received != 0 || len(s.Ignored) != 1 || s.Ignored[0].EventID != badClaim.ID || !strings.Contains(s.Ignored[0].Reason, "content.tx_hash") {
		t.Fatalf("received %d, ignored %+v", s.Received, s.Ignored)
	}
	// A declaration dated after the evaluation time is not current yet.
	if s := f.Summary(alice.ID, 0, 99); s.Declaration != nil {
		t.Fatalf("a future declaration is current: %+v", s.Declaration)
	}
	f.Remove(good)
	f.Remove(badClaim)
	if s := f.Summary(alice.ID, 0, 1000); s.Declaration != nil || len(s.Ignored) != 0 {
		t.Fatalf("after removal: %+v", s)
	}
}
