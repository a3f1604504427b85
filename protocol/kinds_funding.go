package protocol

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"sort"
	"strings"

	"github.com/btcsuite/btcd/btcutil/base58"
)

// Publish-time rules and parsers for funding, kinds 16 and 17 (seed §13.2,
// §13.3). Like the task parsers, they are the single reading of the
// content: the publish check and the funding fold both use them. Every
// violation names the JSON path it concerns ("content.addresses[1].address",
// "tags").

// Codes for funding-rule violations.
const (
	CodeInvalidFunding   = "invalid_funding"
	CodeInvalidAddress   = "invalid_address"
	CodeChainTagMismatch = "chain_tag_mismatch"
	CodeInvalidDonation  = "invalid_donation"
)

// Kind 17 types (§13.3, §13.3.4).
const (
	DonationSent         = "sent"
	DonationAck          = "ack"
	DonationVerification = "verification"
)

// Verification statuses (§13.3.2).
const (
	VerifyUnverified   = "unverified"
	VerifyVerified     = "verified"
	VerifyFailed       = "failed"
	VerifyPending      = "pending"
	VerifyUnverifiable = "unverifiable"
)

// TagVerifiedByExternal marks a kind 17 re-attestation (§13.3.3); its value
// is the id of the attestation it judges.
const TagVerifiedByExternal = "verified_by_external"

var verifyStatuses = map[string]bool{VerifyUnverified: true, VerifyVerified: true, VerifyFailed: true, VerifyPending: true, VerifyUnverifiable: true}

// Bounds on kind 16 content.
const (
	maxFundingAddresses = 32
	maxTokens           = 16
)

func init() {
	kindRules[KindFunding] = func(e *Event) []error { _, errs := ParseFunding(e); return errs }
	kindRules[KindDonation] = func(e *Event) []error { _, errs := ParseDonation(e); return errs }
}

// FundingAddress is one receiving address of a kind 16.
type FundingAddress struct {
	// Chain is the chain's canonical spelling (NormalizeChain).
	Chain string `json:"chain"`
	// Address is the canonical address; for lightning it is empty and
	// LNURL holds the LNURL.
	Address string   `json:"address,omitempty"`
	LNURL   string   `json:"lnurl,omitempty"`
	Tokens  []string `json:"tokens,omitempty"`
	// UnvalidatedChain: the relay does not know the chain (ResolveChain)
	// and kept the address as given, unchecked.
	UnvalidatedChain bool `json:"unvalidated_chain,omitempty"`
}

// Funding is the parsed content of a kind 16 funding_address.
type Funding struct {
	Addresses []FundingAddress
	// SuggestedMinimum maps a currency to a non-negative decimal.
	SuggestedMinimum map[string]string
	Purpose          string
	TransparencyURL  string
	// DiscloseTotals is the donee's consent to show amount totals in
	// GET /funding (§13.4, "only if disclosure is enabled").
	DiscloseTotals bool
}

// ParseFunding parses and checks a kind 16 (§13.2). It returns every
// violation (invalid_funding, invalid_address, chain_tag_mismatch), each
// naming its JSON path.
//
// Required: addresses, an array of 1 to 32 objects, each with a known chain
// (NormalizeChain) and, for lightning, an lnurl (an address holding one is
// read the same), otherwise an address valid for the chain (ValidateAddress);
// tokens, when present, is an array of at most 16 non-empty strings.
// Optional but typed: suggested_minimum (object of non-negative decimals),
// purpose (string), transparency_url ("" or an absolute http(s) URL),
// disclose_totals (boolean). The ["chain", X] tags must name exactly the
// chains of the addresses.
func ParseFunding(e *Event) (*Funding, []error) {
	var errs errList
	obj, ok := decodeObject(e.Content)
	if !ok {
		errs.add(CodeInvalidFunding, "content: kind 16 content must be one JSON object")
		return nil, errs
	}
	f := &Funding{}
	var arr []json.RawMessage
	if raw := obj["addresses"]; len(raw) == 0 || raw[0] != '[' || json.Unmarshal(raw, &arr) != nil {
		errs.add(CodeInvalidFunding, "content.addresses: must be an array of address objects")
	} else if len(arr) == 0 || len(arr) > maxFundingAddresses {
		errs.add(CodeInvalidFunding, "content.addresses: must hold 1 to %d addresses, has %d", maxFundingAddresses, len(arr))
	}
	var chains []string
	for i, raw := range arr[:min(len(arr), maxFundingAddresses)] {
		a, ok := parseFundingAddress(raw, fmt.Sprintf("content.addresses[%d]", i), &errs)
		if a.Chain != "" {
			chains = append(chains, a.Chain)
		}
		if ok {
			f.Addresses = append(f.Addresses, a)
		}
	}
	parseFundingExtras(obj, f, &errs)
	checkChainTags(e, chains, &errs)
	if len(errs) > 0 {
		return nil, errs
	}
	return f, nil
}

