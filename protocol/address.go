package protocol

import (
	"encoding/hex"
	"fmt"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/btcsuite/btcd/btcutil/base58"
	"github.com/btcsuite/btcd/btcutil/bech32"
	"golang.org/x/crypto/sha3"
)

// Receiving addresses of kind 16 and kind 17 (seed §13.2, §13.3), checked
// by each chain's own format. Bech32 and base58 come from btcd's btcutil,
// the Bitcoin codecs most Go wallets and Lightning nodes (lnd) build on;
// the EIP-55 checksum is Keccak-256 from golang.org/x/crypto/sha3.

// Chains a funding address may name. Chain names compare case-insensitively
// and are reported in these spellings; EVM networks share Ethereum's
// address format.
const (
	ChainBTC       = "BTC"
	ChainETH       = "ETH"
	ChainSOL       = "SOL"
	ChainLightning = "lightning"
)

// evmChains are the chains whose addresses are Ethereum's (§13.3.1's
// "ETH / L2").
var evmChains = map[string]bool{ChainETH: true, "ARBITRUM": true, "OPTIMISM": true, "BASE": true, "POLYGON": true}

// maxAddressLen bounds any address or LNURL before it is decoded (base58
// decoding is quadratic in the input).
const maxAddressLen = 2048

// NormalizeChain returns the canonical spelling of a chain name and whether
// the relay knows the chain: BTC, ETH, SOL, lightning, ARBITRUM, OPTIMISM,
// BASE, POLYGON.
func NormalizeChain(chain string) (string, bool) {
	up := strings.ToUpper(chain)
	switch {
	case up == "LIGHTNING":
		return ChainLightning, true
	case up == ChainBTC || up == ChainSOL || evmChains[up]:
		return up, true
	}
	return chain, false
}

// IsEVMChain reports whether chain (canonical spelling) uses Ethereum
// addresses.
func IsEVMChain(chain string) bool { return evmChains[chain] }

// ValidateAddress checks addr against the format of chain (canonical
// spelling) and returns its canonical form: BTC bech32 lowercased, others as
// given. For lightning, addr is an LNURL. The error says what is wrong.
func ValidateAddress(chain, addr string) (string, error) {
	if addr == "" {
		return "", fmt.Errorf("empty address")
	}
	if len(addr) > maxAddressLen {
		return "", fmt.Errorf("address longer than %d bytes", maxAddressLen)
	}
	switch {
	case chain == ChainBTC:
		return ValidateBTC(addr)
	case chain == ChainSOL:
		return addr, ValidateSOL(addr)
	case chain == ChainLightning:
		return ValidateLNURL(addr)
	case evmChains[chain]:
		return addr, ValidateEVM(addr)
	}
	return "", fmt.Errorf("unknown chain %q", chain)
}

// ValidateBTC checks a Bitcoin mainnet address: a segwit address in bech32
// (witness v0, BIP-173) or bech32m (v1 and later, BIP-350) with hrp "bc",
// or a base58check P2PKH (version 0x00) or P2SH (0x05) address. It returns
// the address, lowercased when it is bech32.
func ValidateBTC(addr string) (string, error) {
	if i := strings.LastIndexByte(addr, '1'); i > 0 {
		switch hrp := strings.ToLower(addr[:i]); hrp {
		case "bc":
			return validateSegwit(addr)
		case "tb", "bcrt":
			return "", fmt.Errorf("not a mainnet address (hrp %q is testnet or regtest)", hrp)
		}
	}
	payload, version, err := base58.CheckDecode(addr)
	if err != nil {
		return "", fmt.Errorf("neither bech32 nor base58check: %v", err)
	}
	if len(payload) != 20 {
		return "", fmt.Errorf("base58check payload is %d bytes, want 20", len(payload))
	}
	if version != 0x00 && version != 0x05 {
		return "", fmt.Errorf("base58check version 0x%02x is not mainnet P2PKH (0x00) or P2SH (0x05)", version)
	}
	if base58.CheckEncode(payload, version) != addr {
		return "", fmt.Errorf("non-canonical base58check encoding")
	}
	return addr, nil
}

