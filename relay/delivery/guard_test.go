package delivery

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestWebhookClientRefusesSpecialRanges: the webhook client refuses to dial
// addresses the old blocklist missed (CGNAT, benchmarking, NAT64, "this
// network", IPv4-mapped private), before any packet leaves.
func TestWebhookClientRefusesSpecialRanges(t *testing.T) {
	c := newClient(false, 1)
	for _, u := range []string{
		"http://100.64.0.1:9/", "http://198.18.0.1:9/", "http://[64:ff9b::a9fe:a9fe]:9/",
		"http://0.1.2.3:9/", "http://240.0.0.1:9/", "http://192.0.0.1:9/", "http://[::ffff:10.0.0.1]:9/",
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		_, err := c.Do(req)
		cancel()
		if err == nil || !strings.Contains(err.Error(), "refused (not public)") {
			t.Errorf("%s: %v, want refused (not public)", u, err)
		}
	}
}