// parseFundingAddress reads one address object; a known chain is returned
// even when the rest is invalid, so the chain tags are checked against it.
func parseFundingAddress(raw json.RawMessage, path string, errs *errList) (FundingAddress, bool) {
	obj, ok := jsonObject(raw)
	if !ok {
		errs.add(CodeInvalidFunding, "%s: must be an object", path)
		return FundingAddress{}, false
	}
	name, _ := jsonString(obj["chain"])
	chain, validated, ok := ResolveChain(name)
	if !ok {
		errs.add(CodeInvalidFunding, "%s.chain: %q is not a chain name (a letter, then up to 31 letters, digits, '.', '_' or '-')", path, name)
		return FundingAddress{}, false
	}
	a := FundingAddress{Chain: chain, UnvalidatedChain: !validated}
	field := "address"
	if chain == ChainLightning {
		if _, has := obj["lnurl"]; has || len(obj["address"]) == 0 {
			field = "lnurl"
		}
	}
	s, ok := jsonString(obj[field])
	if !ok {
		errs.add(CodeInvalidAddress, "%s.%s: must be a string", path, field)
		return a, false
	}
	canon, err := s, openField(s, maxAddressLen)
	if validated {
		canon, err = ValidateAddress(chain, s)
	}
	if err != nil {
		errs.add(CodeInvalidAddress, "%s.%s: not a valid %s address: %v", path, field, chain, err)
		return a, false
	}
	if chain == ChainLightning {
		a.LNURL = canon
	} else {
		a.Address = canon
	}
	if raw, has := obj["tokens"]; has {
		var toks []string
		if json.Unmarshal(raw, &toks) != nil || raw[0] != '[' || len(toks) > maxTokens || hasEmpty(toks) {
			errs.add(CodeInvalidFunding, "%s.tokens: must be an array of at most %d non-empty strings", path, maxTokens)
			return a, false
		}
		a.Tokens = toks
	}
	return a, true
}

func hasEmpty(ss []string) bool {
	for _, s := range ss {
		if strings.TrimSpace(s) == "" {
			return true
		}
	}
	return false
}

func parseFundingExtras(obj map[string]json.RawMessage, f *Funding, errs *errList) {
	if raw, has := obj["suggested_minimum"]; has {
		m, ok := jsonObject(raw)
		if !ok {
			errs.add(CodeInvalidFunding, "content.suggested_minimum: must be an object of currency to amount")
		}
		f.SuggestedMinimum = make(map[string]string, len(m))
		for cur, v := range m {
			d, ok := jsonDecimal(v)
			if !ok {
				errs.add(CodeInvalidFunding, "content.suggested_minimum.%s: must be a non-negative decimal", cur)
				continue
			}
			f.SuggestedMinimum[cur] = d
		}
	}
	if raw, has := obj["purpose"]; has {
		if s, ok := jsonString(raw); ok {
			f.Purpose = s
		} else {
			errs.add(CodeInvalidFunding, "content.purpose: must be a string")
		}
	}
	if raw, has := obj["transparency_url"]; has {
		s, ok := jsonString(raw)
		if !ok || s != "" && !isHTTPURL(s) {
			errs.add(CodeInvalidFunding, "content.transparency_url: must be \"\" or an absolute http(s) URL")
		}
		f.TransparencyURL = s
	}
	if raw, has := obj["disclose_totals"]; has {
		if err := json.Unmarshal(raw, &f.DiscloseTotals); err != nil || raw[0] != 't' && raw[0] != 'f' {
			errs.add(CodeInvalidFunding, "content.disclose_totals: must be a boolean")
		}
	}
}

func isHTTPURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "https" || u.Scheme == "http") && u.Host != ""
}

// checkChainTags requires the ["chain", X] tags to name exactly chains.
func checkChainTags(e *Event, chains []string, errs *errList) {
	want := map[string]bool{}
	for _, c := range chains {
		want[c] = true
	}
	got := map[string]bool{}
	for _, v := range e.TagValues("chain") {
		c, _, known := ResolveChain(v)
		if !known {
			errs.add(CodeChainTagMismatch, "tags: chain tag %q names an unknown chain", v)
			continue
		}
		got[c] = true
		if !want[c] {
			errs.add(CodeChainTagMismatch, "tags: chain tag %q has no matching address in content", v)
		}
	}
	var missing []string
	for c := range want {
		if !got[c] {
			missing = append(missing, c)
		}
	}
	sort.Strings(missing)
	for _, c := range missing {
		errs.add(CodeChainTagMismatch, "tags: content names chain %s but there is no [\"chain\", %q] tag", c, c)
	}
}

