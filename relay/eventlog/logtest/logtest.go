// Package logtest is the conformance suite every eventlog.Log backend must
// pass: durability and the commit hook, duplicates, every query filter on
// both query paths, revocation and as_of, history, export by sequence,
// bulk loads, the reconciliation source and the size figures. A backend's
// own tests call Run with a function that opens a fresh, empty log.
package logtest

import (
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/eventlog"
)

// Opener opens a fresh, empty log whose commit hook is hook (nil: none)
// and arranges for it to be closed when t ends.
type Opener func(t *testing.T, hook func([]eventlog.Committed)) eventlog.Log

// Run runs every conformance test against the logs open gives.
func Run(t *testing.T, open Opener) {
	tests := []struct {
		name string
		fn   func(*testing.T, Opener)
	}{
		{"AppendDuplicateAndHook", testAppendDuplicateAndHook},
		{"ConcurrentAppendsAllCommitted", testConcurrentAppends},
		{"QueryFilters", func(t *testing.T, open Opener) {
			l := open(t, nil)
			CheckFilters(t, l, func(evs ...*protocol.Event) { AppendAll(t, l, evs...) })
		}},
		{"TwoStepQuerySkipsRevoked", testTwoStepQuerySkipsRevoked},
		{"RevokeAndAsOf", testRevokeAndAsOf},
		{"ExportResumes", testExportResumes},
		{"BulkLoad", testBulkLoad},
		{"LookupsAndNotFound", testLookups},
		{"Items", testItems},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, open) })
	}
}

// Key returns the i-th deterministic test key.
func Key(i int) ed25519.PrivateKey {
	seed := make([]byte, 32)
	seed[0], seed[1] = byte(i), byte(i>>8)
	return ed25519.NewKeyFromSeed(seed)
}

// Ev returns an event signed by k.
func Ev(k ed25519.PrivateKey, createdAt, kind int64, content string, tags ...[]string) *protocol.Event {
	e := &protocol.Event{CreatedAt: createdAt, Kind: kind, Content: content, Tags: tags}
	if e.Tags == nil {
		e.Tags = [][]string{}
	}
	e.Sign(k)
	return e
}

// AppendAll appends evs one at a time, failing t on an error.
func AppendAll(t testing.TB, l eventlog.Log, evs ...*protocol.Event) {
	t.Helper()
	for _, e := range evs {
		if _, err := l.Append(context.Background(), eventlog.Record{Event: e}); err != nil {
			t.Fatal(err)
		}
	}
}

// IDs returns the ids of the event bodies.
func IDs(t testing.TB, bodies [][]byte) []string {
	t.Helper()
	out := make([]string, len(bodies))
	for i, b := range bodies {
		var e protocol.Event
		if err := json.Unmarshal(b, &e); err != nil {
			t.Fatal(err)
		}
		out[i] = e.ID
	}
	return out
}

// WithRevoked returns f answered in two steps (refs, then bodies), with the
// given ids revoked.
func WithRevoked(f eventlog.Filter, revoked map[string]bool) eventlog.Filter {
	f.Revoked = func(id string) bool { return revoked[id] }
	return f
}

