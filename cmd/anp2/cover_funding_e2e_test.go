package main

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/tasks/taskstest"
)

// TestCoverUnvalidatedChainFunding: a real relay process stores a kind 16
// and a kind 17 on a chain it cannot validate (DOGE; seed §13.1 "etc.",
// §13.3.3 "MUST always accept kind 17"), lists both in /funding marked
// unvalidated_chain, still checks the chains it knows, and anp2 replay
// reproduces /state with them.
func TestCoverUnvalidatedChainFunding(t *testing.T) {
	a := taskstest.Pool(2)
	donee, donor := a[0], a[1]
	p := startProc(t, filepath.Join(t.TempDir(), "chains.db"))
	now := time.Now().Unix()
	post := func(e *protocol.Event) (int, map[string]any) {
		return httpJSON(t, "POST", p.base+"/events", protocol.AppendJSON(nil, e))
	}
	const doge = "DH5yaieqoZN36fDVciNyRueRGvGLR3mr7L"
	decl := donee.Sign(protocol.KindFunding, now, map[string]any{"addresses": []any{
		map[string]any{"chain": "BTC", "address": "bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq"},
		map[string]any{"chain": "doge", "address": doge}}}, []string{"chain", "BTC"}, []string{"chain", "DOGE"})
	if st, body := post(decl); st != 200 {
		t.Fatalf("kind 16 with DOGE: %d %v", st, body)
	}
	gift := donor.Sign(protocol.KindDonation, now, map[string]any{"type": "sent", "chain": "DOGE", "tx_hash": "any-format-the-chain-uses",
		"amount": "42", "to_address": doge}, []string{"p", donee.ID}, []string{"chain", "DOGE"})
	if st, body := post(gift); st != 200 {
		t.Fatalf("kind 17 on DOGE: %d %v", st, body)
	}
	// A chain the relay knows keeps its checks.
	badBTC := donor.Sign(protocol.KindDonation, now, map[string]any{"type": "sent", "chain": "BTC", "tx_hash": "not-a-txid"},
		[]string{"p", donee.ID}, []string{"chain", "BTC"})
	if st, body := post(badBTC); st != 400 || body["code"] != protocol.CodeInvalidDonation {
		t.Fatalf("malformed BTC tx_hash: %d %v", st, body)
	}
	_, fund := httpJSON(t, "GET", p.base+"/funding/"+donee.ID, nil)
	addrs, _ := fund["addresses"].([]any)
	ds, _ := fund["donations"].([]any)
	if len(addrs) != 2 || addrs[1].(map[string]any)["chain"] != "DOGE" || addrs[1].(map[string]any)["unvalidated_chain"] != true ||
		addrs[0].(map[string]any)["unvalidated_chain"] != nil {
		t.Fatalf("addresses: %v", addrs)
	}
	if len(ds) != 1 || ds[0].(map[string]any)["unvalidated_chain"] != true || ds[0].(map[string]any)["verification"].(map[string]any)["status"] != "unverified" ||
		fund["received_unvalidated_chain_count"] != 1.0 {
		t.Fatalf("donations: %v", fund)
	}
	at := "--at=" + strconv.FormatInt(time.Now().Unix(), 10)
	if out := runCLI(t, "replay", at, "--compare", p.base, p.base); !strings.Contains(out, "match: ") {
		t.Fatalf("replay: %s", out)
	}
}
