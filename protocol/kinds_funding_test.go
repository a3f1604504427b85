package protocol

import (
	"bytes"
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"
)

const (
	testBTC   = "bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t4"
	testETH   = "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed"
	testSOL   = "So11111111111111111111111111111111111111112"
	testLNURL = "lnurl1dp68gurn8ghj7um9wfmxjcm99e3k7mf0v9cxj0m385ekvcenxc6r2c35xvukxefcv5mkvv34x5ekzd3ev56nyd3hxqurzepexejxxepnxscrvwfnv9nxzcn9xq6xyefhvgcxxcmyxymnserxfq5fns"
)

func chainTags(cs ...string) [][]string {
	var out [][]string
	for _, c := range cs {
		out = append(out, []string{"chain", c})
	}
	return out
}

func TestFundingRule(t *testing.T) {
	seed := `{"addresses":[{"chain":"BTC","address":"` + testBTC + `"},{"chain":"ETH","address":"` + testETH + `","tokens":["USDC","USDT"]},{"chain":"SOL","address":"` + testSOL + `"},{"chain":"lightning","lnurl":"` + testLNURL + `"}],"suggested_minimum":{"USD":1.00},"purpose":"hosting and inference costs","transparency_url":""}`
	all := chainTags("BTC", "ETH", "SOL", "lightning")
	cases := []struct {
		name, content string
		tags          [][]string
		want          []string
		path          string // a detail must name it
	}{
		{"the seed's example", seed, all, nil, ""},
		{"chain names in any case", `{"addresses":[{"chain":"btc","address":"` + testBTC + `"}],"disclose_totals":true}`, chainTags("BTC"), nil, ""},
		{"a tag missing", seed, chainTags("BTC", "ETH", "SOL"), []string{CodeChainTagMismatch}, "lightning"},
		{"an extra tag", `{"addresses":[{"chain":"BTC","address":"` + testBTC + `"}]}`, chainTags("BTC", "SOL"), []string{CodeChainTagMismatch}, "tags"},
		{"an unknown chain tag", `{"addresses":[{"chain":"BTC","address":"` + testBTC + `"}]}`, chainTags("BTC", "XRP"), []string{CodeChainTagMismatch}, "tags"},
		{"bad EIP-55", strings.Replace(seed, "BeAed", "BeAeD", 1), all, []string{CodeInvalidAddress}, "content.addresses[1].address"},
		{"a BTC address on SOL", strings.Replace(seed, `"address":"`+testSOL, `"address":"`+testBTC, 1), all, []string{CodeInvalidAddress}, "content.addresses[2].address"},
		{"an lnurl with a bad checksum", strings.Replace(seed, "q5fns", "q5fnt", 1), all, []string{CodeInvalidAddress}, "content.addresses[3].lnurl"},
		{"no addresses", `{"addresses":[]}`, nil, []string{CodeInvalidFunding}, "content.addresses"},
		{"an unvalidated chain is kept", `{"addresses":[{"chain":"doge","address":"DH5yaieqoZN36fDVciNyRueRGvGLR3mr7L"}]}`, chainTags("DOGE"), nil, ""},
		{"not a chain name", `{"addresses":[{"chain":"DO GE","address":"x"}]}`, chainTags("DO GE"), []string{CodeChainTagMismatch, CodeInvalidFunding}, "content.addresses[0].chain"},
		{"an unvalidated chain's empty address", `{"addresses":[{"chain":"DOGE","address":""}]}`, chainTags("DOGE"), []string{CodeInvalidAddress}, "content.addresses[0].address"},
		{"address not a string", `{"addresses":[{"chain":"BTC","address":5}]}`, chainTags("BTC"), []string{CodeInvalidAddress}, "content.addresses[0].address"},
		{"bad tokens", `{"addresses":[{"chain":"ETH","address":"` + testETH + `","tokens":"USDC"}]}`, chainTags("ETH"), []string{CodeInvalidFunding}, "tokens"},
		{"bad transparency url", `{"addresses":[{"chain":"BTC","address":"` + testBTC + `"}],"transparency_url":"javascript:x"}`, chainTags("BTC"), []string{CodeInvalidFunding}, "transparency_url"},
		{"bad minimum", `{"addresses":[{"chain":"BTC","address":"` + testBTC + `"}],"suggested_minimum":{"USD":-1}}`, chainTags("BTC"), []string{CodeInvalidFunding}, "suggested_minimum.USD"},
		{"not an object", `[1]`, nil, []string{CodeInvalidFunding}, "content"},
	}
	for _, c := range cases {
		e := &Event{Kind: KindFunding, Content: c.content, Tags: c.tags}
		errs := CheckKind(e)
		if got := codesOf(errs); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: codes %v (%v), want %v", c.name, got, errs, c.want)
			continue
		}
		if c.path != "" && !strings.Contains(errs[0].Error()+errs[len(errs)-1].Error(), c.path) {
			t.Errorf("%s: %v does not name %s", c.name, errs, c.path)
		}
	}
	f, errs := ParseFunding(&Event{Kind: KindFunding, Content: seed, Tags: all})
	if errs != nil || len(f.Addresses) != 4 || f.Addresses[3].LNURL != testLNURL || f.SuggestedMinimum["USD"] != "1.00" || f.Purpose == "" {
		t.Fatalf("parsed %+v, %v", f, errs)
	}
}