// CheckFilters stores a small log with add (which may store the events in
// any way) and checks every filter against it, on both query paths.
func CheckFilters(t *testing.T, l eventlog.Log, add func(...*protocol.Event)) {
	t.Helper()
	a, b := Key(1), Key(2)
	p := protocol.AgentIDOf(b)
	e1 := Ev(a, 100, 1, "x", []string{"t", "weather"})
	// e2 carries its t tag twice: it is still one event in every answer.
	e2 := Ev(a, 200, 1, "y", []string{"t", "weather"}, []string{"p", p}, []string{"t", "weather"})
	e3 := Ev(b, 150, 2, "z", []string{"e", e1.ID, "root"}, []string{"t", "news"})
	e4 := Ev(b, 300, 4, "cap", []string{"cap", "transform.text.demo"})
	// e5 carries both topics, older than every other event.
	e5 := Ev(b, 50, 5, "both", []string{"t", "news"}, []string{"t", "alerts"})
	add(e1, e2, e3, e4, e5)
	i64 := func(v int64) *int64 { return &v }
	type F = eventlog.Filter
	cases := []struct {
		name string
		f    F
		want []string
	}{
		{"all newest first", F{}, []string{e4.ID, e2.ID, e3.ID, e1.ID, e5.ID}},
		{"tag t", F{Tags: map[string][]string{"t": {"weather"}}}, []string{e2.ID, e1.ID}},
		{"tag t two values", F{Tags: map[string][]string{"t": {"weather", "news"}}}, []string{e2.ID, e3.ID, e1.ID, e5.ID}},
		// e5 carries both values asked for: it is one match, not two.
		{"tag t values an event carries both", F{Tags: map[string][]string{"t": {"news", "alerts"}}}, []string{e3.ID, e5.ID}},
		{"tag t values, both, with limit", F{Tags: map[string][]string{"t": {"alerts", "news"}}, Limit: 2}, []string{e3.ID, e5.ID}},
		{"tag e", F{Tags: map[string][]string{"e": {e1.ID}}}, []string{e3.ID}},
		{"tags t and p", F{Tags: map[string][]string{"t": {"weather"}, "p": {p}}}, []string{e2.ID}},
		// A repeated tag name narrows, and the limit counts matches: the
		// newest t=news event (e3) does not carry alerts.
		{"repeated tag name", F{Tags: map[string][]string{"t": {"news"}}, MoreTags: []eventlog.TagCond{{Name: "t", Values: []string{"alerts"}}}}, []string{e5.ID}},
		{"more tags alone", F{MoreTags: []eventlog.TagCond{{Name: "t", Values: []string{"alerts"}}, {Name: "t", Values: []string{"news"}}}}, []string{e5.ID}},
		{"more tags with limit", F{MoreTags: []eventlog.TagCond{{Name: "t", Values: []string{"news"}}, {Name: "t", Values: []string{"alerts"}}}, Limit: 1}, []string{e5.ID}},
		{"more tags and kind", F{Kinds: []int64{2}, MoreTags: []eventlog.TagCond{{Name: "t", Values: []string{"news"}}, {Name: "t", Values: []string{"alerts"}}}}, nil},
		{"cap", F{Tags: map[string][]string{"cap": {"transform.text.demo"}}}, []string{e4.ID}},
		{"author", F{Authors: []string{protocol.AgentIDOf(a)}}, []string{e2.ID, e1.ID}},
		{"kinds", F{Kinds: []int64{2, 4}}, []string{e4.ID, e3.ID}},
		{"since until", F{Since: i64(150), Until: i64(200)}, []string{e2.ID, e3.ID}},
		{"tag with since", F{Tags: map[string][]string{"t": {"weather"}}, Since: i64(150)}, []string{e2.ID}},
		{"ids", F{IDs: []string{e1.ID, e4.ID}}, []string{e4.ID, e1.ID}},
		{"limit", F{Limit: 1}, []string{e4.ID}},
	}
	for _, c := range cases {
		// Once as one statement, once in two steps (refs, then bodies),
		// twice so the second may read its bodies from a cache.
		for i, f := range []F{c.f, WithRevoked(c.f, nil), WithRevoked(c.f, nil)} {
			got, err := l.Query(context.Background(), f)
			if err != nil {
				t.Fatal(err)
			}
			if g := IDs(t, got); strings.Join(g, ",") != strings.Join(c.want, ",") {
				t.Errorf("%s (path %d): got %v want %v", c.name, i, g, c.want)
			}
		}
	}
}

