package client_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/anp2net/relay/client"
	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay"
	"github.com/anp2net/relay/relay/directory"
	"github.com/anp2net/relay/relay/dms"
	"github.com/anp2net/relay/relay/relaytest"
	"github.com/anp2net/relay/relay/stream"
	"github.com/anp2net/relay/relay/ws"
)

// startRelay runs an in-process relay whose PoW rule is the network's
// (12 bits on kinds 0 and 50 whatever the date), and returns it with a
// client signing as a fresh agent on the relay's clock.
func startRelay(t *testing.T) (*relaytest.Relay, *client.Client) {
	t.Helper()
	mods := []relay.Module{stream.NewModule(), ws.NewModule(ws.Options{}), directory.NewModule(), dms.NewModule()}
	r := relaytest.Start(t, mods, func(cfg *relay.Config) {
		cfg.Checker.PoW = protocol.DefaultPoWPolicy()
		cfg.Checker.PoW.ActiveFrom = 0
	})
	return r, agentOn(t, r)
}

func agentOn(t *testing.T, r *relaytest.Relay) *client.Client {
	t.Helper()
	id, err := client.GenerateIdentity()
	if err != nil {
		t.Fatal(err)
	}
	c := client.NewAgent(r.URL, id)
	c.Now = r.Clock.Now
	return c
}

const hexA = "0000000000000000000000000000000000000000000000000000000000000001"

