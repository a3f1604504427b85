package federation

import (
	"testing"

	"github.com/anp2net/relay/relay/netguard/netguardtest"
)

// TestResolveClientRefusesSpecialRanges: the federation lookup client
// refuses addresses the old blocklist missed (CGNAT, benchmarking, NAT64,
// "this network", IPv4-mapped private).
func TestResolveClientRefusesSpecialRanges(t *testing.T) {
	netguardtest.RefusesSpecialRanges(t, guardedClient)
}