func testAppendDuplicateAndHook(t *testing.T, open Opener) {
	var mu sync.Mutex
	var hooked []int64
	l := open(t, func(c []eventlog.Committed) {
		mu.Lock()
		defer mu.Unlock()
		for _, x := range c {
			hooked = append(hooked, x.Seq)
		}
	})
	ctx := context.Background()
	e := Ev(Key(1), 100, 1, "a")
	r1, err := l.Append(ctx, eventlog.Record{Event: e, Raw: []byte(" raw "), RawType: "json"})
	if err != nil || r1.Duplicate {
		t.Fatal(r1, err)
	}
	r2, err := l.Append(ctx, eventlog.Record{Event: e})
	if err != nil || !r2.Duplicate || r2.Seq != r1.Seq {
		t.Fatalf("second copy: %+v %v", r2, err)
	}
	mu.Lock()
	if len(hooked) != 1 || hooked[0] != r1.Seq {
		t.Fatalf("hook saw %v, want [%d] before Append returned", hooked, r1.Seq)
	}
	mu.Unlock()
	st, err := l.Get(ctx, e.ID)
	if err != nil || string(st.Raw) != " raw " || st.RawType != "json" || st.Seq != r1.Seq {
		t.Fatalf("raw bytes not kept: %+v %v", st, err)
	}
	sig, found, _ := l.Lookup(ctx, e.ID)
	if !found || sig != e.Sig {
		t.Fatalf("lookup: %v %q", found, sig)
	}
	// A batch with a stored event and a repeated one: each judged alone.
	f := Ev(Key(1), 101, 1, "b")
	res, err := l.AppendBatch(ctx, []eventlog.Record{{Event: e}, {Event: f}, {Event: f}})
	if err != nil || len(res) != 3 || !res[0].Duplicate || res[1].Duplicate || !res[2].Duplicate || res[2].Seq != res[1].Seq {
		t.Fatalf("batch: %+v %v", res, err)
	}
}

func testConcurrentAppends(t *testing.T, open Opener) {
	l := open(t, nil)
	var wg sync.WaitGroup
	const n = 400
	for w := range 8 {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := range n / 8 {
				if _, err := l.Append(context.Background(), eventlog.Record{Event: Ev(Key(w), int64(1000+i), 1, fmt.Sprint(i))}); err != nil {
					t.Error(err)
				}
			}
		}(w)
	}
	wg.Wait()
	st, err := l.Stats(context.Background())
	if err != nil || st.Events != n || st.MaxSeq != n || st.Bytes <= 0 {
		t.Fatalf("%+v %v", st, err)
	}
}

// testTwoStepQuerySkipsRevoked revokes most of one author's events so the
// first page of refs is mostly revoked: the query must ask again and still
// return the newest unrevoked events, as the one-statement path does.
func testTwoStepQuerySkipsRevoked(t *testing.T, open Opener) {
	l := open(t, nil)
	a := Key(1)
	var evs []*protocol.Event
	revoked := map[string]bool{}
	var targets [][]string
	for i := range 40 {
		e := Ev(a, int64(100+i), 1, fmt.Sprint(i), []string{"t", "x"})
		evs = append(evs, e)
		if i >= 12 { // the 28 newest
			revoked[e.ID] = true
			targets = append(targets, []string{"e", e.ID})
		}
	}
	AppendAll(t, l, evs...)
	AppendAll(t, l, Ev(a, 50, 9, "", targets...))
	for _, f := range []eventlog.Filter{{Limit: 5, Tags: map[string][]string{"t": {"x"}}}, {Limit: 5, Authors: []string{protocol.AgentIDOf(a)}, Kinds: []int64{1}}} {
		one, err1 := l.Query(context.Background(), f)
		two, err2 := l.Query(context.Background(), WithRevoked(f, revoked))
		want := []string{evs[11].ID, evs[10].ID, evs[9].ID, evs[8].ID, evs[7].ID}
		if err1 != nil || err2 != nil || strings.Join(IDs(t, one), ",") != strings.Join(want, ",") || strings.Join(IDs(t, two), ",") != strings.Join(want, ",") {
			t.Fatalf("%+v: one statement %v, two steps %v, want %v (%v %v)", f, IDs(t, one), IDs(t, two), want, err1, err2)
		}
	}
}

