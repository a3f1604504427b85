package funding_test

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay"
	"github.com/anp2net/relay/relay/funding"
	"github.com/anp2net/relay/relay/relaytest"
	"github.com/anp2net/relay/relay/state"
	"github.com/anp2net/relay/tasks/taskstest"
)

const (
	btcAddr = "bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t4"
	ethAddr = "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed"
	lnurl   = "lnurl1dp68gurn8ghj7um9wfmxjcm99e3k7mf0v9cxj0m385ekvcenxc6r2c35xvukxefcv5mkvv34x5ekzd3ev56nyd3hxqurzepexejxxepnxscrvwfnv9nxzcn9xq6xyefhvgcxxcmyxymnserxfq5fns"
)

func tx(n int) string { return "0x" + strings.Repeat(string(rune('a'+n)), 64) }

// fundingFlow is a donee's declaration, three donors' attestations (one of
// them private, one on Lightning, one claiming its own verification), the
// donee's acks, a third party's re-attestation and some noise.
func fundingFlow(at int64) (alice, bob, carol, dave, vera taskstest.Agent, evs []*protocol.Event) {
	a := taskstest.Pool(5)
	alice, bob, carol, dave, vera = a[0], a[1], a[2], a[3], a[4]
	decl := map[string]any{"addresses": []any{
		map[string]any{"chain": "BTC", "address": btcAddr},
		map[string]any{"chain": "ETH", "address": ethAddr, "tokens": []string{"USDC"}},
		map[string]any{"chain": "lightning", "lnurl": lnurl},
	}, "purpose": "hosting", "transparency_url": "https://alice.example/costs", "disclose_totals": true}
	p := []string{"p", alice.ID}
	eth, ln := []string{"chain", "ETH"}, []string{"chain", "lightning"}
	sent := func(who taskstest.Agent, at int64, c map[string]any, tags ...[]string) *protocol.Event {
		c["type"] = "sent"
		return who.Sign(protocol.KindDonation, at, c, append([][]string{p}, tags...)...)
	}
	bobSent := sent(bob, at+10, map[string]any{"chain": "ETH", "tx_hash": tx(1), "amount": "50", "asset": "USDC",
		"verification": map[string]any{"status": "verified", "verified_by": bob.ID, "note": "trust me"}}, eth)
	evs = []*protocol.Event{
		alice.Sign(protocol.KindFunding, at, decl, []string{"chain", "BTC"}, eth, ln),
		bobSent,
		// the same transfer attested twice by bob: one donation
		sent(bob, at+11, map[string]any{"chain": "ETH", "tx_hash": "0x" + strings.ToUpper(tx(1)[2:]), "amount": "50", "asset": "USDC"}, eth),
		sent(carol, at+20, map[string]any{"chain": "ETH", "tx_hash": tx(2), "amount": "1000", "asset": "USDC", "private": true}, eth),
		sent(dave, at+30, map[string]any{"chain": "lightning", "amount": "0.0001", "asset": "BTC"}, ln),
		// alice acknowledges bob's, naming it
		alice.Sign(protocol.KindDonation, at+40, map[string]any{"type": "ack", "chain": "ETH", "tx_hash": tx(1)}, []string{"p", bob.ID}, []string{"e", bobSent.ID}, eth),
		// vera, a third-party verifier, re-attests bob's
		vera.Sign(protocol.KindDonation, at+50, map[string]any{"type": "verification", "chain": "ETH", "verification": map[string]any{"status": "verified"}},
			p, eth, []string{"verified_by_external", bobSent.ID}),
		// bob and alice "re-attest" bob's donation themselves: not external
		bob.Sign(protocol.KindDonation, at+51, map[string]any{"type": "verification", "chain": "ETH", "verification": map[string]any{"status": "verified"}},
			p, eth, []string{"verified_by_external", bobSent.ID}),
		alice.Sign(protocol.KindDonation, at+52, map[string]any{"type": "verification", "chain": "ETH", "verification": map[string]any{"status": "verified"}},
			p, eth, []string{"verified_by_external", bobSent.ID}),
		// alice's attestation to herself counts for nothing
		sent(alice, at+60, map[string]any{"chain": "ETH", "tx_hash": tx(3), "amount": "9999", "asset": "USDC"}, eth),
		// a vote for vera, so her re-attestation carries trust
		bob.Sign(protocol.KindTrustVote, at+70, map[string]any{"score": 1}, []string{"p", vera.ID}),
	}
	return
}

