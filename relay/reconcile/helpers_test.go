package reconcile

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// syncStats are the measured costs of one reconciliation.
type syncStats struct {
	rounds   int // round trips: client message + server reply
	up, down int // bytes client->server, server->client
	maxFrame int // largest single message
	have     [][32]byte
	need     [][32]byte
}

func (s syncStats) bytes() int { return s.up + s.down }

// reconcile runs a whole exchange between a client and a server index.
func reconcile(t testing.TB, client, server *Index, cp, sp Params) syncStats {
	t.Helper()
	st, err := runSync(client, server, cp, sp)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// runSync runs a whole exchange; it is safe to call from any goroutine.
func runSync(client, server *Index, cp, sp Params) (syncStats, error) {
	var st syncStats
	sess := cp.NewSession(client)
	msg := sess.Initiate()
	for msg != nil {
		st.rounds++
		if st.rounds > 10000 {
			return st, errors.New("no convergence after 10000 round trips")
		}
		reply, err := sp.Respond(server, msg)
		if err != nil {
			return st, fmt.Errorf("round %d: respond: %w", st.rounds, err)
		}
		st.up += len(msg)
		st.down += len(reply)
		st.maxFrame = max(st.maxFrame, len(msg), len(reply))
		next, have, need, err := sess.Reconcile(reply)
		if err != nil {
			return st, fmt.Errorf("round %d: reconcile: %w", st.rounds, err)
		}
		st.have = append(st.have, have...)
		st.need = append(st.need, need...)
		msg = next
	}
	return st, nil
}

// checkDiff asserts that have and need are exactly client\server and
// server\client, without repeats.
func checkDiff(t testing.TB, st syncStats, client, server []Item) {
	t.Helper()
	wantHave, wantNeed := difference(client, server), difference(server, client)
	if got := sortedIDs(st.have); !slices.Equal(got, wantHave) {
		t.Errorf("have: got %d ids, want %d", len(got), len(wantHave))
	}
	if got := sortedIDs(st.need); !slices.Equal(got, wantNeed) {
		t.Errorf("need: got %d ids, want %d", len(got), len(wantNeed))
	}
}

// difference returns the sorted distinct ids of the items in a and not in b.
func difference(a, b []Item) [][32]byte {
	a, b = sortedItems(a), sortedItems(b)
	var out [][32]byte
	for len(a) > 0 {
		for len(b) > 0 && b[0].Compare(a[0]) < 0 {
			b = b[1:]
		}
		if len(b) == 0 || b[0] != a[0] {
			out = append(out, a[0].ID)
		}
		a = a[1:]
	}
	return slices.Compact(sortedIDs(out))
}

func sortedItems(items []Item) []Item {
	if slices.IsSortedFunc(items, Item.Compare) {
		return items
	}
	out := slices.Clone(items)
	slices.SortFunc(out, Item.Compare)
	return out
}

// sortedIDs returns a sorted copy; repeats are kept so that they show up
// as a mismatch.
func sortedIDs(ids [][32]byte) [][32]byte {
	out := slices.Clone(ids)
	slices.SortFunc(out, func(a, b [32]byte) int { return bytes.Compare(a[:], b[:]) })
	if out == nil {
		out = [][32]byte{}
	}
	return out
}

// randItems returns n items with random ids and created_at in
// [base, base+span).
func randItems(r *rand.Rand, n int, base, span int64) []Item {
	out := make([]Item, n)
	for i := range out {
		out[i].CreatedAt = base + r.Int64N(span)
		fillID(r, &out[i].ID)
	}
	return out
}

func fillID(r *rand.Rand, id *[32]byte) {
	for j := 0; j < 32; j += 8 {
		v := r.Uint64()
		for k := range 8 {
			id[j+k] = byte(v >> (8 * k))
		}
	}
}

// splitSets returns a sorted client and server set sharing `shared` items,
// with onlyClient and onlyServer extra items each at random positions.
func splitSets(r *rand.Rand, shared, onlyClient, onlyServer int, base, span int64) (client, server []Item) {
	type tagged struct {
		Item
		side int // 0 both, 1 client only, 2 server only
	}
	all := make([]tagged, 0, shared+onlyClient+onlyServer)
	for i, it := range randItems(r, cap(all), base, span) {
		t := tagged{Item: it}
		if i >= shared {
			t.side = 1
		}
		if i >= shared+onlyClient {
			t.side = 2
		}
		all = append(all, t)
	}
	slices.SortFunc(all, func(a, b tagged) int { return a.Compare(b.Item) })
	client = make([]Item, 0, shared+onlyClient)
	server = make([]Item, 0, shared+onlyServer)
	for _, t := range all {
		if t.side != 2 {
			client = append(client, t.Item)
		}
		if t.side != 1 {
			server = append(server, t.Item)
		}
	}
	return client, server
}

const (
	epoch = 1_763_800_000 // a realistic created_at
	month = 30 * 86400
)