// Donation is the parsed content and tags of a kind 17.
type Donation struct {
	Type        string
	Chain       string // canonical spelling
	TxHash      string // as published ("" when absent)
	Amount      string // non-negative decimal ("" when absent)
	Asset       string // defaults to the chain's native asset
	FromAddress string
	ToAddress   string
	Memo        string
	Private     bool
	// Counterparty is the p tag: the donee of a sent or verification, the
	// donor of an ack (whose author is the donee).
	Counterparty string
	// UnvalidatedChain: the relay does not know the chain (ResolveChain);
	// tx_hash and addresses are kept as given, unchecked.
	UnvalidatedChain bool
	// Attests is the verified_by_external tag's value: the attestation a
	// re-attestation judges ("" for a plain attestation).
	Attests string
	// Refs are the e tags (an ack may name the sent it acknowledges).
	Refs []string
	// Claimed is verification.status as the author wrote it. It is the
	// author's own claim: views never show a donor's self-claim as the
	// relay's verification; it is read only from re-attestations.
	Claimed string
}

// NativeAsset returns the asset a donation on chain moves when it names
// none.
func NativeAsset(chain string) string {
	switch {
	case chain == ChainLightning:
		return ChainBTC
	case IsEVMChain(chain):
		return ChainETH
	}
	return chain
}

// ParseDonation parses and checks a kind 17 (§13.3). It returns every
// violation (invalid_donation, invalid_address, chain_tag_mismatch,
// missing_tag), each naming its JSON path. It never rejects an attestation
// for being unverified: a verification object is optional and its status,
// when present, need only be one of §13.3.2's five.
//
// Required: type (sent, ack, verification), a known chain, a
// ["p", <agent_id>] tag and a ["chain", X] tag for that chain and no other;
// tx_hash on a sent or ack on every chain but lightning (0x and 64 hex on EVM chains, 64 hex
// on BTC, the base58 of a 64-byte signature on SOL; 64 hex if given on
// lightning). Optional but typed: amount (non-negative decimal string),
// asset, memo (strings), from_address and to_address (valid for the chain;
// not checked on lightning), private (boolean). A verified_by_external tag
// holds a 64-hex event id; type verification requires it and a
// verification.status.
func ParseDonation(e *Event) (*Donation, []error) {
	var errs errList
	obj, ok := decodeObject(e.Content)
	if !ok {
		errs.add(CodeInvalidDonation, "content: kind 17 content must be one JSON object")
		return nil, errs
	}
	d := &Donation{}
	d.Type, _ = jsonString(obj["type"])
	if d.Type != DonationSent && d.Type != DonationAck && d.Type != DonationVerification {
		errs.add(CodeInvalidDonation, "content.type: must be sent, ack or verification")
	}
	name, _ := jsonString(obj["chain"])
	chain, validated, known := ResolveChain(name)
	if !known {
		errs.add(CodeInvalidDonation, "content.chain: %q is not a chain name (a letter, then up to 31 letters, digits, '.', '_' or '-')", name)
	} else {
		d.Chain, d.UnvalidatedChain = chain, !validated
		parseDonationFields(obj, d, &errs)
		checkChainTags(e, []string{chain}, &errs)
	}
	parseDonationTags(e, d, &errs)
	parseVerification(obj, d, &errs)
	if len(errs) > 0 {
		return nil, errs
	}
	return d, nil
}