type fundingAnswer struct {
	AgentID            string `json:"agent_id"`
	Received           int    `json:"received_count"`
	Donors             int    `json:"received_unique_donors"`
	Unverified         int    `json:"received_unverified_count"`
	Verified           int    `json:"received_verified_count"`
	Unverifiable       int    `json:"received_unverifiable_count"`
	Acknowledged       int    `json:"acknowledged_count"`
	ExternallyVerified int    `json:"externally_verified_count"`
	TotalUSD           string `json:"total_usd_equivalent"`
	TransparencyURL    string `json:"transparency_url"`
	Addresses          []struct {
		Chain, Address, LNURL string
	} `json:"addresses"`
	Totals    map[string]string `json:"totals_by_asset"`
	Donations []struct {
		EventID      string `json:"event_id"`
		Donor        string `json:"donor"`
		Amount       string `json:"amount"`
		Private      bool   `json:"private"`
		Acknowledged bool   `json:"acknowledged"`
		Attestations int    `json:"attestations"`
		Verification struct {
			Status     string  `json:"status"`
			VerifiedBy *string `json:"verified_by"`
		} `json:"verification"`
		External []struct {
			Verifier string  `json:"verifier"`
			Status   string  `json:"status"`
			Trust    float64 `json:"verifier_trust"`
		} `json:"external_attestations"`
	} `json:"donations"`
	Ignored []struct{ EventID, Reason string } `json:"ignored"`
}

func getFunding(t *testing.T, r *relaytest.Relay, path string) (fundingAnswer, map[string]any) {
	t.Helper()
	ans := r.Do(t, "GET", path, "", nil)
	if ans.Status != 200 {
		t.Fatalf("GET %s: %d %s", path, ans.Status, ans.Body)
	}
	var f fundingAnswer
	if err := json.Unmarshal(ans.Body, &f); err != nil {
		t.Fatal(err)
	}
	return f, ans.JSON(t)
}

func TestDonationFlowThroughRelay(t *testing.T) {
	r := relaytest.Start(t, []relay.Module{funding.NewModule(funding.Options{})})
	at := int64(relaytest.VectorTime - 3600)
	alice, bob, _, dave, vera, evs := fundingFlow(at)
	r.PostAll(t, evs, 1)
	trustBefore := r.Do(t, "GET", "/trust/"+alice.ID, "", nil).JSON(t)["weighted_score"]

	f, raw := getFunding(t, r, "/funding/"+alice.ID+"?window=30d")
	if f.Received != 3 || f.Donors != 3 || f.Unverified != 2 || f.Unverifiable != 1 || f.Verified != 0 || f.Acknowledged != 1 || f.ExternallyVerified != 1 {
		t.Fatalf("counts: %s", mustJSON(raw))
	}
	if f.TransparencyURL != "https://alice.example/costs" || len(f.Addresses) != 3 || f.Addresses[2].LNURL != lnurl {
		t.Fatalf("declaration: %s", mustJSON(raw))
	}
	// carol's private 1000 USDC stays out of every total; bob's 50 counts once.
	if f.TotalUSD != "50.00" || f.Totals["USDC"] != "50" || f.Totals["BTC"] != "0.0001" {
		t.Fatalf("totals: %s", mustJSON(raw))
	}
	for _, d := range f.Donations {
		if d.Verification.VerifiedBy != nil {
			t.Fatalf("a self-claim leaked into the relay's stamp: %s", mustJSON(raw))
		}
		switch d.Donor {
		case bob.ID:
			// bob claimed "verified" himself: the relay says unverified.
			if d.Verification.Status != "unverified" || !d.Acknowledged || d.Attestations != 3 || d.Amount != "50" {
				t.Fatalf("bob's donation: %+v", d)
			}
			if len(d.External) != 1 || d.External[0].Verifier != vera.ID || d.External[0].Status != "verified" || d.External[0].Trust <= 0 {
				t.Fatalf("vera's re-attestation: %+v", d.External)
			}
		case dave.ID:
			if d.Verification.Status != "unverifiable" {
				t.Fatalf("lightning: %+v", d)
			}
		default:
			if !d.Private || d.Amount != "" {
				t.Fatalf("carol's private donation shows its amount: %+v", d)
			}
		}
	}
	if strings.Contains(mustJSON(raw), "trust me") {
		t.Fatal("the donor's self-claim is repeated")
	}
	if len(f.Ignored) != 1 || !strings.Contains(f.Ignored[0].Reason, "itself") {
		t.Fatalf("ignored: %+v", f.Ignored)
	}
	// Donations never change trust (§13.4).
	if after := r.Do(t, "GET", "/trust/"+alice.ID, "", nil).JSON(t)["weighted_score"]; after != trustBefore {
		t.Fatalf("trust moved from %v to %v", trustBefore, after)
	}
	// A window that ends before the donations holds none; one that moves
	// past them forgets them.
	r.Clock.Add(40 * 24 * time.Hour)
	if f, _ := getFunding(t, r, "/funding/"+alice.ID); f.Received != 0 || f.TotalUSD != "0.00" {
		t.Fatalf("after 40 days the 30-day window holds %d", f.Received)
	}
	if f, _ := getFunding(t, r, "/funding/"+alice.ID+"?window=60d"); f.Received != 3 {
		t.Fatalf("60-day window holds %d", f.Received)
	}
}

