package protocol

import (
	"strings"
	"testing"

	"github.com/btcsuite/btcd/btcutil/bech32"
)

// Published vectors: BIP-173 and BIP-350 (segwit), the Bitcoin wiki's
// base58check examples, EIP-55's own list, Solana's well-known program ids,
// and LUD-01's LNURL example.
func TestValidateAddressVectors(t *testing.T) {
	valid := []struct{ chain, addr, canon string }{
		{"BTC", "BC1QW508D6QEJXTDG4Y5R3ZARVARY0C5XW7KV8F3T4", "bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t4"},
		{"BTC", "bc1qrp33g0q5c5txsp9arysrx4k6zdkfs4nce4xj0gdcccefvpysxf3qccfmv3", ""},
		{"BTC", "bc1pw508d6qejxtdg4y5r3zarvary0c5xw7kw508d6qejxtdg4y5r3zarvary0c5xw7kt5nd6y", ""},
		{"BTC", "BC1SW50QGDZ25J", "bc1sw50qgdz25j"},
		{"BTC", "bc1zw508d6qejxtdg4y5r3zarvaryvaxxpcs", ""},
		{"BTC", "bc1p0xlxvlhemja6c4dqv22uapctqupfhlxm9h8z3k2e72q4k9hcz7vqzk5jj0", ""},
		{"BTC", "1BvBMSEYstWetqTFn5Au4m4GFg7xJaNVN2", ""},
		{"BTC", "3J98t1WpEZ73CNmQviecrnyiWrnqRhWNLy", ""},
		{"ETH", "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed", ""},
		{"ETH", "0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359", ""},
		{"ETH", "0xdbF03B407c01E7cD3CBea99509d93f8DDDC8C6FB", ""},
		{"ETH", "0xD1220A0cf47c7B9Be7A2E6BA89F429762e7b9aDb", ""},
		{"ETH", "0x52908400098527886E0F7030069857D2E4169EE7", ""},
		{"BASE", "0xde709f2102306220921060314715629080e2fb77", ""},
		{"SOL", "11111111111111111111111111111111", ""},
		{"SOL", "So11111111111111111111111111111111111111112", ""},
		{"SOL", "TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA", ""},
		{"lightning", "LNURL1DP68GURN8GHJ7UM9WFMXJCM99E3K7MF0V9CXJ0M385EKVCENXC6R2C35XVUKXEFCV5MKVV34X5EKZD3EV56NYD3HXQURZEPEXEJXXEPNXSCRVWFNV9NXZCN9XQ6XYEFHVGCXXCMYXYMNSERXFQ5FNS",
			"lnurl1dp68gurn8ghj7um9wfmxjcm99e3k7mf0v9cxj0m385ekvcenxc6r2c35xvukxefcv5mkvv34x5ekzd3ev56nyd3hxqurzepexejxxepnxscrvwfnv9nxzcn9xq6xyefhvgcxxcmyxymnserxfq5fns"},
	}
	for _, v := range valid {
		got, err := ValidateAddress(v.chain, v.addr)
		if err != nil {
			t.Errorf("%s %s: %v", v.chain, v.addr, err)
			continue
		}
		want := v.canon
		if want == "" {
			want = v.addr
		}
		if got != want {
			t.Errorf("%s %s: canonical %s, want %s", v.chain, v.addr, got, want)
		}
	}
	invalid := []struct{ chain, addr, why string }{
		{"BTC", "tb1qrp33g0q5c5txsp9arysrx4k6zdkfs4nce4xj0gdcccefvpysxf3q0sl5k7", "mainnet"},
		{"BTC", "bc1p0xlxvlhemja6c4dqv22uapctqupfhlxm9h8z3k2e72q4k9hcz7vqh2y7hd", "bech32m"},
		{"BTC", "BC1S0XLXVLHEMJA6C4DQV22UAPCTQUPFHLXM9H8Z3K2E72Q4K9HCZ7VQ54WELL", "bech32m"},
		{"BTC", "bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kemeawh", "bech32 checksum"},
		{"BTC", "BC1SW50QA3JX3S", "bech32m"}, // BIP-173's v16 vector, invalid since BIP-350
		{"BTC", "BC130XLXVLHEMJA6C4DQV22UAPCTQUPFHLXM9H8Z3K2E72Q4K9HCZ7VQ7ZWS8R", "witness version"},
		{"BTC", "bc1pw5dgrnzv", "program"},
		{"BTC", "bc1p0xlxvlhemja6c4dqv22uapctqupfhlxm9h8z3k2e72q4k9hcz7v8n0nx0muaewav253zgeav", "program"},
		{"BTC", "bc1p0xlxvlhemja6c4dqv22uapctqupfhlxm9h8z3k2e72q4k9hcz7v07qwwzcrf", "padding"},
		{"BTC", "bc1gmk9yu", ""},
		{"BTC", "bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t5", "checksum"},
		{"BTC", "bc1rw5uspcuh", "program"},
		{"BTC", "BC1QR508D6QEJXTDG4Y5R3ZARVARYV98GJ9P", "v0 program"},
		{"BTC", "bc1qW508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t4", "all lowercase or all uppercase"},
		{"BTC", "1BvBMSEYstWetqTFn5Au4m4GFg7xJaNVN3", "base58check"},
		{"BTC", "mipcBbFg9gMiCh81Kj8tqqdgoZub1ZJRfn", "version"},
		{"BTC", "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed", ""},
		{"ETH", "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAeD", "EIP-55"},
		{"ETH", "0x5aaeb6053f3e94c9b9a09f33669435e7ef1beae", "40 hex"},
		{"ETH", "5aaeb6053f3e94c9b9a09f33669435e7ef1beaed00", "0x"},
		{"ETH", "0xgaaeb6053f3e94c9b9a09f33669435e7ef1beaed", "hex"},
		{"SOL", "1111111111111111111111111111111", "32 to 44"},
		{"SOL", "0okenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA", "32-byte"},
		{"SOL", "1TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA", "32-byte"},
		{"lightning", "lnurl1dp68gurn8ghj7um9wfmxjcm99e3k7mf0v9cxj0m385ekvcenxc6r2c35xvukxefcv5mkvv34x5ekzd3ev56nyd3hxqurzepexejxxepnxscrvwfnv9nxzcn9xq6xyefhvgcxxcmyxymnserxfq5fnt", "checksum"},
		{"lightning", "bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t4", "prefix lnurl"},
		{"DOGE", "DH5yaieqoZN36fDVciNyRueRGvGLR3mr7L", "unknown chain"},
		{"BTC", "", "empty"},
	}
	for _, v := range invalid {
		_, err := ValidateAddress(v.chain, v.addr)
		if err == nil {
			t.Errorf("%s %s: accepted", v.chain, v.addr)
			continue
		}
		if !strings.Contains(err.Error(), v.why) {
			t.Errorf("%s %s: %v, want it to mention %q", v.chain, v.addr, err, v.why)
		}
	}
}

