package trust

import (
	"bytes"
	"testing"

	"github.com/anp2net/relay/protocol"
)

// savedViews folds the random stream of seed (its revoked subset removed)
// and returns the views with their saved forms.
func savedViews(t testing.TB, seed uint64) (views, []byte, []byte) {
	t.Helper()
	s := randomStream(seed)
	v := newViews()
	v.add(s.events...)
	for _, e := range s.events {
		if s.revoked[e.ID] {
			v.remove(e)
		}
	}
	var g, m bytes.Buffer
	if err := v.g.Snapshot(&g); err != nil {
		t.Fatal(err)
	}
	if err := v.m.Snapshot(&m); err != nil {
		t.Fatal(err)
	}
	return v, g.Bytes(), m.Bytes()
}

func restoreViews(g, m []byte) (views, error, error) {
	v := newViews()
	return v, v.g.Restore(bytes.NewReader(g), nil), v.m.Restore(bytes.NewReader(m), nil)
}

// TestRestoreEqualsFold restores the graph and moderation from their saved
// forms and requires the digests of the views that were saved, then again
// after the stream's revoked events come back and the rest is revoked.
func TestRestoreEqualsFold(t *testing.T) {
	for seed := uint64(1); seed <= 4; seed++ {
		s := randomStream(seed)
		want, g, m := savedViews(t, seed)
		got, errG, errM := restoreViews(g, m)
		if errG != nil || errM != nil {
			t.Fatal(errG, errM)
		}
		check := func(stage string) {
			for _, now := range []int64{t0, t0 + 86400, t0 + 30*86400} {
				if want.g.Digest(now) != got.g.Digest(now) || want.m.Digest(now) != got.m.Digest(now) {
					t.Fatalf("seed %d %s at %d: digests differ", seed, stage, now)
				}
			}
		}
		check("restored")
		for _, e := range s.events {
			if s.revoked[e.ID] {
				want.add(e)
				got.add(e)
			} else if e.Kind == protocol.KindFlag || e.Kind == protocol.KindTrustVote {
				want.remove(e)
				got.remove(e)
			}
		}
		check("after more events")
	}
}

// TestRestoreRejectsDamage checks that a saved form cut short, with bytes
// after its end, of another version or with an index out of range is an
// error, and leaves the view as it was (empty).
func TestRestoreRejectsDamage(t *testing.T) {
	_, g, m := savedViews(t, 2)
	for name, form := range map[string][]byte{"graph": g, "moderation": m} {
		bad := map[string][]byte{
			"short":    form[:len(form)-3],
			"trailing": append(bytes.Clone(form), 1),
			"version":  bytes.Replace(form, []byte("/3"), []byte("/2"), 1),
			"empty":    nil,
		}
		for what, b := range bad {
			gb, mb := g, m
			if name == "graph" {
				gb = b
			} else {
				mb = b
			}
			v, errG, errM := restoreViews(gb, mb)
			err := errG
			if name == "moderation" {
				err = errM
			}
			if err == nil {
				t.Errorf("%s %s: restored", name, what)
			}
			if name == "graph" && (len(v.g.pairs) != 0 || len(v.g.agents.names) != 0) ||
				name == "moderation" && (v.m.events.Len() != 0 || len(v.m.targets) != 0) {
				t.Errorf("%s %s: a failed restore changed the view", name, what)
			}
		}
	}
}

// FuzzRestore feeds arbitrary bytes to both views' Restore: an error or a
// view that answers its queries, never a panic.
func FuzzRestore(f *testing.F) {
	_, g, m := savedViews(f, 3)
	f.Add(g, m)
	f.Add(g[:len(g)/2], m[:len(m)/2])
	f.Add([]byte{}, []byte{})
	s := randomStream(3)
	f.Fuzz(func(t *testing.T, g, m []byte) {
		v, errG, errM := restoreViews(g, m)
		if errG == nil {
			v.g.Digest(t0)
		}
		if errM == nil && errG == nil {
			v.m.Digest(t0)
			// A restored view folds on: revoke and add events it may hold.
			v.remove(s.events[:20]...)
			v.add(s.events[10:30]...)
			v.m.Digest(t0)
		}
	})
}