func TestFundingPublishRules(t *testing.T) {
	r := relaytest.Start(t, []relay.Module{funding.NewModule(funding.Options{})})
	alice := taskstest.NewAgent("alice")
	at := int64(relaytest.VectorTime)
	bad := alice.Sign(protocol.KindFunding, at, map[string]any{"addresses": []any{
		map[string]any{"chain": "BTC", "address": btcAddr},
		map[string]any{"chain": "ETH", "address": "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAeD"},
	}}, []string{"chain", "BTC"}, []string{"chain", "ETH"})
	ans := r.Post(t, bad)
	body := string(ans.Body)
	if ans.Status != 400 || ans.Code(t) != protocol.CodeInvalidAddress || !strings.Contains(body, "content.addresses[1].address") {
		t.Fatalf("bad EIP-55: %d %s", ans.Status, body)
	}
	mismatch := alice.Sign(protocol.KindFunding, at, map[string]any{"addresses": []any{map[string]any{"chain": "BTC", "address": btcAddr}}}, []string{"chain", "SOL"})
	if ans := r.Post(t, mismatch); ans.Status != 400 || ans.Code(t) != protocol.CodeChainTagMismatch {
		t.Fatalf("chain tag mismatch: %d %s", ans.Status, ans.Body)
	}
	if n := r.Count(t); n != 0 {
		t.Fatalf("the log holds %d events after two rejections", n)
	}
	// An unverified attestation is never a rejection.
	d := alice.Sign(protocol.KindDonation, at, map[string]any{"type": "sent", "chain": "BTC", "tx_hash": strings.Repeat("c", 64),
		"verification": map[string]any{"status": "unverified"}}, []string{"p", taskstest.NewAgent("bob").ID}, []string{"chain", "BTC"})
	if ans := r.Post(t, d); ans.Status != 200 {
		t.Fatalf("unverified attestation: %d %s", ans.Status, ans.Body)
	}
	for _, q := range []string{"?window=0d", "?window=abc", "?window=4000d", "?window=30d&window=1d", "?x=1"} {
		if ans := r.Do(t, "GET", "/funding/"+alice.ID+q, "", nil); ans.Status != 400 {
			t.Fatalf("%s: %d", q, ans.Status)
		}
	}
	if ans := r.Do(t, "GET", "/funding/xyz", "", nil); ans.Status != 400 {
		t.Fatalf("bad agent id: %d", ans.Status)
	}
}

