package governance_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/governance"
	"github.com/anp2net/relay/relay/relaytest"
	"github.com/anp2net/relay/tasks/taskstest"
)

// TestSeedFreeze drives the emergency freeze through a real relay: a 1-of-3
// freeze is stored and ignored; a 2-of-3 freeze makes the next publish a
// 503 network_frozen with Retry-After while reads work and the log is
// untouched; a replayed copy is ignored; an unfreeze restores publishing.
func TestSeedFreeze(t *testing.T) {
	k := newKeys()
	r := start(t, k)
	alice := taskstest.NewAgent("alice")
	now := func() int64 { return r.Clock.Now().Unix() }
	post(t, r, alice.Sign(protocol.KindPost, now(), "before"), 200, "")

	weak := act(t, k.seed[0], now(), map[string]any{"act": "freeze_network", "target": "global", "reason": "one key only"}, nil)
	post(t, r, weak, 200, "")
	post(t, r, alice.Sign(protocol.KindPost, now(), "after a 1-of-3 freeze"), 200, "")

	freeze := act(t, k.seed[0], now(), map[string]any{"act": "freeze_network", "target": "global", "reason": "injection wave"}, k.seed[1:2])
	post(t, r, freeze, 200, "")
	before := r.Count(t)
	ans := post(t, r, alice.Sign(protocol.KindPost, now(), "during freeze"), 503, governance.CodeFrozen)
	if ra, _ := strconv.Atoi(ans.Header.Get("Retry-After")); ra < 1 || ra > 300 {
		t.Fatalf("Retry-After %q", ans.Header.Get("Retry-After"))
	}
	// A dry run names the freeze; reads work; nothing was stored.
	dry := r.Do(t, "POST", "/events/dry-run", "application/json", protocol.AppendJSON(nil, alice.Sign(protocol.KindPost, now(), "dry")))
	if dry.Status != 200 || !contains(dry.JSON(t)["violations"], governance.CodeFrozen) {
		t.Fatalf("dry run: %s", dry.Body)
	}
	if got := r.Do(t, "GET", "/events?kinds=1", "", nil); got.Status != 200 {
		t.Fatalf("read during freeze: %d", got.Status)
	}
	// A batch is gated item by item, with the same status and code.
	batch := []byte("[" + string(protocol.AppendJSON(nil, alice.Sign(protocol.KindPost, now(), "batched"))) + "]")
	if b := r.Do(t, "POST", "/events/batch", "application/json", batch); b.Status != 200 ||
		!strings.Contains(string(b.Body), `"status":503`) || !strings.Contains(string(b.Body), governance.CodeFrozen) {
		t.Fatalf("batch during freeze: %d %s", b.Status, b.Body)
	}
	if r.Count(t) != before {
		t.Fatal("a refused publish changed the log")
	}
	// Someone copies the freeze's content and cosignatures onto a new
	// event: it passes the gate (it is signed under the rule) and is
	// logged as a replay.
	replay := act(t, k.seed[2], now()+1, map[string]any{"act": "freeze_network", "target": "global", "reason": "injection wave"}, k.seed[1:2])
	post(t, r, replay, 200, "")

	var st governance.Sovereign
	getJSON(t, r, "/sovereign/state", &st)
	if !st.Frozen || st.FrozenBy != "seed" || st.FreezeAct != freeze.ID || st.FrozenUntil != freeze.CreatedAt+24*3600 {
		t.Fatalf("sovereign state: %+v", st)
	}
	log := sovLog(t, r)
	if e := log[weak.ID]; e.Valid || e.Ignored != governance.WhyBelowThreshold {
		t.Fatalf("1-of-3 freeze: %+v", e)
	}
	if e := log[freeze.ID]; !e.Valid || e.Authority != "seed" {
		t.Fatalf("2-of-3 freeze: %+v", e)
	}
	if e := log[replay.ID]; e.Valid || e.Ignored != governance.WhyReplayed || e.ReplayOf != freeze.ID {
		t.Fatalf("replayed freeze: %+v", e)
	}

	unfreeze := act(t, k.seed[1], now()+2, map[string]any{"act": "unfreeze", "target": "global"}, k.seed[2:3])
	post(t, r, unfreeze, 200, "")
	r.Clock.Add(3 * time.Second)
	post(t, r, alice.Sign(protocol.KindPost, now(), "after unfreeze"), 200, "")
}

