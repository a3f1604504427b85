package discovery_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/discovery"
	"github.com/anp2net/relay/relay/state"
	"github.com/anp2net/relay/tasks/taskstest"
)

var pointer = regexp.MustCompile(`0x[0-9a-f]+`)

// snapViews is views plus what the other routes read: citations of
// every event, discoverability, interests, sample topics, the reader rule
// and the fold's size.
func snapViews(f *discovery.Fold, agents []taskstest.Agent, evs []*protocol.Event, now int64) string {
	// views prints a beacon's event as a pointer: its event whole is
	// compared below.
	out := pointer.ReplaceAllString(views(f, agents, now), "event")
	for _, a := range agents {
		fo, to, ca := f.Interests(a.ID)
		out += fmt.Sprintf("%s %s %v %v %v %v %v\n", a.Name, f.Discoverability(a.ID), fo, to, ca, f.SampleTopics(a.ID),
			f.CopresenceScores(a.ID, now, 30*86400, 100))
		for _, b := range agents {
			out += fmt.Sprint(f.MaySee(b.ID, a.ID), f.Follows(a.ID, b.ID), " ")
		}
	}
	for _, e := range evs {
		by, n := f.CitedBy(e.ID)
		if n > 0 || len(f.Cites(e.ID)) > 0 {
			b, _ := json.Marshal(by)
			out += fmt.Sprintf("%s %d %s %v %d\n", e.ID[:8], n, b, f.Cites(e.ID), f.Reach(e.ID, e.AgentID))
		}
	}
	all, n := f.Active(discovery.BeaconQuery{}, now)
	b, _ := json.Marshal(all) // the beacon events whole, signatures included
	entries, _ := f.Size()
	return out + fmt.Sprintf("beacons %d %s\nentries %d\n", n, b, entries)
}

// firstDiff is the first line where a and b differ, both ways.
func firstDiff(a, b string) string {
	la, lb := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := range min(len(la), len(lb)) {
		if la[i] != lb[i] {
			j := 0
			for j < min(len(la[i]), len(lb[i])) && la[i][j] == lb[i][j] {
				j++
			}
			from := max(0, j-200)
			return fmt.Sprintf("line %d at byte %d:\n…%s\nvs\n…%s", i, j, la[i][from:min(len(la[i]), j+200)], lb[i][from:min(len(lb[i]), j+200)])
		}
	}
	return fmt.Sprintf("%d lines vs %d", len(la), len(lb))
}

// snapState is a state whose only module fold is a fresh discovery fold.
func snapState() (*state.State, *discovery.Fold) {
	f := discovery.New()
	return state.New(state.Options{Folds: []state.NamedFold{{Name: "discovery", Fold: f}}}), f
}

// TestSnapshotResumeEqualsFold saves a relay-like state (events in arrival
// order, revocations withdrawing earlier targets through a lookup) at
// several cuts of a random corpus, resumes a fresh state from the saved
// files with the discovery view restored (not refolded), adds the tail,
// and requires every discovery answer and the /state digest of a state
// that folded everything from empty.
func TestSnapshotResumeEqualsFold(t *testing.T) {
	const base = 1763800000
	now := int64(base + 2*86400)
	pool := taskstest.Pool(12)
	for seed := range uint64(3) {
		evs := corpus(seed+20, 12, base)
		var seen map[string]*protocol.Event
		lookup := func(id string) *protocol.Event { return seen[id] }
		add := func(s *state.State, seq int, e *protocol.Event) {
			seen[e.ID] = e
			s.Add(int64(seq), e, lookup)
		}
		seen = map[string]*protocol.Event{}
		full, ff := snapState()
		for i, e := range evs {
			add(full, i+1, e)
		}
		want, wantDigest := snapViews(ff, pool, evs, now), full.Digest(now)
		if wantDigest.Revoked == 0 {
			t.Fatalf("seed %d: the corpus revokes nothing", seed)
		}
		for _, cut := range []int{0, 1, len(evs) / 2, len(evs) - 3, len(evs)} {
			seen = map[string]*protocol.Event{}
			saved, _ := snapState()
			for i, e := range evs[:cut] {
				add(saved, i+1, e)
			}
			c, err := saved.Capture()
			if err != nil {
				t.Fatal(err)
			}
			dir, err := state.OpenDir(filepath.Join(t.TempDir(), "state"))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := dir.Save(c); err != nil {
				t.Fatal(err)
			}
			sv, err := dir.Latest()
			if err != nil {
				t.Fatal(err)
			}
			got, gf := snapState()
			restored, why, err := got.Resume(sv, lookup)
			if err != nil || !restored["discovery"] || len(why) != 0 {
				t.Fatalf("seed %d cut %d: restored %v, not restored %v, %v", seed, cut, restored, why, err)
			}
			for i, e := range evs[cut:] {
				add(got, cut+i+1, e)
			}
			if v := snapViews(gf, pool, evs, now); v != want {
				t.Fatalf("seed %d cut %d: resumed answers differ from the full fold's: %s", seed, cut, firstDiff(v, want))
			}
			if d := got.Digest(now); d.Digest != wantDigest.Digest || d.Views["discovery"] != wantDigest.Views["discovery"] {
				t.Fatalf("seed %d cut %d: resumed digest %s, folded %s; first difference %s", seed, cut, d.Digest, wantDigest.Digest,
					state.FirstDifference(d, wantDigest))
			}
		}
	}
}

