package client_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/anp2net/relay/client"
	"github.com/anp2net/relay/protocol"
)

// publishPosts publishes n posts in topic, several per second of the
// relay clock, and returns their ids.
func publishPosts(t *testing.T, c *client.Client, topic string, n int) map[string]bool {
	t.Helper()
	ids := map[string]bool{}
	var evs []*protocol.Event
	for i := range n {
		e := client.PostEvent(fmt.Sprintf("%s post %d of %d", topic, i, n), topic)
		e.CreatedAt = c.Now().Unix() - int64(i/7) // 7 events share each second
		evs = append(evs, e)
	}
	res, err := c.SendAll(context.Background(), evs...)
	if err != nil || res.Accepted != n {
		t.Fatalf("publish: %+v %v", res, err)
	}
	for _, e := range evs {
		ids[e.ID] = true
	}
	return ids
}

// Pages give each event exactly once, in (created_at, id) descending
// order, even when a page boundary falls inside one second.
func TestPagerNeverMissesOrRepeats(t *testing.T) {
	_, c := startRelay(t)
	want := publishPosts(t, c, "paging", 53)
	ctx := context.Background()
	for _, size := range []int{1, 5, 7, 10, 100} {
		p := c.Pages(client.Filter{Tags: map[string][]string{"t": {"paging"}}, Limit: size})
		got := map[string]bool{}
		var prev *protocol.Event
		for {
			page, err := p.Next(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if page == nil {
				break
			}
			if len(page) > size {
				t.Fatalf("size %d: page of %d", size, len(page))
			}
			for _, e := range page {
				if got[e.ID] {
					t.Fatalf("size %d: %s repeated", size, e.ID)
				}
				if prev != nil && !protocol.Less(e, prev) {
					t.Fatalf("size %d: out of order", size)
				}
				got[e.ID], prev = true, e
			}
		}
		if len(got) != len(want) {
			t.Fatalf("size %d: %d of %d events", size, len(got), len(want))
		}
	}
}

// Scan reads the log in seq order from a cursor, and continues from the
// cursor it returns.
func TestScanBySeq(t *testing.T) {
	_, c := startRelay(t)
	want := publishPosts(t, c, "scan", 20)
	ctx := context.Background()
	f := client.Filter{Tags: map[string][]string{"t": {"scan"}}}
	got := map[string]bool{}
	var last int64
	cursor, err := c.Scan(ctx, f, 0, func(it client.Item) error {
		if it.Seq <= last || got[it.Event.ID] {
			t.Fatalf("seq %d after %d", it.Seq, last)
		}
		last, got[it.Event.ID] = it.Seq, true
		return nil
	})
	if err != nil || len(got) != len(want) {
		t.Fatalf("scan: %d of %d, %v", len(got), len(want), err)
	}
	more := publishPosts(t, c, "scan", 3)
	n := 0
	if _, err := c.Scan(ctx, f, cursor, func(it client.Item) error {
		if !more[it.Event.ID] {
			t.Fatalf("scan from %d gave an old event", cursor)
		}
		n++
		return nil
	}); err != nil || n != 3 {
		t.Fatalf("second scan: %d, %v", n, err)
	}
}

// AsOf reads the log as it was: an event created later is not there.
func TestQueryAsOf(t *testing.T) {
	r, c := startRelay(t)
	ctx := context.Background()
	old := client.PostEvent("old", "asof")
	old.CreatedAt = r.Clock.Now().Unix() - 100
	if _, err := c.Send(ctx, old); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Send(ctx, client.PostEvent("new", "asof")); err != nil {
		t.Fatal(err)
	}
	f := client.Filter{Tags: map[string][]string{"t": {"asof"}}}
	all, err := c.Query(ctx, f)
	if err != nil || len(all) != 2 {
		t.Fatalf("now: %d %v", len(all), err)
	}
	then, err := c.Query(ctx, f, client.AsOf(old.CreatedAt))
	if err != nil || len(then) != 1 || then[0].ID != old.ID {
		t.Fatalf("as_of: %v %v", then, err)
	}
	st, err := c.Stats(ctx)
	if err != nil || st.Events < 2 {
		t.Fatalf("stats %+v %v", st, err)
	}
	if _, err := c.State(ctx, client.AsOf(old.CreatedAt)); err != nil {
		t.Fatal(err)
	}
}

// A subscription over each transport survives dropped connections: every
// event arrives once, in seq order.
func TestSubscriptionResumesAfterDrops(t *testing.T) {
	for _, tr := range []string{client.TransportWS, client.TransportSSE} {
		t.Run(tr, func(t *testing.T) {
			r, pub := startRelay(t)
			proxy := newDropProxy(t, r.URL)
			c := client.New(proxy.URL())
			c.HTTP = &http.Client{Transport: &http.Transport{}} // its own connections
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			sub := c.Subscribe(ctx, client.Filter{Kinds: []int64{1}}, client.FromNow, client.SubOptions{Transport: tr, Buffer: 1})
			defer sub.Close()
			want := map[string]bool{}
			got := map[string]bool{}
			var last int64
			next := func() {
				it, ok := <-sub.Events()
				if !ok {
					t.Fatalf("subscription ended: %v", sub.Err())
				}
				if got[it.Event.ID] || it.Seq <= last {
					t.Fatalf("duplicate or out of order: seq %d after %d", it.Seq, last)
				}
				got[it.Event.ID], last = true, it.Seq
			}
			for round := range 4 {
				for id := range publishPosts(t, pub, fmt.Sprintf("round%d", round), 10) {
					want[id] = true
				}
				for range 3 {
					next()
				}
				proxy.Drop() // drop the connection mid-stream: 7 of this round still to come
			}
			for len(got) < len(want) {
				next()
			}
			if sub.Reconnects() < 1 {
				t.Errorf("%d reconnects", sub.Reconnects())
			}
			if sub.Transport() != tr {
				t.Errorf("transport %q", sub.Transport())
			}
		})
	}
}
