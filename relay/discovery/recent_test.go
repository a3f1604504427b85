package discovery_test

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/discovery"
	"github.com/anp2net/relay/relay/state"
	"github.com/anp2net/relay/tasks/taskstest"
)

// TestRecentPrunesOldStubs: the feed's index drops the stubs older than
// the widest feed window (90 d) before the reader's clock (it kept every
// post, reply, knowledge, beacon and task event forever), ignores late
// backdated ones, and answers every in-window query as the full event set
// would, live or rebuilt in another order.
func TestRecentPrunesOldStubs(t *testing.T) {
	const day = 86400
	now := int64(1763800000)
	alice, bob := taskstest.NewAgent("alice"), taskstest.NewAgent("bob")
	var evs []*protocol.Event
	for k := int64(0); k < 200; k++ {
		evs = append(evs, alice.Sign(protocol.KindPost, now-k*day, "post", []string{"t", "climate"}),
			bob.Sign(protocol.KindPost, now-k*day-7, "other", []string{"t", "market"}))
	}
	fold := func(evs []*protocol.Event) *discovery.Fold {
		f := discovery.New()
		s := state.New(state.Options{Folds: []state.NamedFold{{Name: "discovery", Fold: f}}})
		for i, e := range evs {
			s.Add(int64(i+1), e, nil)
		}
		return f
	}
	live := fold(evs)
	shuffled := slices.Clone(evs)
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	replay := fold(shuffled)
	if n := live.RecentStubs(); n != 400 {
		t.Fatalf("before any query: %d stubs", n)
	}
	// The reference: the events themselves, filtered and sorted.
	want := func(authors, topics []string, since, until int64, n int) []string {
		var out []*protocol.Event
		for _, e := range evs {
			if e.CreatedAt >= since && e.CreatedAt <= until && (slices.Contains(authors, e.AgentID) || slices.Contains(topics, e.TagValue("t"))) {
				out = append(out, e)
			}
		}
		slices.SortFunc(out, func(a, b *protocol.Event) int {
			if a.CreatedAt != b.CreatedAt {
				return int(b.CreatedAt - a.CreatedAt)
			}
			if a.ID > b.ID {
				return -1
			}
			return 1
		})
		var ids []string
		for _, e := range out[:min(len(out), n)] {
			ids = append(ids, e.ID)
		}
		return ids
	}
	ids := func(list []*protocol.Event) []string {
		var out []string
		for _, e := range list {
			out = append(out, e.ID)
		}
		return out
	}
	for _, w := range []int64{3600, day, 7 * day, 30 * day, 90 * day} {
		for _, q := range []struct{ authors, topics []string }{{[]string{alice.ID}, nil}, {nil, []string{"market"}}, {[]string{alice.ID}, []string{"market"}}} {
			ref := want(q.authors, q.topics, now-w, now, 500)
			for name, f := range map[string]*discovery.Fold{"live": live, "replay": replay} {
				if got := ids(f.Recent(q.authors, q.topics, now-w, now, 500)); !slices.Equal(got, ref) {
					t.Fatalf("%s window %d %v: %d events, want %d", name, w, q, len(got), len(ref))
				}
			}
		}
	}
	// Only the last 90 days (91 per author, the bound included) are left.
	if n := live.RecentStubs(); n != 2*91-1 {
		t.Fatalf("after a query: %d stubs, want %d", n, 2*91-1)
	}
	// A late event older than the horizon is not indexed; a new one is.
	live.Add(alice.Sign(protocol.KindPost, now-150*day, "late", []string{"t", "climate"}))
	fresh := alice.Sign(protocol.KindPost, now-1, "fresh", []string{"t", "climate"})
	live.Add(fresh)
	if n := live.RecentStubs(); n != 2*91 {
		t.Fatalf("after a late and a fresh event: %d stubs, want %d", n, 2*91)
	}
	if got := live.Recent([]string{alice.ID}, nil, now-60, now, 5); len(got) != 2 || got[1].ID != fresh.ID {
		t.Fatalf("fresh event missing: %v", ids(got))
	}
	// Removing an event within the window still removes it.
	live.Remove(fresh)
	if got := live.Recent([]string{alice.ID}, nil, now-60, now, 5); len(got) != 1 {
		t.Fatalf("removed event still listed: %v", ids(got))
	}
}
