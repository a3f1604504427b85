package statetest

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/tasks/taskstest"
)

// Mix is the share of each kind in Mixed streams, in percent of events.
var Mix = struct{ Votes, Flags, TaskLifecycles, Revokes float64 }{Votes: 12, Flags: 2, TaskLifecycles: 1.5, Revokes: 0.5}

// Mixed calls fn, from one goroutine, with about n valid signed events
// shaped like a busy network: posts and replies on 200 topics, 12% trust
// votes, 2% flags, task lifecycles (about 1.5% of events start one, so a
// million events hold over 10,000 tasks), and revocations. created_at
// spreads over [base, base+span). Signing runs on every core; the stream
// is deterministic for seed except for the order within each chunk.
func Mixed(seed uint64, n int, agents int, base, span int64, fn func(*protocol.Event)) {
	rng := rand.New(rand.NewPCG(seed, 11))
	pool := taskstest.Pool(agents)
	type spec struct {
		e   *protocol.Event
		key int
	}
	const chunk = 8192
	var recent []*protocol.Event // candidates for replies, flags, revokes
	index := make(map[string]int, len(pool))
	for i, a := range pool {
		index[a.ID] = i
	}
	emitted := 0
	for emitted < n {
		batch := make([]spec, 0, chunk)
		var signed []*protocol.Event // already signed (task lifecycles)
		for len(batch)+len(signed) < chunk && emitted+len(batch)+len(signed) < n {
			at := base + rng.Int64N(span)
			who := rng.IntN(len(pool))
			r := rng.Float64() * 100
			switch {
			case r < Mix.Votes:
				to := pool[rng.IntN(len(pool))].ID
				batch = append(batch, spec{&protocol.Event{CreatedAt: at, Kind: protocol.KindTrustVote,
					Content: fmt.Sprintf(`{"score":%.2f,"reason":"r"}`, float64(rng.IntN(201)-100)/100), Tags: [][]string{{"p", to}}}, who})
			case r < Mix.Votes+Mix.Flags && len(recent) > 0:
				t := recent[rng.IntN(len(recent))]
				batch = append(batch, spec{&protocol.Event{CreatedAt: at, Kind: protocol.KindFlag,
					Content: `{"category":"spam","reason":"x"}`, Tags: [][]string{{"e", t.ID}, {"p", t.AgentID}}}, who})
			case r < Mix.Votes+Mix.Flags+Mix.TaskLifecycles:
				signed = append(signed, taskstest.Lifecycles(rng, pool[:min(len(pool), 300)], 1, at)...)
			case r < Mix.Votes+Mix.Flags+Mix.TaskLifecycles+Mix.Revokes && len(recent) > 0:
				t := recent[rng.IntN(len(recent))]
				signed = append(signed, pool[index[t.AgentID]].Sign(protocol.KindRevoke, t.CreatedAt+1, "", []string{"e", t.ID}))
			case r < 70 || len(recent) == 0:
				batch = append(batch, spec{&protocol.Event{CreatedAt: at, Kind: protocol.KindPost,
					Content: fmt.Sprintf("post %d about things", rng.Uint64()), Tags: [][]string{{"t", fmt.Sprint("topic", rng.IntN(200))}}}, who})
			default:
				t := recent[rng.IntN(len(recent))]
				batch = append(batch, spec{&protocol.Event{CreatedAt: at, Kind: protocol.KindReply,
					Content: "a reply", Tags: [][]string{{"e", t.ID}, {"p", t.AgentID}}}, who})
			}
		}
		var wg sync.WaitGroup
		workers := runtime.GOMAXPROCS(0)
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := w; i < len(batch); i += workers {
					batch[i].e.Sign(pool[batch[i].key].Key)
				}
			}()
		}
		wg.Wait()
		for _, s := range batch {
			if s.e.Kind == protocol.KindPost && len(recent) < 4096 {
				recent = append(recent, s.e)
			} else if s.e.Kind == protocol.KindPost {
				recent[rng.IntN(len(recent))] = s.e
			}
			fn(s.e)
		}
		for _, e := range signed {
			if len(protocol.CheckKind(e)) == 0 {
				fn(e)
			}
		}
		emitted += len(batch) + len(signed)
	}
}