func testRevokeAndAsOf(t *testing.T, open Opener) {
	l := open(t, nil)
	ctx := context.Background()
	a, b := Key(1), Key(2)
	p1 := Ev(a, 100, 0, `{"name":"one"}`)
	p2 := Ev(a, 200, 0, `{"name":"two"}`)
	post := Ev(a, 150, 1, "oops")
	other := Ev(b, 160, 1, "not yours")
	// A revoke by a (of its own post) and one by a of b's post: only the first counts.
	rv := Ev(a, 250, 9, "{}", []string{"e", post.ID}, []string{"e", other.ID})
	AppendAll(t, l, rv, p1, p2, post, other) // the revoke arrives first
	got, _ := l.Query(ctx, eventlog.Filter{})
	if g := strings.Join(IDs(t, got), ","); g != strings.Join([]string{rv.ID, p2.ID, other.ID, p1.ID}, ",") {
		t.Fatalf("revoked post still listed or other's post hidden: %v", g)
	}
	got, _ = l.Query(ctx, eventlog.Filter{IncludeRevoked: true})
	if len(got) != 5 {
		t.Fatalf("include_revoked: %d", len(got))
	}
	at := int64(180)
	got, _ = l.Query(ctx, eventlog.Filter{AsOf: &at, Kinds: []int64{0, 1}})
	if g := strings.Join(IDs(t, got), ","); g != strings.Join([]string{other.ID, post.ID, p1.ID}, ",") {
		t.Fatalf("as_of 180 (profile one, post not yet revoked): %v", g)
	}
	at = 1000
	got, _ = l.Query(ctx, eventlog.Filter{AsOf: &at, Kinds: []int64{0}})
	if g := IDs(t, got); len(g) != 1 || g[0] != p2.ID {
		t.Fatalf("as_of latest profile: %v", g)
	}
	hist, _ := l.History(ctx, protocol.AgentIDOf(a), 0)
	if g := IDs(t, hist); len(g) != 2 || g[0] != p1.ID {
		t.Fatalf("history oldest first: %v", g)
	}
}

func testExportResumes(t *testing.T, open Opener) {
	l := open(t, nil)
	var evs []*protocol.Event
	for i := range 5 {
		e := Ev(Key(1), int64(100-i), 1, fmt.Sprint(i))
		evs = append(evs, e)
		AppendAll(t, l, e)
	}
	var seqs []int64
	var through int64
	var bodies [][]byte
	err := l.Export(context.Background(), 2, func(th int64) error { through = th; return nil }, func(seq int64, body []byte) error {
		seqs = append(seqs, seq)
		bodies = append(bodies, slices.Clone(body))
		return nil
	})
	if err != nil || through != 5 || fmt.Sprint(seqs) != "[3 4 5]" {
		t.Fatalf("%v %d %v", err, through, seqs)
	}
	if g := IDs(t, bodies); strings.Join(g, ",") != strings.Join([]string{evs[2].ID, evs[3].ID, evs[4].ID}, ",") {
		t.Fatalf("export is not in log order: %v", g)
	}
	stop := errors.New("stop")
	n := 0
	err = l.Export(context.Background(), 0, func(int64) error { return nil }, func(int64, []byte) error { n++; return stop })
	if !errors.Is(err, stop) || n != 1 {
		t.Fatalf("fn's error does not stop the walk: %v after %d", err, n)
	}
}

