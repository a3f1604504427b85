package federation

import (
	"context"
	"slices"
	"strconv"
	"testing"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/state"
	"github.com/anp2net/relay/relay/state/statetest"
)

// TestMirrorConverges splits a random stream (votes, flags, revokes, task
// lifecycles) over two relays with a shared part, hides an event on one,
// mirrors once, and requires equal event sets and /state digests.
func TestMirrorConverges(t *testing.T) {
	evs := statetest.Corpus(77, 18, 25, corpusBase, 1800)
	a, as := peerRelay(t, "a")
	b, _ := peerRelay(t, "b")
	var onA, onB []*protocol.Event
	for i, e := range evs {
		switch i % 3 {
		case 0:
			onA = append(onA, e)
		case 1:
			onB = append(onB, e)
		default:
			onA, onB = append(onA, e), append(onB, e)
		}
	}
	publishAll(t, a, onA, 4)
	publishAll(t, b, onB, 4)
	res, err := as.MirrorOnce(context.Background(), b.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Need != len(onB)-len(evs)/3 || res.Have != len(onA)-len(evs)/3 || res.Rejected != 0 {
		t.Fatalf("mirror: %+v (a %d, b %d, shared %d)", res, len(onA), len(onB), len(evs)/3)
	}
	t.Logf("mirror of %d events with %d+%d differences: %+v", len(evs), res.Need, res.Have, res)
	if a.count(t) != int64(len(evs)) || b.count(t) != int64(len(evs)) {
		t.Fatalf("after mirroring a has %d, b has %d, want %d", a.count(t), b.count(t), len(evs))
	}
	for _, at := range []int64{vectorTime, vectorTime + 86400} {
		if da, db := a.state(t, at), b.state(t, at); da.Digest != db.Digest {
			t.Fatalf("states differ at %d in %q", at, state.FirstDifference(da, db))
		}
	}
	// A second pass finds nothing to do in one round trip.
	again, err := as.MirrorOnce(context.Background(), b.URL, nil)
	if err != nil || again.Need+again.Have != 0 || again.Rounds != 1 {
		t.Fatalf("second mirror: %+v %v", again, err)
	}
}

// TestMirrorCatchUpInBulk: a new mirror takes a log larger than its own in
// bulk mode (indexes dropped, rebuilt at the end) and ends with the same
// state and the same answers to filtered queries as its peer.
func TestMirrorCatchUpInBulk(t *testing.T) {
	defer func(n int) { bulkMin = n }(bulkMin)
	bulkMin = 100
	evs := statetest.Corpus(91, 18, 25, corpusBase, 900)
	a, _ := peerRelay(t, "a")
	c, cs := peerRelay(t, "c")
	// c already holds some of a's events, and a few a lacks: the bulk
	// catch-up reads a's whole export, keeps only what c lacks, and the
	// reconciliation after it pushes c's own.
	shared, own := evs[:150], statetest.Corpus(5, 3, 4, corpusBase, 20)
	publishAll(t, a, evs, 4)
	publishAll(t, c, append(slices.Clone(shared), own...), 4)
	var phases []string
	res, err := cs.MirrorOnce(context.Background(), a.URL, func(r MirrorResult) {
		if r.Phase != "" && (len(phases) == 0 || phases[len(phases)-1] != r.Phase) {
			phases = append(phases, r.Phase)
		}
	})
	inA := map[string]bool{}
	for _, e := range evs {
		inA[e.ID] = true
	}
	onlyC := map[string]bool{} // the corpus repeats some events
	for _, e := range own {
		if !inA[e.ID] {
			onlyC[e.ID] = true
		}
	}
	if err != nil || res.Accepted != len(evs)-len(shared) || res.Need != res.Accepted || res.Pushed != len(onlyC) || res.Phase != "" {
		t.Fatalf("catch-up: %+v %v", res, err)
	}
	if res.Rounds > 3 {
		t.Fatalf("the reconciliation after the export took %d round trips", res.Rounds)
	}
	if len(phases) < 2 || phases[0] != "bulk load" || phases[len(phases)-1] != "merging tag rows" || c.Store.Bulk() {
		t.Fatalf("phases %v, still bulk %v", phases, c.Store.Bulk())
	}
	if da, dc := a.state(t, vectorTime), c.state(t, vectorTime); da.Digest != dc.Digest {
		t.Fatalf("states differ in %q", state.FirstDifference(da, dc))
	}
	sameAnswers(t, a, c, filteredQueries(evs))
}

// filteredQueries returns GET /events paths that exercise every index:
// tag filters taken from evs, authors, kinds, and combinations.
func filteredQueries(evs []*protocol.Event) []string {
	paths := []string{"/events?limit=1000", "/events?kinds=6&limit=1000", "/events?kinds=1,50&limit=50"}
	seen := map[string]bool{}
	for _, e := range evs {
		for _, tag := range e.Tags {
			if len(tag) >= 2 && (len(tag[0]) == 1 || tag[0] == "cap") && !seen[tag[0]] {
				seen[tag[0]] = true
				paths = append(paths, "/events?limit=1000&"+tag[0]+"="+tag[1], "/events?limit=1000&kinds="+strconv.FormatInt(e.Kind, 10)+"&"+tag[0]+"="+tag[1])
			}
		}
		if len(paths) < 12 {
			paths = append(paths, "/events?limit=1000&authors="+e.AgentID)
		}
	}
	return paths
}

// sameAnswers requires both relays to answer every path with the same
// non-empty bytes.
func sameAnswers(t *testing.T, a, b *testRelay, paths []string) {
	t.Helper()
	for _, p := range paths {
		x, y := a.do(t, "GET", p, "", nil), b.do(t, "GET", p, "", nil)
		if x.status != 200 || string(x.body) != string(y.body) || len(x.body) < 10 {
			t.Fatalf("%s: %d %d bytes vs %d %d bytes", p, x.status, len(x.body), y.status, len(y.body))
		}
	}
}

// TestExportNeededPassesOnlyNeeded reads a peer's export for a subset of
// its events plus an id it never had: exactly the subset comes through, in
// chunks, and the missing id is handed back for a fetch by id.
func TestExportNeededPassesOnlyNeeded(t *testing.T) {
	a, _ := peerRelay(t, "a")
	_, cs := peerRelay(t, "c")
	evs := statetest.Corpus(13, 10, 12, corpusBase, 1300)
	publishAll(t, a, evs, 4)
	var need [][32]byte
	wanted := map[string]bool{}
	for i, e := range evs {
		if i%2 == 0 {
			var id [32]byte
			decodeID(id[:], e.ID)
			need, wanted[e.ID] = append(need, id), true
		}
	}
	missing := [32]byte{1, 2, 3}
	need = append(need[:5], append([][32]byte{missing}, need[5:]...)...)
	got, chunks := map[string]bool{}, 0
	rest, err := cs.exportNeeded(context.Background(), a.URL, need, func(evs []*protocol.Event) bool {
		chunks++
		for _, e := range evs {
			if !wanted[e.ID] || got[e.ID] {
				t.Errorf("unneeded or repeated event %s", e.ID)
			}
			got[e.ID] = true
		}
		return true
	})
	if err != nil || len(got) != len(wanted) || len(rest) != 1 || rest[0] != missing || chunks != (len(wanted)+mirrorChunk-1)/mirrorChunk {
		t.Fatalf("got %d of %d in %d chunks, rest %d, err %v", len(got), len(wanted), chunks, len(rest), err)
	}
}
