package client_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/anp2net/relay/client"
	"github.com/anp2net/relay/protocol"
)

// A subscription resumes across a relay process killed mid-stream and
// restarted on its database: every event arrives once, in seq order.
func TestSubscriptionSurvivesRelayRestart(t *testing.T) {
	p := startRelayProc(t)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	id, _ := client.GenerateIdentity()
	pub := client.NewAgent(p.URL(), id)
	reader := client.New(p.URL())
	sub := reader.Subscribe(ctx, client.Filter{Kinds: []int64{1}, Authors: []string{id.AgentID()}}, client.FromNow,
		client.SubOptions{Transport: client.TransportWS, Buffer: 1, MaxBackoff: 200 * time.Millisecond})
	defer sub.Close()
	want, got := map[string]bool{}, map[string]bool{}
	var last int64
	next := func() {
		select {
		case it, ok := <-sub.Events():
			if !ok {
				t.Fatalf("subscription ended: %v", sub.Err())
			}
			if got[it.Event.ID] || it.Seq <= last {
				t.Fatalf("duplicate or out of order: seq %d after %d", it.Seq, last)
			}
			got[it.Event.ID], last = true, it.Seq
		case <-ctx.Done():
			t.Fatalf("%d of %d events: %v", len(got), len(want), ctx.Err())
		}
	}
	publish := func(round int) {
		var evs []*protocol.Event
		for i := range 10 {
			evs = append(evs, client.PostEvent(fmt.Sprintf("round %d event %d", round, i)))
		}
		res, err := pub.SendAll(ctx, evs...)
		if err != nil || res.Accepted != 10 {
			t.Fatalf("publish: %+v %v", res, err)
		}
		for _, e := range evs {
			want[e.ID] = true
		}
	}
	for round := range 3 {
		publish(round)
		for range 3 {
			next()
		}
		p.kill() // mid-stream: 7 events of this round not yet read
		p.start()
	}
	for len(got) < len(want) {
		next()
	}
	if sub.Reconnects() < 1 {
		t.Errorf("no reconnection across 3 restarts")
	}
}

// A pool publishes to every relay, and keeps reading and publishing when
// one of them is killed.
func TestPoolFailsOver(t *testing.T) {
	a, b := startRelayProc(t), startRelayProc(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	id, _ := client.GenerateIdentity()
	pool := client.NewPool(id, a.URL(), b.URL())
	first := client.PostEvent("to both", "pool")
	res, err := pool.Send(ctx, first)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil || !r.Result.Accepted {
			t.Fatalf("%s: %+v %v", r.Relay, r.Result, r.Err)
		}
	}
	a.kill()
	second := client.PostEvent("after a died", "pool")
	res, err = pool.Send(ctx, second)
	if err != nil {
		t.Fatal(err)
	}
	failed := 0
	for _, r := range res {
		if r.Err != nil {
			failed++
		}
	}
	if failed != 1 {
		t.Fatalf("one relay down, %d failed: %+v", failed, res)
	}
	evs, err := pool.Query(ctx, client.Filter{Tags: map[string][]string{"t": {"pool"}}})
	if err != nil || len(evs) != 2 {
		t.Fatalf("query through the pool: %d events, %v", len(evs), err)
	}
	if pool.Best().Base != b.URL() {
		t.Fatalf("best is %s after %s died", pool.Best().Base, a.URL())
	}
}