// TestSnapshotSavesWhatIsHeld: a revoked event's data is not in the saved
// form, and a fold restored from a fold that removed everything is empty.
func TestSnapshotSavesWhatIsHeld(t *testing.T) {
	evs := corpus(5, 6, 1763800000)
	f := discovery.New()
	for _, e := range evs {
		f.Add(e)
	}
	var full bytes.Buffer
	if err := f.Snapshot(&full); err != nil {
		t.Fatal(err)
	}
	var post *protocol.Event
	for _, e := range evs {
		if e.Kind == protocol.KindPost {
			post = e
		}
	}
	f.Remove(post)
	var less bytes.Buffer
	f.Snapshot(&less)
	if bytes.Contains(less.Bytes(), []byte(post.Content)) || !bytes.Contains(full.Bytes(), []byte(post.Content)) {
		t.Fatalf("the removed post's content: in the full form %v, in the form after its removal %v",
			bytes.Contains(full.Bytes(), []byte(post.Content)), bytes.Contains(less.Bytes(), []byte(post.Content)))
	}
	for _, e := range evs {
		f.Remove(e)
	}
	var none bytes.Buffer
	f.Snapshot(&none)
	g := discovery.New()
	if err := g.Restore(bytes.NewReader(none.Bytes()), nil); err != nil {
		t.Fatal(err)
	}
	now := int64(1763800000 + 86400)
	if a, b := snapViews(g, taskstest.Pool(6), evs, now), snapViews(discovery.New(), taskstest.Pool(6), evs, now); a != b {
		t.Fatalf("restored from an emptied fold:\n%s\nempty:\n%s", a, b)
	}
}

// FuzzSnapshotRestore: Restore of arbitrary bytes never panics, and when
// it fails the fold is unchanged (still empty); the saved form it accepts
// snapshots again to the same bytes.
func FuzzSnapshotRestore(f *testing.F) {
	src := discovery.New()
	for _, e := range corpus(7, 4, 1763800000) {
		src.Add(e)
	}
	var buf bytes.Buffer
	if err := src.Snapshot(&buf); err != nil {
		f.Fatal(err)
	}
	valid := buf.Bytes()
	f.Add(valid)
	f.Add(valid[:len(valid)/2])
	f.Add(valid[:len(valid)-1])
	f.Add([]byte{})
	f.Add([]byte{0, 0})
	f.Add([]byte{0, 1, 2, 2, 0x81, 0x80, 0x80, 0x80, 0x10})
	empty := discovery.New().Digest(0)
	emptyN, _ := discovery.New().Size()
	f.Fuzz(func(t *testing.T, data []byte) {
		g := discovery.New()
		if err := g.Restore(bytes.NewReader(data), nil); err != nil {
			if n, _ := g.Size(); g.Digest(0) != empty || n != emptyN {
				t.Fatalf("a failed restore changed the fold: %v", err)
			}
			return
		}
		var again bytes.Buffer
		if err := g.Snapshot(&again); err != nil {
			t.Fatal(err)
		}
		h := discovery.New()
		if err := h.Restore(bytes.NewReader(again.Bytes()), nil); err != nil {
			t.Fatalf("a restored fold's own saved form is refused: %v", err)
		}
		var third bytes.Buffer
		h.Snapshot(&third)
		if !bytes.Equal(again.Bytes(), third.Bytes()) || h.Digest(0) != g.Digest(0) {
			t.Fatal("saving a restored fold is not stable")
		}
	})
}
