package funding

import (
	"strconv"
	"testing"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/httpx"
)

// FuzzParseWindow: ?window= never panics; it either fails with the
// bad-parameter code or gives a window of 1 s to 3650 d that "<n>s"
// reads back to.
func FuzzParseWindow(f *testing.F) {
	for _, s := range []string{"", "30d", "1s", "24h", "3650d", "3651d", "0d", "0", "999999", "1d1", "-1d", "30D", "٣٠d", "30d\n", " 30d"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := parseWindow(s)
		if err != nil {
			if protocol.CodeOf(err) != httpx.CodeBadParameter {
				t.Fatalf("parseWindow(%q): %v, not %s", s, err, httpx.CodeBadParameter)
			}
			return
		}
		if n < 1 || n > maxWindow {
			t.Fatalf("parseWindow(%q) = %d, outside 1..%d", s, n, maxWindow)
		}
		if back, err := parseWindow(strconv.FormatInt(n, 10) + "s"); err == nil && back != n {
			t.Fatalf("parseWindow(%q) = %d, but %ds reads %d", s, n, n, back)
		}
	})
}
