package state_test

import (
	"crypto/ed25519"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/eventlog"
	"github.com/anp2net/relay/relay/state"
	"github.com/anp2net/relay/relay/state/statetest"
)

// redactionsOf returns kind 25s signed by key naming targets, two a
// redaction where they pair up.
func redactionsOf(key ed25519.PrivateKey, targets []*protocol.Event, at int64) []*protocol.Event {
	var out []*protocol.Event
	for i := 0; i < len(targets); i += 2 {
		tags := [][]string{{"e", targets[i].ID}}
		if i+1 < len(targets) {
			tags = append(tags, []string{"e", targets[i+1].ID})
		}
		c, _ := json.Marshal(map[string]string{"id": targets[i].ID, "reason": "order"})
		e := &protocol.Event{CreatedAt: at + int64(i), Kind: protocol.KindRedaction, Content: string(c), Tags: tags}
		e.Sign(key)
		out = append(out, e)
	}
	return out
}

// TestRedactionEitherOrder: a kind 25 by a counted relay key withdraws
// the events it names from every view whichever arrives first, so every
// order of the same events gives one digest; that digest equals the one
// of the log the redacting relay keeps (tombstones in place of the
// bodies); a kind 25 by another key changes nothing; and without the key
// the targets count again.
func TestRedactionEitherOrder(t *testing.T) {
	evs := statetest.Corpus(21, 16, 20, base, 600)
	relayKey := ed25519.NewKeyFromSeed(make([]byte, 32))
	other := ed25519.NewKeyFromSeed(append(make([]byte, 31), 1))
	var targets []*protocol.Event
	for _, e := range evs {
		if (e.Kind == protocol.KindTrustVote || e.Kind == protocol.KindTaskResult) && len(targets) < 8 {
			targets = append(targets, e)
		}
	}
	all := append(append(append([]*protocol.Event(nil), evs...), redactionsOf(relayKey, targets, base+100)...),
		redactionsOf(other, evs[len(evs)-4:], base+100)...)
	opts := state.Options{Redactors: []string{protocol.AgentIDOf(relayKey)}}
	fold := func(evs []*protocol.Event, opts state.Options) state.Digest {
		s := state.New(opts)
		seen := map[string]*protocol.Event{}
		for i, e := range evs {
			seen[e.ID] = e
			s.Add(int64(i+1), e, func(id string) *protocol.Event { return seen[id] })
		}
		for _, e := range targets {
			if _, ok := s.Withheld(e.ID); !ok || !s.Revoked(e.ID) {
				t.Fatalf("target %s not withheld", e.ID)
			}
		}
		return s.Digest(base + 700)
	}
	want := fold(all, opts)
	for seed := range uint64(4) {
		if got := fold(shuffled(all, seed), opts); got.Digest != want.Digest || got.Revoked != want.Revoked {
			t.Fatalf("order %d: %s, want %s (first difference %s)", seed, got.Digest, want.Digest, state.FirstDifference(got, want))
		}
	}
	// The redacting relay's log: tombstones where the bodies were.
	withheld := map[string]bool{}
	for _, e := range targets {
		withheld[e.ID] = true
	}
	tomb := state.New(opts)
	seen := map[string]*protocol.Event{}
	lookup := func(id string) *protocol.Event { return seen[id] }
	for i, e := range all {
		if withheld[e.ID] {
			tomb.AddWithheld(int64(i+1), e.ID, eventlog.Withholding{Reason: "order", CreatedAt: e.CreatedAt})
			continue
		}
		seen[e.ID] = e
		tomb.Add(int64(i+1), e, lookup)
	}
	if got := tomb.Digest(base + 700); got.Digest != want.Digest || got.Events != want.Events {
		t.Fatalf("tombstones: %s (%d events), bodies and redactions: %s (%d); first difference %s", got.Digest, got.Events,
			want.Digest, want.Events, state.FirstDifference(got, want))
	}
	s := state.New(state.Options{})
	for i, e := range all {
		seen[e.ID] = e
		s.Add(int64(i+1), e, lookup)
	}
	if got := s.Digest(base + 700); got.Digest == want.Digest {
		t.Fatal("redactions by a key that does not count changed the state")
	}
	if _, ok := s.Withheld(targets[0].ID); ok {
		t.Fatal("an uncounted redaction withholds")
	}
}

// TestWithheldSurvivesResume: the withheld set is part of the saved
// composition.
func TestWithheldSurvivesResume(t *testing.T) {
	relayKey := ed25519.NewKeyFromSeed(make([]byte, 32))
	evs := statetest.Corpus(3, 6, 4, base, 600)
	r := redactionsOf(relayKey, evs[:2], base+50)
	opts := state.Options{Redactors: []string{protocol.AgentIDOf(relayKey)}}
	s := state.New(opts)
	seen := map[string]*protocol.Event{}
	lookup := func(id string) *protocol.Event { return seen[id] }
	for i, e := range append(append([]*protocol.Event(nil), evs...), r...) {
		seen[e.ID] = e
		s.Add(int64(i+1), e, lookup)
	}
	c, err := s.Capture()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := state.OpenDir(filepath.Join(t.TempDir(), "state"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dir.Save(c); err != nil {
		t.Fatal(err)
	}
	sv, err := dir.Latest()
	if err != nil {
		t.Fatal(err)
	}
	got := state.New(opts)
	if _, _, err := got.Resume(sv, lookup); err != nil {
		t.Fatal(err)
	}
	for _, e := range evs[:2] {
		if w, ok := got.Withheld(e.ID); !ok || w.Reason != "order" || !got.Revoked(e.ID) {
			t.Fatalf("%s after resume: %+v %v", e.ID, w, ok)
		}
	}
	if n, err := state.Discard(dir.Path()); err != nil || n != 1 {
		t.Fatalf("Discard = %d, %v", n, err)
	}
	if _, err := dir.Latest(); err != state.ErrNoSnapshot {
		t.Fatalf("after Discard: %v", err)
	}
}
