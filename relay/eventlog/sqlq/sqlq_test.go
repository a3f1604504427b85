package sqlq

import (
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/anp2net/relay/relay/eventlog"
)

var (
	lite = Dialect{Tags: "tags", TagKey: "seq", Join: "CROSS JOIN", BySeq: " NOT INDEXED"}
	pg   = Dialect{Numbered: true, Tags: "tags", TagKey: "id", Join: "JOIN"}
)

func ptr(v int64) *int64 { return &v }

// TestPlaceholdersMatchArguments builds every shape of statement in both
// dialects and requires one argument per placeholder: ? in order, or $1…$n
// each used (the backends' conformance suite checks what they select).
func TestPlaceholdersMatchArguments(t *testing.T) {
	id := strings.Repeat("ab", 32)
	long := make([]int64, 300)
	for i := range long {
		long[i] = int64(i + 1)
	}
	queries := []Query{
		{},
		{Filter: eventlog.Filter{IDs: []string{id, "zz"}, Kinds: []int64{1}, Limit: 5}},
		{Filter: eventlog.Filter{Authors: []string{id}, Kinds: []int64{1, 2}, Since: ptr(1), Until: ptr(9)}, BySeq: true, Seqs: []int64{3, 4}},
		{Filter: eventlog.Filter{Authors: []string{id}}, BySeq: true, Seqs: long},
		{Filter: eventlog.Filter{Tags: map[string][]string{"t": {"a", "b"}, "e": {id}}, MoreTags: []eventlog.TagCond{{Name: "t", Values: []string{"c"}}}, AsOf: ptr(7)}},
		{Filter: eventlog.Filter{Tags: map[string][]string{"t": {"a"}}, Kinds: []int64{1}, IncludeRevoked: true}},
	}
	check := func(d *Dialect, q string, args []any) {
		t.Helper()
		if !d.Numbered {
			if n := strings.Count(q, "?"); n != len(args) {
				t.Errorf("%d placeholders, %d arguments: %s", n, len(args), q)
			}
			return
		}
		if strings.Contains(q, "?") {
			t.Errorf("? in a numbered statement: %s", q)
		}
		seen := map[int]bool{}
		for _, m := range regexp.MustCompile(`\$(\d+)`).FindAllStringSubmatch(q, -1) {
			n, _ := strconv.Atoi(m[1])
			seen[n] = true
		}
		for i := 1; i <= len(args); i++ {
			if !seen[i] {
				t.Errorf("$%d unused (%d arguments): %s", i, len(args), q)
			}
		}
		if len(seen) != len(args) {
			t.Errorf("%d parameters, %d arguments: %s", len(seen), len(args), q)
		}
	}
	for _, d := range []*Dialect{&lite, &pg} {
		for _, q := range queries {
			for _, refs := range []bool{false, true} {
				s, args := Select(d, q, refs)
				check(d, s, args)
			}
		}
		for _, bySeq := range []bool{false, true} {
			s, args := History(d, []byte{1}, 0, bySeq, long)
			check(d, s, args)
			s, args = Items(d, []int64{1, 2}, []string{id}, 5, bySeq, []int64{9})
			check(d, s, args)
		}
	}
}

// TestDialectLists requires one value to be an equality, several to be a
// list per dialect, and a long seq list in SQLite to be one JSON array.
func TestDialectLists(t *testing.T) {
	cases := []struct {
		d    *Dialect
		seqs []int64
		want string
		args int
	}{
		{&lite, []int64{7}, "seq = ?", 1},
		{&lite, []int64{7, 8}, "seq IN (?,?)", 2},
		{&lite, make([]int64, 257), "seq IN (SELECT value FROM json_each(?))", 1},
		{&pg, []int64{7}, "seq = $1", 1},
		{&pg, make([]int64, 257), "seq = ANY($1)", 1},
	}
	for _, c := range cases {
		a := NewArgs(c.d)
		if got := a.InSeqs("seq", c.seqs); got != c.want || len(a.List()) != c.args {
			t.Errorf("%d seqs (numbered %v): %q with %d arguments, want %q with %d", len(c.seqs), c.d.Numbered, got, len(a.List()), c.want, c.args)
		}
	}
	if q, _ := Select(&lite, Query{Filter: eventlog.Filter{Tags: map[string][]string{"t": {"a"}}}}, false); !strings.Contains(q, "tags t CROSS JOIN events e") {
		t.Errorf("SQLite's tags do not drive: %s", q)
	}
}