// TestSeedFreezeExpires: a seed freeze lapses 24 h after its last renewal.
func TestSeedFreezeExpires(t *testing.T) {
	k := newKeys()
	r := start(t, k)
	alice := taskstest.NewAgent("alice")
	now := func() int64 { return r.Clock.Now().Unix() }
	post(t, r, act(t, k.seed[0], now(), map[string]any{"act": "freeze_network", "reason": "first"}, k.seed[1:2]), 200, "")
	r.Clock.Add(20 * time.Hour)
	post(t, r, alice.Sign(protocol.KindPost, now(), "x"), 503, governance.CodeFrozen)
	post(t, r, act(t, k.seed[0], now(), map[string]any{"act": "freeze_network", "reason": "renewed"}, k.seed[2:3]), 200, "")
	r.Clock.Add(5 * time.Hour) // 25 h after the first, 5 h after the renewal
	post(t, r, alice.Sign(protocol.KindPost, now(), "y"), 503, governance.CodeFrozen)
	r.Clock.Add(19*time.Hour + time.Second)
	post(t, r, alice.Sign(protocol.KindPost, now(), "z"), 200, "")
}

// TestSovereignActs: the sovereign keys ban, revoke, appoint, freeze
// (without expiry) and shut down; the seed keys may only freeze.
func TestSovereignActs(t *testing.T) {
	k := newKeys()
	r := start(t, k)
	now := func() int64 { return r.Clock.Now().Unix() }
	mallory, bob := taskstest.NewAgent("mallory"), taskstest.NewAgent("bob")
	steward := taskstest.NewAgent("steward")
	post(t, r, mallory.Sign(protocol.KindPost, now(), "hi"), 200, "")

	seedBan := act(t, k.seed[0], now(), map[string]any{"act": "ban_agent", "reason": "seed tries"}, k.seed[1:], []string{"p", mallory.ID})
	post(t, r, seedBan, 200, "")
	post(t, r, mallory.Sign(protocol.KindPost, now(), "still here"), 200, "")
	oneSov := act(t, k.sov[0], now(), map[string]any{"act": "ban_agent", "reason": "one of two"}, nil, []string{"p", mallory.ID})
	post(t, r, oneSov, 200, "")
	noTarget := act(t, k.sov[0], now(), map[string]any{"act": "ban_agent", "reason": "whom?"}, k.sov[1:])
	post(t, r, noTarget, 200, "")
	ban := act(t, k.sov[0], now(), map[string]any{"act": "ban_agent", "reason": "extortion"}, k.sov[1:], []string{"p", mallory.ID})
	post(t, r, ban, 200, "")
	post(t, r, mallory.Sign(protocol.KindPost, now(), "banned"), 403, governance.CodeBanned)
	post(t, r, bob.Sign(protocol.KindPost, now(), "fine"), 200, "")
	revoke := act(t, k.sov[1], now(), map[string]any{"act": "revoke_relay", "reason": "serves forgeries"}, k.sov[:1], []string{"relay", "https://bad.example"})
	appoint := act(t, k.sov[1], now(), map[string]any{"act": "appoint_steward", "reason": "succession"}, k.sov[:1], []string{"p", steward.ID})
	rollback := act(t, k.sov[1], now(), map[string]any{"act": "rollback_to", "reason": "attack"}, k.sov[:1], []string{"e", bob.ID})
	for _, e := range []*protocol.Event{revoke, appoint, rollback} {
		post(t, r, e, 200, "")
	}
	// The revoked relay's announcements are refused (by its url here),
	// another relay's are not.
	post(t, r, taskstest.NewAgent("bad-relay").Sign(protocol.KindRelayAnnounce, now(), map[string]any{"url": "https://bad.example/"}), 403, governance.CodeRevoked)
	post(t, r, taskstest.NewAgent("good-relay").Sign(protocol.KindRelayAnnounce, now(), map[string]any{"url": "https://good.example"}), 200, "")
	var st governance.Sovereign
	getJSON(t, r, "/sovereign/state", &st)
	if len(st.BannedAgents) != 1 || st.BannedAgents[0] != mallory.ID || len(st.RevokedRelays) != 1 ||
		st.RevokedRelays[0] != "https://bad.example" || len(st.Stewards) != 1 || st.Stewards[0] != steward.ID ||
		len(st.Rollbacks) != 1 || st.Frozen || st.Shutdown || st.LastSovereignActivity != now() {
		t.Fatalf("sovereign state: %+v", st)
	}
	log := sovLog(t, r)
	for id, want := range map[string]string{seedBan.ID: governance.WhySeedNotAllowed, oneSov.ID: governance.WhyBelowThreshold, noTarget.ID: governance.WhyMissingTarget} {
		if log[id].Valid || log[id].Ignored != want {
			t.Fatalf("act %s: want ignored %s, got %+v", id, want, log[id])
		}
	}

	freeze := act(t, k.sov[0], now(), map[string]any{"act": "freeze_network", "reason": "sovereign"}, k.sov[1:])
	post(t, r, freeze, 200, "")
	r.Clock.Add(48 * time.Hour) // a sovereign freeze does not lapse
	post(t, r, bob.Sign(protocol.KindPost, now(), "frozen"), 503, governance.CodeFrozen)
	// A seed unfreeze cannot lift a sovereign freeze.
	post(t, r, act(t, k.seed[0], now(), map[string]any{"act": "unfreeze", "reason": "seed"}, k.seed[1:2]), 200, "")
	post(t, r, bob.Sign(protocol.KindPost, now(), "frozen"), 503, governance.CodeFrozen)
	// An unsigned-by-rule kind 30 is refused during a freeze.
	post(t, r, act(t, bob, now(), map[string]any{"act": "unfreeze"}, nil), 503, governance.CodeFrozen)
	post(t, r, act(t, k.sov[1], now(), map[string]any{"act": "unfreeze", "reason": "over"}, k.sov[:1]), 200, "")
	post(t, r, bob.Sign(protocol.KindPost, now(), "thawed"), 200, "")

	post(t, r, act(t, k.sov[1], now(), map[string]any{"act": "shutdown_protocol", "reason": "last resort"}, k.sov[:1]), 200, "")
	ans := post(t, r, bob.Sign(protocol.KindPost, now(), "after"), 503, governance.CodeShutdown)
	if ans.Header.Get("Retry-After") == "" {
		t.Fatal("no Retry-After")
	}
	var ph struct {
		Phase    int  `json:"phase"`
		Shutdown bool `json:"shutdown"`
		Active   bool `json:"seed_keys_active"`
	}
	getJSON(t, r, "/phase", &ph)
	if ph.Phase != 2 || !ph.Shutdown || !ph.Active {
		t.Fatalf("phase: %+v", ph)
	}
}

