package relay

import (
	"encoding/base64"
	"fmt"
	"strings"
	"testing"

	"github.com/anp2net/relay/protocol"
)

// TestReaderAuthIsCharged: every D4 header an address has checked costs a
// unit of its authentication allowance before the signature check, so a
// flood of junk headers is refused with 429 instead of verified.
func TestReaderAuthIsCharged(t *testing.T) {
	r := startRelay(t, func(c *Config) { c.RatePerAuth = 2 })
	junk := func() string {
		e := mk(key(9), r.clock.now().Unix(), protocol.KindHTTPAuth, "", []string{"u", r.URL + "/events"}, []string{"method", "GET"})
		e.Sig = strings.Repeat("ab", 64) // a well-formed header whose signature is junk
		return "ANP2 " + base64.StdEncoding.EncodeToString(protocol.AppendJSON(nil, e))
	}
	var got []int
	for range 3 {
		got = append(got, r.do(t, "GET", "/events", "", nil, "Authorization", junk()).status)
	}
	if fmt.Sprint(got) != "[401 401 429]" {
		t.Fatalf("junk reader headers: %v, want [401 401 429]", got)
	}
}