// Every builder's event passes the dry run with no violation, is accepted
// by the relay, and verifies (id and libsodium signature rules).
func TestBuildersAreAccepted(t *testing.T) {
	r, c := startRelay(t)
	ctx := context.Background()
	other, _ := client.GenerateIdentity()
	post := client.PostEvent("hello <world> & more", "lobby")
	if _, err := c.Send(ctx, post); err != nil {
		t.Fatal(err)
	}
	req := client.TaskRequestEvent(client.TaskRequest{Capability: "text.reverse", Input: map[string]string{"text": "abc"},
		Deadline: r.Clock.Now().Unix() + 600, Reward: client.CreditReward(10)})
	if _, err := c.Send(ctx, req); err != nil {
		t.Fatal(err)
	}
	app, err := client.AppEvent(1500, "demo.note.v1", map[string]any{"note": "x"}, []string{"t", "demo"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.AppEvent(42, "x", nil); err == nil {
		t.Error("AppEvent accepted kind 42")
	}
	built := map[string]*protocol.Event{
		"profile":    client.ProfileEvent(client.Profile{Name: "tester", Description: "builds", Languages: []string{"en"}}),
		"reply":      client.ReplyEvent("re", post.ID, post.ID, post.AgentID),
		"capability": client.CapabilityEvent(client.Capability{Name: "text.reverse", Description: "reverses", Price: "free"}),
		"knowledge":  client.KnowledgeEvent(client.Knowledge{Claim: "water is wet", Confidence: 0.9, Sources: []client.Source{{URL: "https://example.org"}}, Topics: []string{"facts"}}),
		"vote":       client.VoteEvent(other.AgentID(), 0.5, "helpful"),
		"flag":       client.FlagEvent(post.ID, post.AgentID, "spam", "test"),
		"subscribe":  client.SubscribeEvent([]string{other.AgentID()}, []string{"lobby"}, "follow", false),
		"revoke":     client.RevokeEvent(post.ID),
		"announce":   client.RelayAnnounceEvent("https://relay.example", "main"),
		"beat":       client.BeatEvent("ok", 12, ""),
		"checkpoint": client.CheckpointEvent(client.Checkpoint{CheckpointID: "cp-1", StateHash: hexA, EventCount: 1, AsOf: r.Clock.Now().Unix() - 60}),
		"rollback":   client.RollbackEvent("cp-1", "test"),
		"ban":        client.BanEvent(other.AgentID(), "test"),
		"beacon":     client.BeaconEvent(client.Beacon{Intent: "seek", About: "a translator", Topics: []string{"lobby"}, CapWanted: []string{"text.translate"}}),
		"funding":    client.FundingEvent([]client.FundingAddress{{Chain: "BTC", Address: "bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq"}}, map[string]any{"purpose": "hosting"}),
		"donation":   client.DonationEvent(client.Donation{Type: "sent", Chain: "BTC", TxHash: hexA, Amount: "0.001", Peer: other.AgentID()}),
		"pip":        client.PIPEvent("PIP-900", "a test proposal", "https://example.org/impl", "draft", nil),
		"destruct":   client.SelfDestructEvent(r.Clock.Now().Unix()+3600, "test"),
		"capacity":   client.CapacityEvent(map[string]any{"period": "2025-01-01..2025-01-31", "infra_costs_usd": "10"}),
		"cache":      client.CacheInvalidateEvent("edited", post.ID),
		"act":        client.ActEvent("freeze_network", map[string]any{"reason": "test"}),
		"deadman":    client.DeadManEvent(map[string]any{"act": "unfreeze"}),
		"app":        app,
		"accept":     client.TaskAcceptEvent(req.ID, req.AgentID, "text.reverse", "0", 0),
		"result":     client.TaskResultEvent(client.TaskResult{TaskID: req.ID, AcceptID: hexA, Requester: req.AgentID, Output: "cba"}),
		"verify":     client.TaskVerifyEvent(req.ID, hexA, other.AgentID(), "passed", 1, "ok"),
		"payment":    client.PaymentEvent(client.Payment{TaskID: req.ID, Provider: other.AgentID(), PaymentMethod: "anp2_credit", Amount: "10", Currency: "credit"}),
		"cancel":     client.TaskCancelEvent(req.ID, "changed my mind"),
		"raw18":      client.Draft(18, "anything"),
	}
	dm, err := client.SealDM(c.Key, other.AgentID(), []byte("psst"), nil)
	if err != nil {
		t.Fatal(err)
	}
	built["dm"] = dm
	cp := built["checkpoint"]
	cosigner, _ := client.GenerateIdentity()
	if err := client.Cosign(cp, cosigner); err != nil {
		t.Fatal(err)
	}
	for name, e := range built {
		dr, err := c.DryRun(ctx, e)
		if err != nil {
			t.Fatalf("%s: dry run: %v", name, err)
		}
		if !dr.Valid || len(dr.Violations) > 0 {
			t.Errorf("%s: dry run %v", name, dr.Violations)
			continue
		}
		if err := client.VerifyEvent(e); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if _, err := c.Send(ctx, e); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	for _, e := range []*protocol.Event{built["profile"], req} {
		if n := protocol.LeadingZeroBits(e.ComputeID()); n < client.MinPoW {
			t.Errorf("kind %d mined to %d bits", e.Kind, n)
		}
	}
}

// A dry run reports every violation at once, and a batch judges each
// event alone.
func TestDryRunAndBatch(t *testing.T) {
	r, c := startRelay(t)
	ctx := context.Background()
	bad := client.Draft(protocol.KindTrustVote, `{"score": 7}`) // no p tag, score out of range
	dr, err := c.DryRun(ctx, bad)
	if err != nil {
		t.Fatal(err)
	}
	if dr.Valid || !strings.Contains(strings.Join(dr.Codes(), ","), protocol.CodeInvalidScore) ||
		!strings.Contains(strings.Join(dr.Codes(), ","), protocol.CodeMissingTag) {
		t.Fatalf("dry run: %+v", dr)
	}
	unmined := client.Draft(protocol.KindProfile, `{"name":"x"}`)
	unmined.AgentID, unmined.CreatedAt = c.AgentID(), r.Clock.Now().Unix()
	unmined.Sign(c.Key) // signed without the PoW Sign would mine
	res, err := c.SendAll(ctx, client.PostEvent("one"), bad, unmined, client.PostEvent("two"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Accepted != 2 || res.Rejected != 2 || res.Results[2].Code != "pow_required" {
		t.Fatalf("batch: %+v", res)
	}
	_, err = c.Send(ctx, client.Draft(protocol.KindTrustVote, `{"score": 7}`))
	var ce *client.Error
	if !asError(err, &ce) || ce.Status != http.StatusBadRequest {
		t.Fatalf("bad vote: %v", err)
	}
}

// Signing reproduces the shared vectors' ids and signatures byte for byte,
// and VerifyEvent rejects exactly the invalid ones.
func TestVectors(t *testing.T) {
	f, err := os.Open("../testdata/vectors/events.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	n := 0
	for sc.Scan() {
		var v struct {
			Name   string          `json:"name"`
			Seed   string          `json:"secret_seed_hex"`
			Event  *protocol.Event `json:"event"`
			Valid  bool            `json:"valid"`
			Reason string          `json:"reason"`
		}
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			t.Fatal(err)
		}
		n++
		err := client.VerifyEvent(v.Event)
		if !v.Valid && err == nil && v.Reason == "pow" {
			// Not an over-claim: the relay's mandatory minimum on kinds
			// 0 and 50, a policy rather than a property of the event.
			pol := protocol.DefaultPoWPolicy()
			pol.ActiveFrom = 0
			err = pol.Check(v.Event, v.Event.ComputeID())
		}
		if v.Valid != (err == nil) {
			t.Errorf("%s: VerifyEvent %v, valid %v", v.Name, err, v.Valid)
		}
		if !v.Valid {
			continue
		}
		id, err := client.IdentityFromSeedHex(v.Seed)
		if err != nil {
			t.Fatal(err)
		}
		e := &protocol.Event{CreatedAt: v.Event.CreatedAt, Kind: v.Event.Kind, Tags: v.Event.Tags, Content: v.Event.Content}
		if err := client.Sign(context.Background(), id, e, r0); err != nil {
			t.Fatal(err)
		}
		if e.ID != v.Event.ID || e.Sig != v.Event.Sig {
			t.Errorf("%s: signed %s/%s, want %s/%s", v.Name, e.ID, e.Sig, v.Event.ID, v.Event.Sig)
		}
	}
	if n < 10 {
		t.Fatalf("only %d vectors", n)
	}
}
