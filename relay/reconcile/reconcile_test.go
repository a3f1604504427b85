package reconcile

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"
)

func TestReconcileCases(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	sameTS := func(n int) []Item {
		items := randItems(r, n, 0, 1)
		for i := range items {
			items[i].CreatedAt = epoch
		}
		return items
	}
	shared := randItems(r, 5000, epoch, month)
	join := func(parts ...[]Item) []Item {
		var out []Item
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	clusterC, clusterS := sameTS(40), sameTS(40)
	bigTS := sameTS(3000)
	tests := []struct {
		name           string
		client, server []Item
	}{
		{"both empty", nil, nil},
		{"client empty", nil, shared},
		{"server empty", shared, nil},
		{"identical", shared, shared},
		{"one item each side", []Item{shared[0]}, []Item{shared[1]}},
		{"small differences", join(shared[10:], randItems(r, 3, epoch, month)), join(shared[:4990], randItems(r, 5, epoch, month))},
		{"differences clustered at one timestamp", join(shared, clusterC), join(shared, clusterS)},
		{"many items share a created_at", join(bigTS[:2950], shared[:100]), join(bigTS[50:], shared[:100])},
		{"all share a created_at, disjoint", sameTS(500), sameTS(700)},
		{"timestamp zero", []Item{{CreatedAt: 0, ID: [32]byte{1}}}, []Item{{CreatedAt: 0, ID: [32]byte{2}}, {CreatedAt: 0}}},
		{"ids differ only in the last byte", []Item{{CreatedAt: 5, ID: [32]byte{31: 1}}, {CreatedAt: 5, ID: [32]byte{31: 3}}}, []Item{{CreatedAt: 5, ID: [32]byte{31: 2}}}},
	}
	params := map[string]Params{
		"default":  {},
		"small":    {InitialBuckets: 2, Buckets: 2, IDListMax: 1, FrameLimit: minFrameLimit},
		"no lists": {IDListMax: -1},
	}
	for _, tt := range tests {
		for pname, p := range params {
			t.Run(tt.name+"/"+pname, func(t *testing.T) {
				st := reconcile(t, NewIndex(tt.client), NewIndex(tt.server), p, p)
				checkDiff(t, st, tt.client, tt.server)
			})
		}
	}
}

// TestReconcileRandom is a property test: for random sets and random
// parameters on each side, have and need are exactly the two differences.
func TestReconcileRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	cases := 300
	if testing.Short() || raceEnabled {
		cases = 30
	}
	for i := range cases {
		shared := r.IntN(3000)
		if i%10 == 0 {
			shared = r.IntN(30000)
		}
		span := []int64{1, 10, 1000, month}[r.IntN(4)]
		client, server := splitSets(r, shared, r.IntN(200), r.IntN(200), epoch, span)
		cp, sp := randParams(r), randParams(r)
		st := reconcile(t, NewIndex(client), NewIndex(server), cp, sp)
		checkDiff(t, st, client, server)
		if t.Failed() {
			t.Fatalf("case %d: shared %d, span %d, client %+v, server %+v", i, shared, span, cp, sp)
		}
		if st.maxFrame > max(cp.withDefaults().FrameLimit, sp.withDefaults().FrameLimit) {
			t.Fatalf("case %d: frame of %d bytes over the limits %+v %+v", i, st.maxFrame, cp, sp)
		}
	}
}

func randParams(r *rand.Rand) Params {
	return Params{
		InitialBuckets: r.IntN(70),
		Buckets:        r.IntN(70),
		IDListMax:      r.IntN(100) - 5,
		FrameLimit:     []int{0, 1, minFrameLimit, 20000}[r.IntN(4)],
	}
}

// TestExampleExchange is the worked example of FORMAT.md, byte for byte.
func TestExampleExchange(t *testing.T) {
	ids := []string{
		"eb6b05c2e3b008592ac666594d78ed83e7b9ab30f825b9b08878128f7500008c",
		"39b916432333e069a4386917609215cc688eb99f06fed01aadc29b1b4b92d6f0",
		"abc81d58ebe3b9a87100d47f58bf15e9b1cbf62d38623f11d0f0d17179f5f3ba",
	}
	var items []Item
	for i, s := range ids {
		items = append(items, Item{CreatedAt: 1678011277 + int64(i), ID: mustID(t, s)})
	}
	sess := NewSession(NewIndex(items))
	c1 := sess.Initiate()
	if want := h("61 00 00 01 c15ce60f185fd24ae341076caa93daa5"); !bytes.Equal(c1, want) {
		t.Fatalf("client message %x, want %x", c1, want)
	}
	s1, err := Respond(NewIndex(items[:2]), c1)
	if want := h("61 00 00 02 02", ids[0], ids[1]); err != nil || !bytes.Equal(s1, want) {
		t.Fatalf("server reply %x, %v; want %x", s1, err, want)
	}
	next, have, need, err := sess.Reconcile(s1)
	if err != nil || next != nil || len(have) != 1 || have[0] != mustID(t, ids[2]) || len(need) != 0 {
		t.Fatalf("Reconcile = %x, have %x, need %x, %v", next, have, need, err)
	}

	w := newWriter()
	w.skip(Bound{Timestamp: 1678011277})
	w.fingerprint(Bound{Timestamp: 1678011277, ID: [32]byte{0xeb}}, Fingerprint{})
	w.idListHeader(Infinity, 0)
	if want := h("61  86a091d70e 00 00  01 01eb 01", strings.Repeat("00", 16), "  00 00 02 00"); !bytes.Equal(w.buf, want) {
		t.Fatalf("bounds example %x, want %x", w.buf, want)
	}
}