// TestFundingDigestIsASetFunction: the relay's /state view and a fold fed
// the same events in random orders (with revocations) agree.
func TestFundingDigestIsASetFunction(t *testing.T) {
	r := relaytest.Start(t, []relay.Module{funding.NewModule(funding.Options{})})
	at := int64(relaytest.VectorTime - 3600)
	_, bob, _, _, _, evs := fundingFlow(at)
	revoke := bob.Sign(protocol.KindRevoke, at+100, "", []string{"e", evs[2].ID})
	evs = append(evs, revoke)
	r.PostAll(t, evs, 1)
	live := r.Do(t, "GET", "/state", "", nil).JSON(t)
	views := live["views"].(map[string]any)
	want, _ := views["funding"].(string)
	if want == "" {
		t.Fatalf("/state has no funding view: %v", views)
	}
	stateAt := int64(live["at"].(float64))
	for seed := range uint64(5) {
		shuffled := append([]*protocol.Event{}, evs...)
		rand.New(rand.NewPCG(seed, 1)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		m := funding.NewModule(funding.Options{})
		st := state.New(state.Options{Folds: relay.Folds([]relay.Module{m})})
		byID := map[string]*protocol.Event{}
		for i, e := range shuffled {
			byID[e.ID] = e
			st.Add(int64(i+1), e, func(id string) *protocol.Event { return byID[id] })
		}
		if got := st.Digest(stateAt).Views["funding"]; got != want {
			t.Fatalf("order %d: funding digest %s, relay's %s", seed, got, want)
		}
	}
	// And the revoked duplicate attestation no longer counts.
	f, _ := getFunding(t, r, "/funding/"+evs[0].AgentID)
	for _, d := range f.Donations {
		if d.Donor == bob.ID && d.Attestations != 2 {
			t.Fatalf("bob's donation after the revoke: %+v", d)
		}
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestExtortionFlagsStillHide: a post that coerces donations is flagged
// with category extortion (§13.5) and hidden like any flagged post.
func TestExtortionFlagsStillHide(t *testing.T) {
	r := relaytest.Start(t, []relay.Module{funding.NewModule(funding.Options{})})
	a := taskstest.Pool(4)
	at := int64(relaytest.VectorTime)
	post := a[0].Sign(protocol.KindPost, at, "no donation, no service: send 50 USDC first")
	evs := []*protocol.Event{post}
	for _, f := range a[1:] {
		evs = append(evs, f.Sign(protocol.KindFlag, at+1, map[string]any{"category": "extortion", "reason": "coerces donations"}, []string{"e", post.ID}))
	}
	r.PostAll(t, evs, 1)
	r.Clock.Add(2 * time.Hour)
	relaytest.Eventually(t, "the extortion post hidden", func() bool {
		m := r.Do(t, "GET", "/events/"+post.ID+"/flags", "", nil).JSON(t)
		flags, _ := m["flags"].([]any)
		return m["visibility"] == "hidden" && len(flags) == 3 && flags[0].(map[string]any)["category"] == "extortion"
	})
}

// TestMirroredInvalidFundingIsExplained: a peer's kind 16 and 17 that break
// the content rules are stored (D15) and /funding says why they do not count.
func TestMirroredInvalidFundingIsExplained(t *testing.T) {
	r := relaytest.Start(t, []relay.Module{funding.NewModule(funding.Options{})})
	a := taskstest.Pool(2)
	alice, bob := a[0], a[1]
	at := int64(relaytest.VectorTime)
	evs := []*protocol.Event{
		alice.Sign(protocol.KindFunding, at, map[string]any{"addresses": []any{map[string]any{"chain": "BTC", "address": "bc1q..."}}}, []string{"chain", "BTC"}),
		bob.Sign(protocol.KindDonation, at, map[string]any{"type": "sent", "chain": "ETH", "tx_hash": "0x..."}, []string{"p", alice.ID}, []string{"chain", "ETH"}),
	}
	for _, e := range evs {
		if ans := r.Post(t, e); ans.Status != 400 {
			t.Fatalf("a direct publish of invalid content: %d %s", ans.Status, ans.Body)
		}
	}
	if acc, rej, err := r.Core.IngestMirrored(context.Background(), evs); err != nil || acc != 2 || rej != 0 {
		t.Fatalf("mirrored: accepted %d rejected %d, %v", acc, rej, err)
	}
	f, raw := getFunding(t, r, "/funding/"+alice.ID)
	if f.Received != 0 || len(f.Addresses) != 0 || raw["invalid_declarations"] != 1.0 || len(f.Ignored) != 1 || !strings.Contains(f.Ignored[0].Reason, "content.tx_hash") {
		t.Fatalf("/funding: %s", mustJSON(raw))
	}
}