// testBulkLoad loads a log in a bulk load, with a publish in the middle,
// and requires every filter to answer right during and after it, and the
// hook to see every event in log order.
func testBulkLoad(t *testing.T, open Opener) {
	ctx := context.Background()
	var mu sync.Mutex
	var hooked []int64
	l := open(t, func(c []eventlog.Committed) {
		mu.Lock()
		defer mu.Unlock()
		for _, x := range c {
			hooked = append(hooked, x.Seq)
		}
	})
	if err := l.BeginBulk(ctx); err != nil {
		t.Fatal(err)
	}
	if !l.Bulk() {
		t.Fatal("Bulk() is false in a bulk load")
	}
	CheckFilters(t, l, func(evs ...*protocol.Event) {
		recs := make([]eventlog.Record, len(evs))
		for i, e := range evs {
			recs[i] = eventlog.Record{Event: e}
		}
		res, err := l.LoadBatch(ctx, recs)
		if err != nil || len(res) != len(evs) {
			t.Fatal(res, err)
		}
	})
	late := Ev(Key(3), 400, 1, "late", []string{"t", "late"})
	AppendAll(t, l, late)
	if err := l.EndBulk(func(string) {}); err != nil {
		t.Fatal(err)
	}
	if l.Bulk() {
		t.Fatal("Bulk() after EndBulk")
	}
	got, err := l.Query(ctx, eventlog.Filter{Tags: map[string][]string{"t": {"late", "weather"}}})
	if err != nil || len(got) != 3 {
		t.Fatalf("after the load: %d events %v", len(got), err)
	}
	mu.Lock()
	defer mu.Unlock()
	if fmt.Sprint(hooked) != "[1 2 3 4 5 6]" {
		t.Fatalf("hook saw %v, want every seq in order", hooked)
	}
}

func testLookups(t *testing.T, open Opener) {
	l := open(t, nil)
	ctx := context.Background()
	e := Ev(Key(4), 100, 1, "hello", []string{"t", "x"})
	AppendAll(t, l, e)
	if a, err := l.Author(ctx, e.ID); err != nil || a != e.AgentID {
		t.Fatalf("author: %q %v", a, err)
	}
	if g, err := l.GetEvent(ctx, e.ID); err != nil || g.ID != e.ID || g.Content != "hello" {
		t.Fatalf("get event: %+v %v", g, err)
	}
	missing := strings.Repeat("ab", 32)
	if _, err := l.GetEvent(ctx, missing); !errors.Is(err, eventlog.ErrNotFound) {
		t.Fatalf("missing event: %v, want ErrNotFound", err)
	}
	if _, err := l.Get(ctx, missing); !errors.Is(err, eventlog.ErrNotFound) {
		t.Fatalf("missing stored event: %v, want ErrNotFound", err)
	}
	if _, found, err := l.Lookup(ctx, missing); found || err != nil {
		t.Fatalf("lookup of a missing id: %v %v", found, err)
	}
}

func testItems(t *testing.T, open Opener) {
	l := open(t, nil)
	a, b := Key(1), Key(2)
	evs := []*protocol.Event{Ev(a, 100, 1, "a"), Ev(a, 200, 2, "b"), Ev(b, 300, 1, "c")}
	AppendAll(t, l, evs...)
	collect := func(kinds []int64, authors []string, since int64) []string {
		var out []string
		if err := l.Items(context.Background(), kinds, authors, since, func(at int64, id []byte) {
			out = append(out, fmt.Sprintf("%d:%s", at, hex.EncodeToString(id)))
		}); err != nil {
			t.Fatal(err)
		}
		slices.Sort(out)
		return out
	}
	item := func(e *protocol.Event) string { return fmt.Sprintf("%d:%s", e.CreatedAt, e.ID) }
	if g := collect(nil, nil, 0); len(g) != 3 {
		t.Fatalf("all items: %v", g)
	}
	if g := collect([]int64{1}, nil, 150); len(g) != 1 || g[0] != item(evs[2]) {
		t.Fatalf("kind 1 since 150: %v", g)
	}
	if g := collect(nil, []string{protocol.AgentIDOf(a)}, 0); len(g) != 2 {
		t.Fatalf("author a: %v", g)
	}
}
