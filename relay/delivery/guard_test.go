package delivery

import (
	"testing"

	"github.com/anp2net/relay/relay/netguard/netguardtest"
)

// TestWebhookClientRefusesSpecialRanges: the webhook client refuses to dial
// addresses the old blocklist missed (CGNAT, benchmarking, NAT64, "this
// network", IPv4-mapped private), before any packet leaves.
func TestWebhookClientRefusesSpecialRanges(t *testing.T) {
	netguardtest.RefusesSpecialRanges(t, newClient(false, 1))
}