func parseDonationFields(obj map[string]json.RawMessage, d *Donation, errs *errList) {
	str := func(name string) string {
		raw, has := obj[name]
		if !has {
			return ""
		}
		s, ok := jsonString(raw)
		if !ok {
			errs.add(CodeInvalidDonation, "content.%s: must be a string", name)
		}
		return s
	}
	d.TxHash, d.Amount, d.Asset, d.Memo = str("tx_hash"), str("amount"), str("asset"), str("memo")
	if d.TxHash == "" && d.Chain != ChainLightning && d.Type != DonationVerification {
		errs.add(CodeInvalidDonation, "content.tx_hash: required on %s", d.Chain)
	} else if d.TxHash != "" && d.UnvalidatedChain {
		if err := openField(d.TxHash, maxOpenTxHash); err != nil {
			errs.add(CodeInvalidDonation, "content.tx_hash: %v", err)
		}
	} else if d.TxHash != "" {
		if err := validateTxHash(d.Chain, d.TxHash); err != nil {
			errs.add(CodeInvalidDonation, "content.tx_hash: %v", err)
		}
	}
	if d.Amount != "" && !decimalText.MatchString(d.Amount) {
		errs.add(CodeInvalidDonation, "content.amount: must be a non-negative decimal string such as \"50\" or \"0.01\"")
	}
	if d.Asset == "" {
		d.Asset = NativeAsset(d.Chain)
	}
	d.Asset = strings.ToUpper(d.Asset)
	for _, f := range []struct {
		name string
		dst  *string
	}{{"from_address", &d.FromAddress}, {"to_address", &d.ToAddress}} {
		*f.dst = str(f.name)
		if *f.dst == "" || d.Chain == ChainLightning {
			continue
		}
		if d.UnvalidatedChain {
			if err := openField(*f.dst, maxAddressLen); err != nil {
				errs.add(CodeInvalidAddress, "content.%s: %v", f.name, err)
			}
			continue
		}
		canon, err := ValidateAddress(d.Chain, *f.dst)
		if err != nil {
			errs.add(CodeInvalidAddress, "content.%s: not a valid %s address: %v", f.name, d.Chain, err)
		}
		*f.dst = canon
	}
	if raw, has := obj["private"]; has {
		if json.Unmarshal(raw, &d.Private) != nil || raw[0] != 't' && raw[0] != 'f' {
			errs.add(CodeInvalidDonation, "content.private: must be a boolean")
		}
	}
}

// validateTxHash checks a transaction id by the chain's format.
func validateTxHash(chain, tx string) error {
	switch {
	case IsEVMChain(chain):
		if len(tx) != 66 || tx[:2] != "0x" || !isHex(tx[2:]) {
			return fmt.Errorf("an %s transaction hash is 0x and 64 hex digits", chain)
		}
	case chain == ChainSOL:
		if len(tx) < 64 || len(tx) > 90 || len(base58.Decode(tx)) != 64 {
			return fmt.Errorf("a SOL transaction signature is the base58 of 64 bytes")
		}
	default: // BTC txid, Lightning payment hash
		if len(tx) != 64 || !isHex(tx) {
			return fmt.Errorf("a %s transaction hash is 64 hex digits", chain)
		}
	}
	return nil
}

func isHex(s string) bool {
	_, err := hex.DecodeString(s)
	return err == nil
}

func parseDonationTags(e *Event, d *Donation, errs *errList) {
	for _, v := range e.TagValues("p") {
		if IsHex64(v) {
			d.Counterparty = v
			break
		}
	}
	if d.Counterparty == "" {
		errs.add(CodeMissingTag, "tags: kind 17 needs a [\"p\", <agent_id>] tag with a 64-hex agent id")
	}
	if vs := e.TagValues(TagVerifiedByExternal); len(vs) > 0 {
		if len(vs) > 1 || !IsHex64(vs[0]) {
			errs.add(CodeInvalidDonation, "tags: one [\"verified_by_external\", <event_id>] tag with the 64-hex id of the attestation it judges")
		} else {
			d.Attests = vs[0]
		}
	} else if d.Type == DonationVerification {
		errs.add(CodeMissingTag, "tags: a type verification attestation needs a [\"verified_by_external\", <event_id>] tag")
	}
	for _, v := range e.TagValues("e") {
		if IsHex64(v) {
			d.Refs = append(d.Refs, v)
		}
	}
}

func parseVerification(obj map[string]json.RawMessage, d *Donation, errs *errList) {
	raw, has := obj["verification"]
	if !has || string(raw) == "null" {
		if d.Attests != "" {
			errs.add(CodeInvalidDonation, "content.verification.status: a re-attestation states its verification status")
		}
		return
	}
	v, ok := jsonObject(raw)
	if !ok {
		errs.add(CodeInvalidDonation, "content.verification: must be an object")
		return
	}
	st, _ := jsonString(v["status"])
	if !verifyStatuses[st] {
		errs.add(CodeInvalidDonation, "content.verification.status: must be one of unverified, verified, failed, pending, unverifiable")
		return
	}
	d.Claimed = st
}

// decodeObject decodes content as exactly one JSON object (members raw).
func decodeObject(content string) (map[string]json.RawMessage, bool) {
	var errs errList
	return contentObject(&Event{Content: content}, &errs)
}
