package client_test

import (
	"context"
	"testing"
	"time"

	"github.com/anp2net/relay/client"
	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay"
	"github.com/anp2net/relay/relay/directory"
	"github.com/anp2net/relay/relay/relaytest"
	"github.com/anp2net/relay/relay/stream"
)

// Where the WebSocket upgrade is refused (a relay or proxy without /ws),
// a subscription falls back to the SSE stream.
func TestSubscriptionFallsBackToSSE(t *testing.T) {
	r := relaytest.Start(t, []relay.Module{stream.NewModule(), directory.NewModule()})
	c := agentOn(t, r)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sub := c.Subscribe(ctx, client.Filter{Kinds: []int64{1}}, client.FromNow, client.SubOptions{})
	defer sub.Close()
	e := client.PostEvent("over sse", "rooms-test")
	if _, err := c.Send(ctx, e); err != nil {
		t.Fatal(err)
	}
	select {
	case it := <-sub.Events():
		if it.Event.ID != e.ID || sub.Transport() != client.TransportSSE {
			t.Fatalf("got %s over %q", it.Event.ID, sub.Transport())
		}
	case <-ctx.Done():
		t.Fatalf("nothing arrived: %v", sub.Err())
	}
	rooms, err := c.Rooms(ctx)
	if err != nil || len(rooms) != 1 || rooms[0].Topic != "rooms-test" {
		t.Fatalf("rooms %+v %v", rooms, err)
	}
}

// A pool follows the home relays an agent names in its profile.
func TestPoolFollowsHomeRelays(t *testing.T) {
	home, _ := startRelay(t)
	other, c := startRelay(t)
	ctx := context.Background()
	prof := client.ProfileEvent(client.Profile{Name: "roamer", Extra: map[string]any{"home_relays": []string{home.URL}}})
	if _, err := c.Send(ctx, prof); err != nil {
		t.Fatal(err)
	}
	pool := client.NewPool(nil, other.URL)
	added, err := pool.FollowHomeRelays(ctx, c.AgentID())
	if err != nil || len(added) != 1 || added[0] != home.URL || len(pool.Clients()) != 2 {
		t.Fatalf("followed %v, %v; pool %d", added, err, len(pool.Clients()))
	}
}

// Mining on several workers meets the target, and stops when asked.
func TestMinePoW(t *testing.T) {
	id, _ := client.GenerateIdentity()
	e := client.PostEvent("mine me")
	e.AgentID, e.CreatedAt = id.AgentID(), 1000
	if err := client.MinePoW(context.Background(), e, 16, 4); err != nil {
		t.Fatal(err)
	}
	if n := protocol.LeadingZeroBits(e.ComputeID()); n < 16 {
		t.Fatalf("%d bits", n)
	}
	if d, _, _ := protocol.DeclaredPoW(e); d != 16 {
		t.Fatalf("declared %d", d)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := client.MinePoW(ctx, e, 200, 0); err == nil {
		t.Fatal("a cancelled 200-bit search returned")
	}
}

// A DM sent through the SDK reaches the recipient's inbox and opens for
// it alone.
func TestSendDM(t *testing.T) {
	r, alice := startRelay(t)
	bob := agentOn(t, r)
	ctx := context.Background()
	if _, err := alice.SendDM(ctx, bob.AgentID(), []byte("hi bob")); err != nil {
		t.Fatal(err)
	}
	evs, err := bob.Inbox(ctx, bob.AgentID(), nil)
	if err != nil || len(evs) != 1 {
		t.Fatalf("inbox %v %v", evs, err)
	}
	msgs, dropped := client.OpenAll(bob.Key, evs)
	if dropped != 0 || len(msgs) != 1 || string(msgs[0].Text) != "hi bob" {
		t.Fatalf("opened %+v, dropped %d", msgs, dropped)
	}
	out, err := alice.Outbox(ctx, alice.AgentID(), nil)
	if err != nil || len(out) != 1 {
		t.Fatalf("outbox %v %v", out, err)
	}
}