// validateSegwit applies BIP-173 and BIP-350 to a bech32 address whose hrp
// is "bc".
func validateSegwit(addr string) (string, error) {
	hrp, data, ver, err := bech32.DecodeGeneric(addr)
	if err != nil {
		return "", fmt.Errorf("bad bech32: %v", err)
	}
	if hrp != "bc" || len(data) < 1 {
		return "", fmt.Errorf("not a mainnet segwit address")
	}
	witver := data[0]
	if witver > 16 {
		return "", fmt.Errorf("witness version %d is above 16", witver)
	}
	prog, err := bech32.ConvertBits(data[1:], 5, 8, false)
	if err != nil {
		return "", fmt.Errorf("bad witness program padding: %v", err)
	}
	if len(prog) < 2 || len(prog) > 40 {
		return "", fmt.Errorf("witness program is %d bytes, want 2 to 40", len(prog))
	}
	if witver == 0 && len(prog) != 20 && len(prog) != 32 {
		return "", fmt.Errorf("witness v0 program is %d bytes, want 20 or 32", len(prog))
	}
	if witver == 0 && ver != bech32.Version0 {
		return "", fmt.Errorf("witness v0 needs a bech32 checksum, not bech32m (BIP-350)")
	}
	if witver != 0 && ver != bech32.VersionM {
		return "", fmt.Errorf("witness v%d needs a bech32m checksum (BIP-350)", witver)
	}
	return strings.ToLower(addr), nil
}

// ValidateEVM checks an Ethereum address: "0x" and 40 hex digits; when the
// digits mix upper and lower case, they must carry the EIP-55 checksum.
func ValidateEVM(addr string) error {
	if len(addr) != 42 || addr[0] != '0' || addr[1] != 'x' {
		return fmt.Errorf("want 0x followed by 40 hex digits")
	}
	digits := addr[2:]
	if _, err := hex.DecodeString(digits); err != nil {
		return fmt.Errorf("want 0x followed by 40 hex digits")
	}
	if digits == strings.ToLower(digits) || digits == strings.ToUpper(digits) {
		return nil
	}
	if want := EIP55(digits); want != addr {
		return fmt.Errorf("bad EIP-55 checksum (want %s)", want)
	}
	return nil
}

// EIP55 returns "0x" and the 40 hex digits hexDigits in EIP-55 mixed case:
// a letter is upper case when the matching nibble of Keccak-256 of the
// lowercase digits is 8 or more.
func EIP55(hexDigits string) string {
	lower := strings.ToLower(hexDigits)
	h := sha3.NewLegacyKeccak256()
	h.Write([]byte(lower))
	sum := h.Sum(nil)
	out := []byte("0x" + lower)
	for i := range len(lower) {
		nib := sum[i/2] >> 4
		if i%2 == 1 {
			nib = sum[i/2] & 0x0f
		}
		if c := out[2+i]; c >= 'a' && c <= 'f' && nib >= 8 {
			out[2+i] = c - 'a' + 'A'
		}
	}
	return string(out)
}

// ValidateSOL checks a Solana address: the canonical base58 encoding of a
// 32-byte public key.
func ValidateSOL(addr string) error {
	if len(addr) < 32 || len(addr) > 44 {
		return fmt.Errorf("a Solana address is 32 to 44 base58 characters, got %d", len(addr))
	}
	key := base58.Decode(addr)
	if len(key) != 32 || base58.Encode(key) != addr {
		return fmt.Errorf("not the base58 encoding of a 32-byte key")
	}
	return nil
}

// ValidateLNURL checks a Lightning LNURL (LUD-01): bech32 with hrp "lnurl"
// (no length limit) whose payload is an https URL, or an http one on a
// .onion host. It returns the LNURL lowercased.
func ValidateLNURL(s string) (string, error) {
	hrp, data, ver, err := bech32.DecodeNoLimitWithVersion(s)
	if err != nil {
		return "", fmt.Errorf("bad bech32: %v", err)
	}
	if hrp != "lnurl" || ver != bech32.Version0 {
		return "", fmt.Errorf("an LNURL is bech32 with the prefix lnurl")
	}
	raw, err := bech32.ConvertBits(data, 5, 8, false)
	if err != nil {
		return "", fmt.Errorf("bad LNURL payload padding: %v", err)
	}
	if !utf8.Valid(raw) {
		return "", fmt.Errorf("LNURL payload is not UTF-8")
	}
	u, err := url.Parse(string(raw))
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("LNURL payload is not an absolute URL")
	}
	onion := strings.HasSuffix(u.Hostname(), ".onion")
	if u.Scheme != "https" && !(u.Scheme == "http" && onion) {
		return "", fmt.Errorf("LNURL payload must be https (or http on .onion), got %q", u.Scheme)
	}
	return strings.ToLower(s), nil
}
