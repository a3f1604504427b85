package trust

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"github.com/anp2net/relay/protocol"
)

// t0 is a fixed base time on a minute boundary (2026-05-18 00:00:00 UTC).
const t0 = 1779062400

var (
	keyMu sync.Mutex
	keys  = map[int]ed25519.PrivateKey{}
)

// key returns the deterministic Ed25519 key of test agent i.
func key(i int) ed25519.PrivateKey {
	keyMu.Lock()
	defer keyMu.Unlock()
	k, ok := keys[i]
	if !ok {
		seed := sha256.Sum256([]byte(fmt.Sprintf("trust-test-agent-%d", i)))
		k = ed25519.NewKeyFromSeed(seed[:])
		keys[i] = k
	}
	return k
}

// agent returns the agent id of test agent i.
func agent(i int) string { return protocol.AgentIDOf(key(i)) }

func signed(from int, at, kind int64, content string, tags [][]string) *protocol.Event {
	e := &protocol.Event{CreatedAt: at, Kind: kind, Content: content, Tags: tags}
	e.Sign(key(from))
	return e
}

// vote is a kind 6 vote by from on targets, signed.
func vote(from int, at int64, score float64, reason string, targets ...int) *protocol.Event {
	var tags [][]string
	for _, t := range targets {
		tags = append(tags, []string{"p", agent(t)})
	}
	content, _ := json.Marshal(map[string]any{"score": score, "reason": reason})
	return signed(from, at, protocol.KindTrustVote, string(content), tags)
}

// post is a kind 1 post by from.
func post(from int, at int64, text string) *protocol.Event {
	return signed(from, at, protocol.KindPost, text, nil)
}

// flag is a kind 7 flag by from on target with the given category and
// extra tags.
func flag(from int, at int64, category string, target *protocol.Event, extra ...[]string) *protocol.Event {
	tags := append([][]string{{"e", target.ID}, {"p", target.AgentID}}, extra...)
	content, _ := json.Marshal(map[string]string{"category": category, "reason": category + " by " + fmt.Sprint(from)})
	return signed(from, at, protocol.KindFlag, string(content), tags)
}

// established returns a kind 0 for each agent dated NewAgentRamp before
// t0: agents first seen that long ago vote with their full weight at t0
// and later (no new-agent penalty).
func established(agents ...int) []*protocol.Event {
	var out []*protocol.Event
	for _, a := range agents {
		out = append(out, signed(a, t0-NewAgentRamp, protocol.KindProfile, `{"name":"established"}`, nil))
	}
	return out
}

func cosign(agents ...int) [][]string {
	var out [][]string
	for _, a := range agents {
		out = append(out, []string{"cosign", agent(a), ""})
	}
	return out
}

// views is the pair of views the relay feeds.
type views struct {
	g *Graph
	m *Moderation
}

func newViews() views {
	g := NewGraph(Options{})
	return views{g: g, m: NewModeration(g, ModerationOptions{})}
}

func (v views) add(evs ...*protocol.Event) {
	for _, e := range evs {
		v.g.Add(e)
		v.m.Add(e)
	}
}

func (v views) remove(evs ...*protocol.Event) {
	for _, e := range evs {
		v.g.Remove(e)
		v.m.Remove(e)
	}
}

// fakeID returns a deterministic 64-hex string (an id or agent id that
// needs no key: the views do not verify signatures).
func fakeID(kind string, i int) string {
	sum := sha256.Sum256([]byte(fmt.Sprintf("%s-%d", kind, i)))
	return hex.EncodeToString(sum[:])
}

func mustJSON(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func near(a, b float64) bool {
	d := a - b
	return d < 1.5e-6 && d > -1.5e-6
}
