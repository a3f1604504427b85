package protocol

import (
	"fmt"
	"regexp"
	"strings"
)

// Chains the relay cannot validate (seed §13.1 "Multi-chain: BTC / ETH /
// USDC / SOL / Lightning, etc."; §13.3.3 "The relay MUST always accept
// kind 17"). A kind 16 or 17 may name any chain: the known ones
// (NormalizeChain) have their addresses and transaction hashes checked;
// any other ticker-like name is accepted, upper-cased, with its address
// and hash kept as bounded strings and the entry marked unvalidated_chain.

// openChainName is a chain name the relay does not know: a letter, then
// up to 31 letters, digits, '.', '_' or '-'.
var openChainName = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9._-]{0,31}$`)

// maxOpenTxHash bounds a transaction hash on an unvalidated chain.
const maxOpenTxHash = 256

// ResolveChain returns name's canonical spelling and whether the relay
// validates that chain's addresses: a known chain as NormalizeChain spells
// it (validated), any other ticker-like name upper-cased (not validated).
// ok is false for anything else (empty, too long, other characters).
func ResolveChain(name string) (canon string, validated, ok bool) {
	if c, known := NormalizeChain(name); known {
		return c, true, true
	}
	if openChainName.MatchString(name) {
		return strings.ToUpper(name), false, true
	}
	return name, false, false
}

// openField checks a value on an unvalidated chain: a non-empty string of
// at most max bytes with no control characters.
func openField(s string, max int) error {
	switch {
	case s == "":
		return fmt.Errorf("empty")
	case len(s) > max:
		return fmt.Errorf("longer than %d bytes", max)
	case strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f }):
		return fmt.Errorf("holds a control character")
	}
	return nil
}
