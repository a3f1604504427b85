package branches

import (
	"bytes"
	"testing"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/tasks/taskstest"
)

// snapshotFold returns a fold of votes, posts and posts opening voluntary
// forks, with one vote revoked, and its saved form.
func snapshotFold(t testing.TB) (*Fold, []byte) {
	t.Helper()
	pool := taskstest.Pool(5)
	f := NewFold()
	var evs []*protocol.Event
	for i := range 40 {
		a := pool[i%len(pool)]
		evs = append(evs, a.Sign(protocol.KindPost, int64(1_780_000_000+i*60), "post", []string{"t", "x"}))
		evs = append(evs, a.Sign(protocol.KindTrustVote, int64(1_780_000_000+i*60), `{"score":1}`, []string{"p", pool[(i+1)%len(pool)].ID}))
	}
	for i := range 3 {
		evs = append(evs, pool[i].Sign(protocol.KindPost, int64(1_780_003_000+i), "fork", []string{"branch", "b-" + evs[i*7].ID[:8+i]}))
	}
	for _, e := range evs {
		f.Add(e)
	}
	f.Remove(evs[1])
	var buf bytes.Buffer
	if err := f.Snapshot(&buf); err != nil {
		t.Fatal(err)
	}
	return f, buf.Bytes()
}

// TestRestoreEqualsFold restores a fold with voluntary forks and requires
// the digest of the fold that was saved; damaged forms are refused and
// leave the fold empty.
func TestRestoreEqualsFold(t *testing.T) {
	f, b := snapshotFold(t)
	g := NewFold()
	if err := g.Restore(bytes.NewReader(b), nil); err != nil {
		t.Fatal(err)
	}
	for _, at := range []int64{1_780_000_000, 1_780_010_000} {
		if f.Digest(at) != g.Digest(at) {
			t.Fatalf("digest at %d differs after restore", at)
		}
	}
	if v := g.Evaluate(1_780_010_000); len(v.Branches) < 2 {
		t.Fatalf("restored fold lost its forks: %+v", v.Branches)
	}
	for name, bad := range map[string][]byte{"short": b[:len(b)-5], "trailing": append(bytes.Clone(b), 0),
		"version": bytes.Replace(b, []byte("branches/2"), []byte("branches/1"), 1)} {
		h := NewFold()
		if err := h.Restore(bytes.NewReader(bad), nil); err == nil {
			t.Errorf("%s: restored", name)
		}
		if h.ids.Len() != 0 || len(h.votes) != 0 {
			t.Errorf("%s: a failed restore changed the fold", name)
		}
	}
}

// FuzzRestore feeds arbitrary bytes to Restore: an error, or a fold that
// evaluates and folds on, never a panic.
func FuzzRestore(f *testing.F) {
	_, b := snapshotFold(f)
	f.Add(b)
	f.Add(b[:len(b)/2])
	f.Add([]byte{})
	post := taskstest.Pool(1)[0].Sign(protocol.KindPost, 1_780_000_100, "p", []string{"branch", "b-00000000"})
	f.Fuzz(func(t *testing.T, b []byte) {
		g := NewFold()
		if err := g.Restore(bytes.NewReader(b), nil); err != nil {
			return
		}
		g.Digest(1_780_010_000)
		g.Add(post)
		g.Remove(post)
		g.Evaluate(1_780_010_000)
	})
}
