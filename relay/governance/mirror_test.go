package governance_test

import (
	"bytes"
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay"
	"github.com/anp2net/relay/relay/federation"
	"github.com/anp2net/relay/relay/governance"
	"github.com/anp2net/relay/relay/relaytest"
	"github.com/anp2net/relay/relay/state"
	"github.com/anp2net/relay/tasks/taskstest"
)

func federated(t *testing.T, k keys, name string) (*relaytest.Relay, *federation.Module) {
	t.Helper()
	fed, err := federation.NewModule(federation.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	r := relaytest.Start(t, []relay.Module{k.module(t), fed}, func(c *relay.Config) { c.RelayKey = taskstest.NewAgent("relay-" + name).Key })
	return r, fed
}

// governanceEvents is a history with every kind of act, valid and not.
func governanceEvents(t *testing.T, k keys, at int64) []*protocol.Event {
	alice, mallory := taskstest.NewAgent("alice"), taskstest.NewAgent("mallory")
	return []*protocol.Event{
		alice.Sign(protocol.KindPost, at, "hello"),
		act(t, k.seed[0], at+1, map[string]any{"act": "freeze_network", "reason": "weak"}, nil),
		act(t, k.sov[0], at+2, map[string]any{"act": "ban_agent", "reason": "r"}, k.sov[1:], []string{"p", mallory.ID}),
		act(t, k.sov[0], at+3, map[string]any{"act": "appoint_steward"}, k.sov[1:], []string{"p", alice.ID}),
		act(t, k.seed[0], at+4, map[string]any{"act": "freeze_network", "reason": "wave"}, k.seed[1:2]),
		act(t, k.seed[2], at+5, map[string]any{"act": "freeze_network", "reason": "wave"}, k.seed[1:2]),
		act(t, k.seed[0], at+6, map[string]any{"act": "shutdown_protocol"}, k.seed[1:]),
		alice.Sign(governance.KindSovereignAct, at+7, "not json"),
		alice.Sign(governance.KindPIP, at+8, pipContent("PIP-7", "impl"), []string{"status", "discussion"}),
		mallory.Sign(governance.KindPIP, at+9, pipContent("PIP-7", "impl"), []string{"status", "final-call"}),
		alice.Sign(governance.KindPIP, at+10, pipContent("PIP-7", "impl"), []string{"status", "final-call"}),
		mallory.Sign(governance.KindPIP, at+11, `{"no":"number"}`),
	}
}

// TestMirrorDerivesFreeze: a mirror that copies a frozen relay's log by set
// reconciliation derives the same governance state, refuses publishes the
// same way, and serves the same /state digest.
func TestMirrorDerivesFreeze(t *testing.T) {
	k := newKeys()
	a, _ := federated(t, k, "a")
	b, fedB := federated(t, k, "b")
	at := a.Clock.Now().Unix()
	for _, e := range governanceEvents(t, k, at) {
		post(t, a, e, 200, "")
	}
	if _, err := fedB.MirrorOnce(context.Background(), a.URL, nil); err != nil {
		t.Fatal(err)
	}
	a.Clock.Add(10 * time.Second)
	b.Clock.Add(10 * time.Second)
	if da, db := stateOf(t, a), stateOf(t, b); da.Digest != db.Digest || da.Views["governance"] == "" {
		t.Fatalf("states differ in %q", state.FirstDifference(da, db))
	}
	sa := a.Do(t, "GET", "/sovereign/state", "", nil).Body
	sb := b.Do(t, "GET", "/sovereign/state", "", nil).Body
	if !bytes.Equal(sa, sb) || !bytes.Contains(sa, []byte(`"frozen":true`)) {
		t.Fatalf("sovereign state: a %s, b %s", sa, sb)
	}
	post(t, b, taskstest.NewAgent("carol").Sign(protocol.KindPost, b.Clock.Now().Unix(), "x"), 503, governance.CodeFrozen)
}

// TestFoldOrderIndependent feeds the same events in many orders, with an
// act revoked (kind 9 before or after it), and requires one digest (D6).
func TestFoldOrderIndependent(t *testing.T) {
	k := newKeys()
	evs := governanceEvents(t, k, relaytest.VectorTime)
	revoke := k.sov[0].Sign(protocol.KindRevoke, relaytest.VectorTime+20, "", []string{"e", evs[3].ID})
	revokePIP := taskstest.NewAgent("alice").Sign(protocol.KindRevoke, relaytest.VectorTime+20, "", []string{"e", evs[10].ID})
	steward, heir := taskstest.NewAgent("steward"), taskstest.NewAgent("heir")
	appoint := act(t, k.sov[1], relaytest.VectorTime+12, map[string]any{"act": "appoint_steward", "n": 2}, k.sov[:1], []string{"p", steward.ID})
	succession := deadMan(t, steward, relaytest.VectorTime+40, map[string]any{"new_stewards": []string{heir.ID}})
	tooEarly := deadMan(t, steward, relaytest.VectorTime+25, map[string]any{"new_stewards": []string{steward.ID}})
	evs = append(evs, revoke, revokePIP, appoint, succession, tooEarly)
	k.opts.DeadManAfter = 10 // the revoke by a sovereign key at +20 is activity
	byID := map[string]*protocol.Event{}
	for _, e := range evs {
		byID[e.ID] = e
	}
	var want [32]byte
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 20 {
		m := k.module(t)
		st := state.New(state.Options{Folds: []state.NamedFold{{Name: m.Name(), Fold: m.Fold()}}})
		order := rng.Perm(len(evs))
		for seq, j := range order {
			st.Add(int64(seq+1), evs[j], func(id string) *protocol.Event { return byID[id] })
		}
		got := m.Fold().(state.Digester).Digest(relaytest.VectorTime + 100)
		if i == 0 {
			want = got
			s := m.Governance().Sovereign(relaytest.VectorTime + 45)
			if len(s.Stewards) != 1 || len(s.BannedAgents) != 1 || !s.Frozen || s.Regime.By != succession.ID {
				t.Fatalf("state: %+v", s)
			}
			// The heir, silent for DeadManAfter, loses authority to the
			// steward on its own (the switch fires without an event).
			if s := m.Governance().Sovereign(relaytest.VectorTime + 100); s.Regime.By != governance.ByAutomatic || s.Regime.Since != relaytest.VectorTime+50 {
				t.Fatalf("state at +100: %+v", s.Regime)
			}
			recs := m.Governance().Records()
			if len(recs) != 1 || recs[0].Declared != "discussion" || len(recs[0].Supporters) != 2 {
				t.Fatalf("PIPs: %+v", recs)
			}
		} else if got != want {
			t.Fatalf("order %v: digest differs", order)
		}
	}
}
