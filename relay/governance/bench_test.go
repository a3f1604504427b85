package governance

import (
	"fmt"
	"testing"

	"github.com/anp2net/relay/protocol"
)

// benchFold returns a module whose fold holds n cosigned kind 30s (a
// third of them valid seed freezes and unfreezes), and a plain post.
func benchFold(b *testing.B, n int) (*Module, *protocol.Event) {
	ka, kb := testKey("a"), testKey("b")
	m, err := NewModule(Options{SeedKeys: []string{protocol.AgentIDOf(ka), protocol.AgentIDOf(kb)}, SeedThreshold: 2})
	if err != nil {
		b.Fatal(err)
	}
	for i := range n {
		act := []string{"freeze_network", "unfreeze", "ban_agent"}[i%3]
		content := fmt.Sprintf(`{"act":%q,"n":%d}`, act, i)
		tag, _ := protocol.Cosign(kb, KindSovereignAct, content)
		e := &protocol.Event{Kind: KindSovereignAct, CreatedAt: int64(1000 + i), Content: content, Tags: [][]string{tag}}
		e.Sign(ka)
		m.fold.Add(e)
	}
	post := &protocol.Event{Kind: protocol.KindPost, CreatedAt: int64(2000 + n), Content: "x", Tags: [][]string{}}
	post.Sign(testKey("c"))
	return m, post
}

// BenchmarkGatePost is the gate's cost on a plain publish with 1000 acts
// in the log (the judgement and the sovereign state are cached).
func BenchmarkGatePost(b *testing.B) {
	m, post := benchFold(b, 1000)
	now := int64(1000 + 3*86400) // the last seed freeze has lapsed
	m.gate(post, now)
	b.ResetTimer()
	for range b.N {
		if err := m.gate(post, now); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRejudge is the cost of judging 1000 acts again after a new
// event (signature checks cached per event).
func BenchmarkRejudge(b *testing.B) {
	m, _ := benchFold(b, 1000)
	m.fold.Sovereign(5000)
	b.ResetTimer()
	for i := range b.N {
		m.fold.mu.Lock()
		m.fold.version++
		m.fold.mu.Unlock()
		m.fold.Sovereign(int64(5000 + i))
	}
}
