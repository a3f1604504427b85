package discovery_test

import (
	"testing"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay"
	"github.com/anp2net/relay/relay/directory"
	"github.com/anp2net/relay/relay/discovery"
	"github.com/anp2net/relay/relay/relaytest"
	"github.com/anp2net/relay/tasks/taskstest"
)

type followsAnswer struct {
	Count         int                `json:"count"`
	Subscriptions []discovery.Follow `json:"subscriptions"`
	Followers     []discovery.Follow `json:"followers"`
	Agents        []string           `json:"agents"`
	Topics        []string           `json:"topics"`
	FollowerCount int                `json:"follower_count"`
}

func TestSubscriptions(t *testing.T) {
	r, _ := start(t)
	a := taskstest.Pool(4)
	alice, bob, carol, dave := a[0], a[1], a[2], a[3]
	now := int64(relaytest.VectorTime)
	follow := alice.Sign(protocol.KindSubscribe, now-50, map[string]any{"reason": "trusted source for jp market data"},
		[]string{"p", bob.ID}, []string{"t", "market.jp"})
	withdraw := alice.Sign(protocol.KindSubscribe, now-10, map[string]any{"withdraw": true}, []string{"p", bob.ID})
	stale := alice.Sign(protocol.KindSubscribe, now-20, "", []string{"p", bob.ID}) // older than the withdrawal, arrives last
	carolFollows := carol.Sign(protocol.KindSubscribe, now-30, "", []string{"p", bob.ID})
	r.PostAll(t, []*protocol.Event{follow, withdraw, carolFollows, stale}, 1)
	if ans := r.Post(t, dave.Sign(protocol.KindSubscribe, now, `{"withdraw":"yes"}`, []string{"p", bob.ID})); ans.Status != 400 || ans.Code(t) != protocol.CodeInvalidSubscription {
		t.Fatalf("bad kind 8: %d %s", ans.Status, ans.Body)
	}

	var got followsAnswer
	get(t, r, "/agents/"+alice.ID+"/subscriptions", &got)
	if got.Count != 1 || got.Subscriptions[0].TargetType != "topic" || got.Subscriptions[0].Target != "market.jp" ||
		got.Subscriptions[0].Reason != "trusted source for jp market data" || got.Subscriptions[0].EventID != follow.ID {
		t.Fatalf("alice's subscriptions: %+v", got)
	}
	get(t, r, "/agents/"+alice.ID+"/subscriptions?include_withdrawn=true", &got)
	if got.Count != 2 || got.Subscriptions[0].Target != bob.ID || !got.Subscriptions[0].Withdrawn || got.Subscriptions[0].EventID != withdraw.ID {
		t.Fatalf("with withdrawn: %+v", got)
	}
	get(t, r, "/agents/"+bob.ID+"/followers", &got)
	if got.Count != 1 || got.Followers[0].Follower != carol.ID {
		t.Fatalf("bob's followers: %+v", got)
	}
	get(t, r, "/api/subscriptions/"+alice.ID, &got)
	if len(got.Agents) != 0 || len(got.Topics) != 1 || got.Topics[0] != "market.jp" {
		t.Fatalf("/subscriptions/alice: %+v", got)
	}
	get(t, r, "/subscriptions/"+bob.ID, &got)
	if got.FollowerCount != 1 || got.Count != 0 {
		t.Fatalf("/subscriptions/bob: %+v", got)
	}
	get(t, r, "/topics/market.jp/followers", &got)
	if got.Count != 1 || got.Followers[0].Follower != alice.ID {
		t.Fatalf("topic followers: %+v", got)
	}

	// Revoking the follow withdraws it.
	r.PostAll(t, []*protocol.Event{carol.Sign(protocol.KindRevoke, now, "", []string{"e", carolFollows.ID})}, 1)
	get(t, r, "/agents/"+bob.ID+"/followers", &got)
	if got.Count != 0 {
		t.Fatalf("after revocation: %+v", got)
	}

	var st struct {
		Views map[string]string `json:"views"`
	}
	get(t, r, "/state", &st)
	if len(st.Views["discovery"]) != 64 {
		t.Fatalf("/state views: %+v", st.Views)
	}
	refuse(t, r, "/agents/xyz/followers", 400, "invalid_parameter")
	refuse(t, r, "/agents/"+bob.ID+"/followers?include_withdrawn=maybe", 400, "invalid_parameter")
	refuse(t, r, "/subscriptions/"+bob.ID+"?limit=3", 400, "unknown_parameter")
}

// TestDirectoryRows: the directory's agent rows carry discoverability and
// follow counts.
func TestDirectoryRows(t *testing.T) {
	r := relaytest.Start(t, []relay.Module{discovery.NewModule(), directory.NewModule()})
	a := taskstest.Pool(2)
	now := int64(relaytest.VectorTime)
	r.PostAll(t, []*protocol.Event{
		a[0].Sign(protocol.KindProfile, now-9, map[string]any{"name": "a", "discoverability": "topic_only"}),
		a[0].Sign(protocol.KindSubscribe, now-8, "", []string{"p", a[1].ID}, []string{"t", "x"}),
		a[1].Sign(protocol.KindPost, now-7, "hello"),
	}, 1)
	var row struct {
		Discoverability string `json:"discoverability"`
		Following       int    `json:"following_count"`
		Followers       int    `json:"follower_count"`
	}
	get(t, r, "/agents/"+a[0].ID, &row)
	if row.Discoverability != "topic_only" || row.Following != 2 || row.Followers != 0 {
		t.Fatalf("follower's row: %+v", row)
	}
	get(t, r, "/agents/"+a[1].ID, &row)
	if row.Discoverability != "public" || row.Following != 0 || row.Followers != 1 {
		t.Fatalf("followed agent's row: %+v", row)
	}
}
