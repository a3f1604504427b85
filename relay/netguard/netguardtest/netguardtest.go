// Package netguardtest checks that an HTTP client dials through
// netguard's public-address check.
package netguardtest

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"
)

// specialRanges are addresses an older blocklist missed: CGNAT,
// benchmarking, NAT64, "this network", reserved, IETF protocol
// assignments and IPv4-mapped private.
var specialRanges = []string{
	"http://100.64.0.1:9/", "http://198.18.0.1:9/", "http://[64:ff9b::a9fe:a9fe]:9/",
	"http://0.1.2.3:9/", "http://240.0.0.1:9/", "http://192.0.0.1:9/", "http://[::ffff:10.0.0.1]:9/",
}

// RefusesSpecialRanges requires client to refuse every address of
// specialRanges before any packet leaves, with netguard's error.
func RefusesSpecialRanges(t *testing.T, client *http.Client) {
	t.Helper()
	for _, u := range specialRanges {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		_, err := client.Do(req)
		cancel()
		if err == nil || !strings.Contains(err.Error(), "refused (not public)") {
			t.Errorf("%s: %v, want refused (not public)", u, err)
		}
	}
}