// TestSeedDestruct: after a kind 21's effective time the seed keys stop
// counting, and a later seed freeze is ignored.
func TestSeedDestruct(t *testing.T) {
	k := newKeys()
	r := start(t, k)
	now := func() int64 { return r.Clock.Now().Unix() }
	content := `{"reason":"phase 3","effective_at":` + strconv.FormatInt(now()+60, 10) + `}`
	tag, _ := protocol.Cosign(k.seed[1].Key, governance.KindSeedDestruct, content)
	destruct := k.seed[0].Sign(governance.KindSeedDestruct, now(), content, tag)
	post(t, r, destruct, 200, "")
	r.Clock.Add(2 * time.Minute)
	late := act(t, k.seed[0], now(), map[string]any{"act": "freeze_network", "reason": "too late"}, k.seed[1:2])
	post(t, r, late, 200, "")
	post(t, r, taskstest.NewAgent("x").Sign(protocol.KindPost, now(), "not frozen"), 200, "")
	log := sovLog(t, r)
	if !log[destruct.ID].Valid || log[late.ID].Ignored != governance.WhySeedDestroyed {
		t.Fatalf("log: %+v", log)
	}
	var ph struct {
		Phase  int  `json:"phase"`
		Active bool `json:"seed_keys_active"`
	}
	getJSON(t, r, "/phase", &ph)
	if ph.Phase != 3 || ph.Active {
		t.Fatalf("phase: %+v", ph)
	}
	_ = relaytest.VectorTime
}

func contains(list any, code string) bool {
	items, _ := list.([]any)
	for _, it := range items {
		if m, ok := it.(map[string]any); ok && m["code"] == code {
			return true
		}
	}
	return false
}