func TestLNURLPayload(t *testing.T) {
	enc := func(u string) string {
		s, err := bech32.EncodeFromBase256("lnurl", []byte(u))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	for u, ok := range map[string]bool{
		"https://pay.example.com/lnurlp/alice": true,
		"http://abcdefghij.onion/lnurlp":       true,
		"http://pay.example.com/lnurlp":        false,
		"ftp://pay.example.com":                false,
		"not a url":                            false,
	} {
		if _, err := ValidateLNURL(enc(u)); (err == nil) != ok {
			t.Errorf("%s: err %v, want ok=%v", u, err, ok)
		}
	}
}

func TestEIP55(t *testing.T) {
	for _, a := range []string{"0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed", "0xD1220A0cf47c7B9Be7A2E6BA89F429762e7b9aDb"} {
		if got := EIP55(strings.ToLower(a[2:])); got != a {
			t.Errorf("EIP55(%s) = %s", strings.ToLower(a), got)
		}
	}
}

// FuzzValidateAddress: no input panics, and an accepted address is accepted
// again in its canonical form, unchanged.
func FuzzValidateAddress(f *testing.F) {
	for _, s := range []string{"bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t4", "1BvBMSEYstWetqTFn5Au4m4GFg7xJaNVN2",
		"0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed", "So11111111111111111111111111111111111111112",
		"lnurl1dp68gurn8ghj7um9wfmxjcm99e3k7mf0v9cxj0m385ekvcenxc6r2c35xvukxefcv5mkvv34x5ekzd3ev56nyd3hxqurzepexejxxepnxscrvwfnv9nxzcn9xq6xyefhvgcxxcmyxymnserxfq5fns",
		"bc1", "1", "0x", ""} {
		for _, c := range []string{"BTC", "ETH", "SOL", "lightning"} {
			f.Add(c, s)
		}
	}
	f.Fuzz(func(t *testing.T, chain, addr string) {
		canon, err := ValidateAddress(chain, addr)
		if err != nil {
			return
		}
		again, err := ValidateAddress(chain, canon)
		if err != nil || again != canon {
			t.Fatalf("%s %q canonical %q re-validates as %q, %v", chain, addr, canon, again, err)
		}
	})
}
