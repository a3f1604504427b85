package protocol

import (
	"strings"
	"testing"
)

// FuzzResolveChain: a resolved chain is a known chain (validated, as
// NormalizeChain spells it) or an upper-cased ticker-like name of at most
// 32 bytes; resolving is idempotent; anything else is refused.
func FuzzResolveChain(f *testing.F) {
	for _, s := range []string{"BTC", "btc", "lightning", "Lightning", "doge", "DOGE", "usdc.e", "a", "", "1inch", "DO GE", "x" + strings.Repeat("y", 40), "ÉTH", "eth\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		canon, validated, ok := ResolveChain(name)
		if !ok {
			return
		}
		if _, known := NormalizeChain(name); known != validated {
			t.Fatalf("%q: validated %v, known %v", name, validated, known)
		}
		if !validated && (canon != strings.ToUpper(name) || len(canon) > 32 || !openChainName.MatchString(canon)) {
			t.Fatalf("%q resolved to %q", name, canon)
		}
		again, v2, ok2 := ResolveChain(canon)
		if !ok2 || again != canon || v2 != validated {
			t.Fatalf("%q → %q → %q", name, canon, again)
		}
	})
}
