package discovery_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/discovery"
	"github.com/anp2net/relay/relay/state"
	"github.com/anp2net/relay/relay/state/statetest"
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

// snapState is a state whose only module fold is a fresh discovery fold
// in memory.
func snapState() (*state.State, *discovery.Fold) {
	f := discovery.New()
	return state.New(state.Options{Folds: []state.NamedFold{{Name: "discovery", Fold: f}}}), f
}

// fileState is a state whose only module fold is a discovery fold over
// the store at path.
func fileState(t *testing.T, path string) (*state.State, *discovery.Fold) {
	t.Helper()
	f, err := discovery.Open(path, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return state.New(state.Options{Folds: []state.NamedFold{{Name: "discovery", Fold: f}}}), f
}

// TestSnapshotResumeEqualsFold saves a relay-like state (events in arrival
// order, revocations withdrawing earlier targets through a lookup) at
// several cuts of a random corpus, goes on folding the rest into the
// saved fold without saving again (its store's open transaction), closes
// it as a kill would (the transaction rolls back), resumes a fresh state
// over the same store file from the saved files with the discovery view
// restored (not refolded), adds the tail, and requires every discovery
// answer and the /state digest of a state that folded everything from
// empty.
func TestSnapshotResumeEqualsFold(t *testing.T) { testSnapshotResume(t, false) }

// TestSnapshotResumeAfterCommits is TestSnapshotResumeEqualsFold with the
// open transaction committed every few row changes, before and after the
// save: a restart from the save takes back, with the undo journal, what
// was committed after it.
func TestSnapshotResumeAfterCommits(t *testing.T) {
	defer discovery.SetStoreBounds(7, 1<<30)()
	testSnapshotResume(t, false)
}

// TestSnapshotUndoBounded: once the undo journal passes its bound the
// store is committed unsaved, so a restart from the last save refuses it
// and the view is refolded, with the same answers and digest.
func TestSnapshotUndoBounded(t *testing.T) {
	defer discovery.SetStoreBounds(7, 20)()
	testSnapshotResume(t, true)
}

func testSnapshotResume(t *testing.T, refused bool) {
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
			path := filepath.Join(t.TempDir(), "discovery.db")
			seen = map[string]*protocol.Event{}
			saved, sf := fileState(t, path)
			for i, e := range evs[:cut] {
				add(saved, i+1, e)
			}
			if mode, bulk := sf.StoreMode(); mode != "off" || !bulk {
				t.Fatalf("a fold from empty fills its store with journal %q, bulk %v", mode, bulk)
			}
			sv := statetest.SaveLatest(t, saved)
			if mode, bulk := sf.StoreMode(); mode != "wal" || bulk {
				t.Fatalf("after its first save the store has journal %q, bulk %v", mode, bulk)
			}
			for i, e := range evs[cut:] { // folded, never saved
				add(saved, cut+i+1, e)
			}
			sf.Close()
			seen = map[string]*protocol.Event{}
			for _, e := range evs[:cut] {
				seen[e.ID] = e
			}
			got, gf := fileState(t, path)
			restored, why, err := got.Resume(sv, lookup)
			if err != nil {
				t.Fatal(err)
			}
			switch tail := len(evs) - cut; {
			case refused && tail > 30 && restored["discovery"]:
				t.Fatalf("seed %d cut %d: a store whose undo journal passed its bound was adopted", seed, cut)
			case refused && !restored["discovery"]:
				for i, e := range evs[:cut] { // as the relay feeds a view it could not restore
					got.FeedHead(e, restored)
					_ = i
				}
			case !refused && (!restored["discovery"] || len(why) != 0):
				t.Fatalf("seed %d cut %d: restored %v, not restored %v", seed, cut, restored, why)
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

// TestSnapshotStoreNeverTrusted: a store whose committed token is not the
// saved state's (saved again after the snapshot kept), that is truncated,
// whose header is damaged, or that is missing is refused: Resume reports
// the discovery view not restored, the store reads as empty, and feeding
// it the events up to the snapshot (as the relay does) then the tail gives
// the answers and digest of a fold from empty.
func TestSnapshotStoreNeverTrusted(t *testing.T) {
	const base = 1763800000
	now := int64(base + 2*86400)
	pool := taskstest.Pool(12)
	evs := corpus(23, 12, base)
	seen := map[string]*protocol.Event{}
	lookup := func(id string) *protocol.Event { return seen[id] }
	for _, e := range evs {
		seen[e.ID] = e
	}
	full, ff := snapState()
	for i, e := range evs {
		full.Add(int64(i+1), e, lookup)
	}
	want, wantDigest := snapViews(ff, pool, evs, now), full.Digest(now)
	cut := len(evs) / 2
	for _, damage := range []string{"token", "truncated", "header", "missing", "bulk"} {
		path := filepath.Join(t.TempDir(), "discovery.db")
		saved, sf := fileState(t, path)
		for i, e := range evs[:cut] {
			saved.Add(int64(i+1), e, lookup)
		}
		sv := statetest.SaveLatest(t, saved)
		switch damage {
		case "token": // a later save whose snapshot was lost
			saved.Add(int64(cut+1), evs[cut], lookup)
			if _, err := saved.Capture(); err != nil {
				t.Fatal(err)
			}
			sf.Close()
		case "truncated":
			sf.Close()
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(path, fi.Size()/2); err != nil {
				t.Fatal(err)
			}
		case "header":
			sf.Close()
			fh, err := os.OpenFile(path, os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			fh.WriteAt([]byte("not a database at all"), 0)
			fh.Close()
		case "missing":
			sf.Close()
			os.Remove(path)
		case "bulk": // a kill -9 while a refold filled the emptied file
			sf.Close()
			g, err := discovery.Open(path, false)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range evs {
				g.Add(e)
			}
			if mode, bulk := g.StoreMode(); mode != "off" || !bulk {
				t.Fatalf("a refold fills its store with journal %q, bulk %v", mode, bulk)
			}
			// The file as the disk holds it at the kill: what bulk mode
			// wrote there, without its cache.
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			g.Close()
			if err := os.WriteFile(path, b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		got, gf := fileState(t, path)
		restored, why, err := got.Resume(sv, lookup)
		if err != nil || restored["discovery"] || why["discovery"] == "" {
			t.Fatalf("%s: restored %v, not restored %v, %v", damage, restored, why, err)
		}
		if by, n := gf.CitedBy(evs[0].ID); len(by) != 0 || n != 0 || len(gf.Copresence(pool[0].ID, now, 30*86400, 100)) != 0 {
			t.Fatalf("%s: a refused store still answers", damage)
		}
		for i, e := range evs[:cut] {
			got.FeedHead(e, restored)
			_ = i
		}
		for i, e := range evs[cut:] {
			got.Add(int64(cut+i+1), e, lookup)
		}
		if v := snapViews(gf, pool, evs, now); v != want {
			t.Fatalf("%s: rebuilt answers differ from the full fold's: %s", damage, firstDiff(v, want))
		}
		if d := got.Digest(now); d.Digest != wantDigest.Digest {
			t.Fatalf("%s: rebuilt digest %s, folded %s; first difference %s", damage, d.Digest, wantDigest.Digest,
				state.FirstDifference(d, wantDigest))
		}
	}
}

// TestSnapshotSavesNoBodies: the saved form holds no post's content (the
// store holds the per-event indexes; the posts are records), and a fold
// restored from a fold that removed everything is empty.
func TestSnapshotSavesNoBodies(t *testing.T) {
	evs := corpus(5, 6, 1763800000)
	path := filepath.Join(t.TempDir(), "discovery.db")
	f, err := discovery.Open(path, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		f.Add(e)
	}
	var full bytes.Buffer
	if err := f.Snapshot(&full); err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		if e.Kind == protocol.KindPost && bytes.Contains(full.Bytes(), []byte(e.Content)) {
			t.Fatalf("the saved form holds a post's content %q", e.Content)
		}
	}
	for _, e := range evs {
		f.Remove(e)
	}
	var none bytes.Buffer
	f.Snapshot(&none)
	f.Close()
	g, err := discovery.Open(path, false)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if err := g.Restore(bytes.NewReader(none.Bytes()), nil); err != nil {
		t.Fatal(err)
	}
	now := int64(1763800000 + 86400)
	if a, b := snapViews(g, taskstest.Pool(6), evs, now), snapViews(discovery.New(), taskstest.Pool(6), evs, now); a != b {
		t.Fatalf("restored from an emptied fold:\n%s\nempty:\n%s", a, b)
	}
}

// FuzzSnapshotRestore: Restore of arbitrary bytes never panics, and when
// it fails the fold is unchanged (still empty). A fold in memory has no
// committed token, so every saved form is parsed whole and then refused.
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
		defer g.Close()
		if err := g.Restore(bytes.NewReader(data), nil); err == nil {
			t.Fatal("a fold in memory adopted a saved store")
		}
		if n, _ := g.Size(); g.Digest(0) != empty || n != emptyN {
			t.Fatal("a failed restore changed the fold")
		}
	})
}

// TestStoreUncheckedReadsEmpty: a store file with content that no Restore
// accepted (its snapshot deleted, as anp2 redact does) reads as empty,
// and the first event folded in empties it: the fold then answers as one
// that folded the same events from nothing.
func TestStoreUncheckedReadsEmpty(t *testing.T) {
	const base = 1763800000
	now := int64(base + 2*86400)
	pool := taskstest.Pool(12)
	evs := corpus(24, 12, base)
	path := filepath.Join(t.TempDir(), "discovery.db")
	f, err := discovery.Open(path, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		f.Add(e)
	}
	if err := f.Snapshot(io.Discard); err != nil {
		t.Fatal(err)
	}
	f.Close()
	g, err := discovery.Open(path, false)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	empty := discovery.New()
	if a, b := snapViews(g, pool, evs, now), snapViews(empty, pool, evs, now); a != b {
		t.Fatalf("an unchecked store answers: %s", firstDiff(a, b))
	}
	tail := evs[len(evs)/2:]
	for _, e := range tail {
		g.Add(e)
		empty.Add(e)
	}
	if a, b := snapViews(g, pool, evs, now), snapViews(empty, pool, evs, now); a != b {
		t.Fatalf("a store folded over an unchecked one differs from a fresh one: %s", firstDiff(a, b))
	}
	if g.Digest(now) != empty.Digest(now) {
		t.Fatal("digests differ")
	}
}

// TestSnapshotPostsBeyondWindow: an agent's posts older than its 50-post
// window live in the store; a fold saved with 70 posts, closed and
// restored, then asked to remove posts inside its window (which brings
// stored ones back) and outside it, answers as a fold that never saw the
// removed posts.
func TestSnapshotPostsBeyondWindow(t *testing.T) {
	a := taskstest.Pool(3)
	const base = 1763800000
	var posts []*protocol.Event
	for i := range 70 {
		posts = append(posts, a[0].Sign(protocol.KindPost, base+int64(i), fmt.Sprintf("topic%d shared words here %d", i%7, i*i%13),
			[]string{"t", fmt.Sprint("t", i%5)}))
	}
	others := []*protocol.Event{
		a[1].Sign(protocol.KindPost, base, "topic3 shared words"),
		a[2].Sign(protocol.KindPost, base, "topic1 words 9 here"),
	}
	path := filepath.Join(t.TempDir(), "discovery.db")
	f, err := discovery.Open(path, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range append(slices.Clone(posts), others...) {
		f.Add(e)
	}
	var saved bytes.Buffer
	if err := f.Snapshot(&saved); err != nil {
		t.Fatal(err)
	}
	f.Close()
	g, err := discovery.Open(path, false)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if err := g.Restore(bytes.NewReader(saved.Bytes()), nil); err != nil {
		t.Fatal(err)
	}
	removed := []int{69, 40, 25, 3, 68} // inside the window (twice from the store), then outside it
	clean := discovery.New()
	for i, e := range posts {
		if !slices.Contains(removed, i) {
			clean.Add(e)
		}
	}
	for _, e := range others {
		clean.Add(e)
	}
	for _, i := range removed {
		g.Remove(posts[i])
	}
	for _, x := range a {
		want, got := clean.Neighbors(x.ID, 5), g.Neighbors(x.ID, 5)
		if len(want) == 0 || !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: %+v, want %+v", x.Name, got, want)
		}
		if w, g := clean.SampleTopics(x.ID), g.SampleTopics(x.ID); !reflect.DeepEqual(w, g) {
			t.Fatalf("%s: sample topics %v, want %v", x.Name, g, w)
		}
	}
}

// TestClosedFoldIsInert: a fold whose store is closed (a relay stopping
// while a background loop still reads) neither panics nor folds: what is
// in its store reads as empty.
func TestClosedFoldIsInert(t *testing.T) {
	evs := corpus(25, 6, 1763800000)
	f, err := discovery.Open(filepath.Join(t.TempDir(), "discovery.db"), false)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs[:len(evs)/2] {
		f.Add(e)
	}
	f.Close()
	for _, e := range evs[len(evs)/2:] {
		f.Add(e)
		f.Remove(e)
	}
	for _, a := range taskstest.Pool(6) {
		for _, m := range f.Copresence(a.ID, 1763900000, 30*86400, 100) {
			for _, c := range m.Contexts {
				if c.Type != discovery.CtxCapability { // capabilities are in memory
					t.Fatalf("a closed fold answers from its store: %+v", m)
				}
			}
		}
	}
	for _, e := range evs {
		if by, n := f.CitedBy(e.ID); len(by) != 0 || n != 0 {
			t.Fatal("a closed fold answers citations")
		}
	}
	if err := f.Snapshot(io.Discard); err != nil {
		t.Fatal(err)
	}
}
