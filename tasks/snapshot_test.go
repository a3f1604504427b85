package tasks

import (
	"bytes"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/anp2net/relay/protocol"
	tt "github.com/anp2net/relay/tasks/taskstest"
)

// roundTrip saves f and restores the saved form into a new fold.
func roundTrip(t testing.TB, f *Fold) *Fold {
	t.Helper()
	var buf bytes.Buffer
	if err := f.Snapshot(&buf); err != nil {
		t.Fatal(err)
	}
	g := New(f.weight)
	if err := g.Restore(bytes.NewReader(buf.Bytes()), func(string) *protocol.Event {
		t.Fatal("restore read an event back")
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return g
}

// TestRestoreEqualsFold saves a fold of shuffled random lifecycles (a
// subset then revoked) at a random cut, restores it without the log, folds
// the rest (adds and revocations) into both, and requires the views and
// digests of a fold of everything from empty, at the cut and after.
func TestRestoreEqualsFold(t *testing.T) {
	pool := tt.Pool(8)
	for seed := uint64(1); seed <= 4; seed++ {
		rng := rand.New(rand.NewPCG(seed, 31))
		evs := shuffled(rng, tt.Lifecycles(rng, pool, 60, t0))
		var removed []*protocol.Event
		for _, e := range evs {
			if rng.IntN(7) == 0 {
				removed = append(removed, e)
			}
		}
		cut := rng.IntN(len(evs))
		part := New(tt.Weight)
		for _, e := range evs[:cut] {
			part.Add(e)
		}
		for _, e := range removed[:len(removed)/2] {
			part.Remove(e)
		}
		ref := New(tt.Weight)
		for _, e := range evs[:cut] {
			ref.Add(e)
		}
		for _, e := range removed[:len(removed)/2] {
			ref.Remove(e)
		}
		got := roundTrip(t, part)
		compareFolds(t, seed, 0, ref, got)
		sameRecords(t, ref, got)
		for _, e := range evs[cut:] {
			ref.Add(e)
			got.Add(e)
		}
		for _, e := range removed[len(removed)/2:] {
			ref.Remove(e)
			got.Remove(e)
		}
		compareFolds(t, seed, 1, ref, got)
		// A second round trip of a fold that was itself restored.
		compareFolds(t, seed, 2, ref, roundTrip(t, got))
	}
}

// sameRecords requires a and b to hold the same tasks with the same
// records, parsed contents included.
func sameRecords(t *testing.T, a, b *Fold) {
	t.Helper()
	if len(a.tasks) != len(b.tasks) || len(a.order) != len(b.order) {
		t.Fatalf("tasks %d/%d, ordered %d/%d", len(a.tasks), len(b.tasks), len(a.order), len(b.order))
	}
	for id, ta := range a.tasks {
		tb := b.tasks[id]
		if tb == nil {
			t.Fatalf("task %x missing", id[:4])
		}
		recs := func(t *task, f *Fold) []any {
			var out []any
			for _, r := range append([]*rec{t.req}, append(append(append(append(append([]*rec(nil), t.lists[0]...), t.lists[1]...), t.lists[2]...), t.lists[3]...), t.lists[4]...)...) {
				if r == nil {
					out = append(out, nil)
					continue
				}
				out = append(out, []any{r.id, r.at, f.names[r.agent], r.kind, r.valid, r.invalid, r.parsed})
			}
			return out
		}
		if ra, rb := recs(ta, a), recs(tb, b); !reflect.DeepEqual(ra, rb) {
			t.Fatalf("task %x: records differ\n%#v\n%#v", id[:4], ra, rb)
		}
	}
}

// TestRestoreRejects checks that a saved form of another version, cut
// short, with trailing bytes or with an agent index out of range is an
// error and leaves the fold empty, and that a fold that is not empty is
// never restored into.
func TestRestoreRejects(t *testing.T) {
	f := New(nil)
	for _, e := range tt.Lifecycles(rand.New(rand.NewPCG(3, 3)), tt.Pool(4), 10, t0) {
		f.Add(e)
	}
	var buf bytes.Buffer
	if err := f.Snapshot(&buf); err != nil {
		t.Fatal(err)
	}
	good := buf.Bytes()
	bad := map[string][]byte{
		"empty":    {},
		"short":    good[:len(good)/2],
		"trailing": append(bytes.Clone(good), 0),
		"version":  append([]byte{byte(len("tasks.ids/2"))}, append([]byte("tasks.ids/2"), good[1+len(snapshotVersion):]...)...),
	}
	for name, b := range bad {
		g := New(nil)
		if err := g.Restore(bytes.NewReader(b), nil); err == nil {
			t.Errorf("%s: restored", name)
		}
		if len(g.tasks) != 0 || len(g.names) != 0 {
			t.Errorf("%s: a failed restore changed the fold", name)
		}
	}
	if err := f.Restore(bytes.NewReader(good), nil); err == nil {
		t.Error("restored into a fold that is not empty")
	}
}

// FuzzRestore feeds arbitrary bytes to Restore: it must fail or succeed
// without panicking, and a restored fold must answer its queries.
func FuzzRestore(f *testing.F) {
	src := New(nil)
	for _, e := range tt.Lifecycles(rand.New(rand.NewPCG(5, 5)), tt.Pool(4), 6, t0) {
		src.Add(e)
	}
	var buf bytes.Buffer
	if err := src.Snapshot(&buf); err != nil {
		f.Fatal(err)
	}
	f.Add(buf.Bytes())
	f.Add(buf.Bytes()[:buf.Len()/3])
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		g := New(nil)
		if err := g.Restore(bytes.NewReader(b), nil); err != nil {
			return
		}
		g.List(Filter{}, t0+100, tt.Weight)
		g.Digest(t0 + 100)
		g.CreditChanges(0, nil)
	})
}

// TestCaptureThenAdd encodes a capture after more events (and
// revocations) were folded in, as a save does while publishes go on: the
// restored fold must be the fold at the capture.
func TestCaptureThenAdd(t *testing.T) {
	pool := tt.Pool(6)
	for seed := uint64(1); seed <= 3; seed++ {
		rng := rand.New(rand.NewPCG(seed, 41))
		evs := shuffled(rng, tt.Lifecycles(rng, pool, 40, t0))
		cut := len(evs) / 2
		f, ref := New(tt.Weight), New(tt.Weight)
		for _, e := range evs[:cut] {
			f.Add(e)
			ref.Add(e)
		}
		encode := f.CaptureSnapshot()
		for _, e := range evs[cut:] {
			f.Add(e)
		}
		for _, e := range evs[:cut/3] {
			f.Remove(e)
		}
		var buf bytes.Buffer
		if err := encode(&buf); err != nil {
			t.Fatal(err)
		}
		got := New(tt.Weight)
		if err := got.Restore(&buf, nil); err != nil {
			t.Fatal(err)
		}
		compareFolds(t, seed, 0, ref, got)
		sameRecords(t, ref, got)
	}
}