func TestDonationRule(t *testing.T) {
	donee := strings.Repeat("ab", 32)
	tx := "0x" + strings.Repeat("1f", 32)
	p := []string{"p", donee}
	eth := []string{"chain", "ETH"}
	cases := []struct {
		name, content string
		tags          [][]string
		want          []string
	}{
		{"the seed's example", `{"type":"sent","chain":"ETH","tx_hash":"` + tx + `","amount":"50","asset":"USDC","from_address":"` + testETH + `","to_address":"` + testETH + `","memo":"thanks","private":false}`, [][]string{p, eth}, nil},
		{"a self-claimed verified is not a rejection", `{"type":"sent","chain":"ETH","tx_hash":"` + tx + `","verification":{"status":"verified","verified_by":"me"}}`, [][]string{p, eth}, nil},
		{"lightning needs no tx", `{"type":"sent","chain":"lightning","amount":"0.0001"}`, [][]string{p, {"chain", "lightning"}}, nil},
		{"an ack", `{"type":"ack","chain":"BTC","tx_hash":"` + strings.Repeat("c", 64) + `"}`, [][]string{p, {"chain", "BTC"}}, nil},
		{"a re-attestation", `{"type":"verification","chain":"ETH","verification":{"status":"verified"}}`, [][]string{p, eth, {"verified_by_external", strings.Repeat("cd", 32)}}, nil},
		{"re-attestation without a status", `{"type":"verification","chain":"ETH"}`, [][]string{p, eth, {"verified_by_external", strings.Repeat("cd", 32)}}, []string{CodeInvalidDonation}},
		{"verification without the tag", `{"type":"verification","chain":"ETH","verification":{"status":"verified"}}`, [][]string{p, eth}, []string{CodeMissingTag}},
		{"bad status", `{"type":"sent","chain":"ETH","tx_hash":"` + tx + `","verification":{"status":"yes"}}`, [][]string{p, eth}, []string{CodeInvalidDonation}},
		{"no p tag", `{"type":"sent","chain":"ETH","tx_hash":"` + tx + `"}`, [][]string{eth}, []string{CodeMissingTag}},
		{"chain tag mismatch", `{"type":"sent","chain":"ETH","tx_hash":"` + tx + `"}`, [][]string{p, {"chain", "BTC"}}, []string{CodeChainTagMismatch, CodeChainTagMismatch}},
		{"bad tx", `{"type":"sent","chain":"ETH","tx_hash":"0x12"}`, [][]string{p, eth}, []string{CodeInvalidDonation}},
		{"missing tx", `{"type":"sent","chain":"BTC"}`, [][]string{p, {"chain", "BTC"}}, []string{CodeInvalidDonation}},
		{"bad amount", `{"type":"sent","chain":"ETH","tx_hash":"` + tx + `","amount":"-5"}`, [][]string{p, eth}, []string{CodeInvalidDonation}},
		{"bad to_address", `{"type":"sent","chain":"ETH","tx_hash":"` + tx + `","to_address":"0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAeD"}`, [][]string{p, eth}, []string{CodeInvalidAddress}},
		{"bad type", `{"type":"gift","chain":"ETH","tx_hash":"` + tx + `"}`, [][]string{p, eth}, []string{CodeInvalidDonation}},
		{"private not bool", `{"type":"sent","chain":"ETH","tx_hash":"` + tx + `","private":"yes"}`, [][]string{p, eth}, []string{CodeInvalidDonation}},
	}
	for _, c := range cases {
		errs := CheckKind(&Event{Kind: KindDonation, Content: c.content, Tags: c.tags})
		if got := codesOf(errs); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: codes %v (%v), want %v", c.name, got, errs, c.want)
		}
	}
	d, errs := ParseDonation(&Event{Kind: KindDonation, Content: `{"type":"sent","chain":"eth","tx_hash":"` + tx + `","amount":"50","asset":"usdc","private":true,"verification":{"status":"verified"}}`, Tags: [][]string{p, eth}})
	if errs != nil || d.Chain != ChainETH || d.Asset != "USDC" || !d.Private || d.Counterparty != donee || d.Claimed != VerifyVerified {
		t.Fatalf("parsed %+v, %v", d, errs)
	}
}

