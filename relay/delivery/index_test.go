package delivery

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/anp2net/relay/protocol"
)

// TestIndexAgreesWithScan: over random triggers and events, the triggers
// the index offers that match are exactly the triggers a scan of all of
// them finds matching, each once.
func TestIndexAgreesWithScan(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	author := func() string { return strings.Repeat(fmt.Sprint(rng.IntN(4)), 64) }
	pick := func(vals []string) []string {
		out := []string{}
		for _, v := range vals {
			if rng.IntN(2) == 0 {
				out = append(out, v)
			}
		}
		if len(out) == 0 {
			out = append(out, vals[0])
		}
		return out
	}
	trigs := map[string]*storedTrigger{}
	for i := range 300 {
		var m Match
		for m.Kinds == nil && m.Authors == nil && m.Tags == nil {
			if rng.IntN(2) == 0 {
				m.Kinds = []int64{int64(rng.IntN(3)), int64(rng.IntN(3))}
			}
			if rng.IntN(3) == 0 {
				m.Authors = []string{author(), author()}
			}
			if rng.IntN(2) == 0 {
				m.Tags = map[string][]string{}
				for _, n := range pick([]string{"t", "e", "cap"}) {
					m.Tags[n] = pick([]string{"x", "y", "z"})
				}
			}
		}
		id := fmt.Sprintf("%04d", i)
		trigs[id] = &storedTrigger{ID: id, Spec: &Spec{Match: m}}
	}
	ix := newIndex(trigs)
	total := 0
	for range 2000 {
		e := &protocol.Event{Kind: int64(rng.IntN(3)), AgentID: author()}
		for range rng.IntN(4) {
			e.Tags = append(e.Tags, []string{[]string{"t", "e", "cap"}[rng.IntN(3)], []string{"x", "y", "z"}[rng.IntN(3)]})
		}
		want := map[string]bool{}
		for id, tr := range trigs {
			if tr.Spec.MatchEvent(e) {
				want[id] = true
			}
		}
		got := map[string]bool{}
		for _, tr := range ix.candidates(e) {
			if got[tr.ID] {
				t.Fatalf("trigger %s offered twice for %+v", tr.ID, e)
			}
			if tr.Spec.MatchEvent(e) {
				got[tr.ID] = true
			}
		}
		total += len(want)
		if len(got) != len(want) {
			t.Fatalf("event %+v: index finds %d matches, a scan %d", e, len(got), len(want))
		}
		for id := range want {
			if !got[id] {
				t.Fatalf("event %+v: index misses trigger %s %+v", e, id, trigs[id].Spec.Match)
			}
		}
	}
	if total < 2000 {
		t.Fatalf("only %d matches in all: the corpus tests little", total)
	}
}
