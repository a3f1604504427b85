package governance

import (
	"crypto/ed25519"
	"crypto/sha256"
	"strings"
	"testing"

	"github.com/anp2net/relay/protocol"
)

func testKey(name string) ed25519.PrivateKey {
	s := sha256.Sum256([]byte(name))
	return ed25519.NewKeyFromSeed(s[:])
}

func TestNormalize(t *testing.T) {
	a, b, c := protocol.AgentIDOf(testKey("a")), protocol.AgentIDOf(testKey("b")), protocol.AgentIDOf(testKey("c"))
	for _, tc := range []struct {
		opts Options
		err  string
		seed int
	}{
		{Options{SeedKeys: []string{a, b, c}}, "", 2},
		{Options{SeedKeys: []string{a + "," + b}, SeedThreshold: 2}, "", 2},
		{Options{SeedKeys: []string{a, a}}, "given twice", 0},
		{Options{SeedKeys: []string{"ABC"}}, "64 lowercase hex", 0},
		{Options{SeedKeys: []string{a}, SeedThreshold: 2}, "want 1..1", 0},
		{Options{SovereignThreshold: 1}, "without sovereign keys", 0},
		{Options{SeedFreezeTTL: -1}, "must be positive", 0},
	} {
		o, err := tc.opts.normalize()
		if (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Fatalf("%+v: err %v, want %q", tc.opts, err, tc.err)
		}
		if err == nil && o.SeedThreshold != tc.seed {
			t.Fatalf("%+v: threshold %d, want %d", tc.opts, o.SeedThreshold, tc.seed)
		}
	}
}

// TestSameSecondUnfreezeWins: a freeze and an unfreeze with one created_at
// leave the network unfrozen whichever id sorts first.
func TestSameSecondUnfreezeWins(t *testing.T) {
	ka, kb := testKey("a"), testKey("b")
	o, _ := Options{SeedKeys: []string{protocol.AgentIDOf(ka), protocol.AgentIDOf(kb)}, SeedThreshold: 2}.normalize()
	mk := func(content string) *protocol.Event {
		tag, _ := protocol.Cosign(kb, KindSovereignAct, content)
		e := &protocol.Event{Kind: KindSovereignAct, CreatedAt: 1000, Content: content, Tags: [][]string{tag}}
		e.Sign(ka)
		return e
	}
	for i := range 8 {
		freeze := mk(`{"act":"freeze_network","n":` + string(rune('0'+i)) + `}`)
		unfreeze := mk(`{"act":"unfreeze"}`)
		j := o.judge([]*protocol.Event{freeze, unfreeze}, nil)
		if s := o.sovereignAt(j, 1000); s.Frozen || s.ValidActs != 2 {
			t.Fatalf("freeze %s, unfreeze %s: %+v", freeze.ID, unfreeze.ID, s)
		}
		if s := o.sovereignAt(j, 999); s.Frozen || s.ValidActs != 0 {
			t.Fatalf("before both: %+v", s)
		}
	}
}

// TestSchemaRefsRefused: a schema from the network cannot make the relay
// read a file or a URL; it fails to compile and is not enforced.
func TestSchemaRefsRefused(t *testing.T) {
	for _, doc := range []string{`{"$ref":"file:///etc/hostname"}`, `{"$ref":"http://127.0.0.1:1/x.json"}`, `{"type":`} {
		if s, err := compileSchema("k", []byte(doc)); s != nil || err == "" {
			t.Fatalf("%s compiled", doc)
		}
	}
}