// FuzzFundingRules: the kind 16 and 17 parsers never panic, and they accept
// exactly when CheckKind finds nothing.
func FuzzFundingRules(f *testing.F) {
	f.Add(int64(16), `{"addresses":[{"chain":"BTC","address":"`+testBTC+`"}]}`, "chain", "BTC")
	f.Add(int64(16), `{"addresses":[{"chain":"lightning","lnurl":"`+testLNURL+`"}],"suggested_minimum":{"USD":"1"}}`, "chain", "lightning")
	f.Add(int64(17), `{"type":"sent","chain":"SOL","tx_hash":"5VERv8NMvzbJMEkV8xnrLkEaWRtSz9CosKDYjCJjBRnbJLgp8uirBgmQpjKhoR4tjF3ZpRzrFmBV6UjKdiSZkQUW"}`, "chain", "SOL")
	f.Add(int64(17), `{"type":"verification","chain":"ETH","verification":{"status":"failed"}}`, "verified_by_external", strings.Repeat("ab", 32))
	f.Fuzz(func(t *testing.T, kind int64, content, tag, val string) {
		kind = KindFunding + kind&1
		e := &Event{Kind: kind, Content: content, Tags: [][]string{{"p", strings.Repeat("ab", 32)}, {tag, val}}}
		var ok bool
		if kind == KindFunding {
			fd, errs := ParseFunding(e)
			ok = fd != nil && errs == nil
		} else {
			d, errs := ParseDonation(e)
			ok = d != nil && errs == nil
		}
		if ok != (len(CheckKind(e)) == 0) {
			t.Fatalf("parser and CheckKind disagree on %q", content)
		}
	})
}

// TestCapacityNetworkSample: the live network's own kind 22 reports have
// §13.7.2's shape; the seed's example does too.
func TestCapacityNetworkSample(t *testing.T) {
	b, err := os.ReadFile("../testdata/vectors/anp2-network-sample.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range bytes.Split(b, []byte("\n")) {
		var e Event
		if json.Unmarshal(line, &e) != nil || e.Kind != KindCapacity {
			continue
		}
		n++
		if r, probs := ParseCapacity(e.Content); r == nil || probs != nil {
			t.Fatalf("%s: %v", e.ID, probs)
		}
	}
	if n == 0 {
		t.Fatal("no kind 22 in the sample")
	}
	seed := `{"period":"2026-05-01..2026-05-18","donations_received_usd":"425.00","infra_costs_usd":"180.00","upgrades":[{"date":"2026-05-10","item":"RAM 32GB → 64GB","cost_usd":"120.00"}],"capacity":{"max_req_per_sec":1200,"current_active_agents":342,"storage_gb":18.4},"backlog":[{"item":"GPU node","estimated_usd":"800.00"}]}`
	r, probs := ParseCapacity(seed)
	if probs != nil || r.Upgrades[0].CostUSD != "120.00" || r.Backlog[0].EstimatedUSD != "800.00" {
		t.Fatalf("seed example: %+v %v", r, probs)
	}
	if _, probs := ParseCapacity(`{"period":"x"}`); len(probs) != 6 {
		t.Fatalf("an empty report: %v", probs)
	}
}

func FuzzParseCapacity(f *testing.F) {
	f.Add(`{"period":"a..b","donations_received_usd":"1","infra_costs_usd":2,"upgrades":[{"date":"d","item":"i","cost_usd":"3"}],"capacity":{"storage_gb":1},"backlog":[{"item":"x","estimated_usd":"4"}]}`)
	f.Add(`{"upgrades":[1,{}],"backlog":null}`)
	f.Fuzz(func(t *testing.T, content string) {
		r, probs := ParseCapacity(content)
		if (r == nil) == (len(probs) == 0) {
			t.Fatalf("report %v with problems %v", r, probs)
		}
	})
}
