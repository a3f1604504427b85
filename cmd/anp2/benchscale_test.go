package main

import (
	"context"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestBenchScaleSmall runs anp2 bench --scale at two small sizes end to
// end (corpus, import, relay processes stopped cleanly and killed, publish
// and query runs) and checks that the table has every figure with a value
// per size and a slope, and that the corpora are kept for reuse.
func TestBenchScaleSmall(t *testing.T) {
	corpora := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, binary, "bench", "--scale", "2000,1000", "--corpus", corpora,
		"--events", "200", "--agents", "50", "--queries", "20", "--pace-for", "300ms").CombinedOutput()
	if err != nil {
		t.Fatalf("bench --scale: %v\n%s", err, out)
	}
	s := string(out)
	if strings.Contains(s, "query error") {
		t.Errorf("a query failed:\n%s", s)
	}
	if !strings.Contains(s, "| figure | 1k events | 2k events | slope per 1M events |") {
		t.Errorf("no table header with the sizes in order:\n%s", s)
	}
	num := `[-+]?[0-9.]+(e[-+][0-9]+)?`
	for _, f := range scaleFigures {
		row := regexp.MustCompile(`(?m)^\| ` + regexp.QuoteMeta(f.name+" ("+f.unit+")") + ` \| ` + num + ` \| ` + num + ` \| ` + num + ` \|$`)
		if !row.MatchString(s) {
			t.Errorf("no row for %q with two figures and a slope:\n%s", f.name, s)
		}
	}
	for _, n := range []string{"1000", "2000"} {
		if _, err := os.Stat(filepath.Join(corpora, "corpus-"+n+".jsonl")); err != nil {
			t.Errorf("corpus of %s events not kept: %v", n, err)
		}
	}
}

// TestSlopePerMillion: the least-squares slope per million events, and no
// slope from a single size.
func TestSlopePerMillion(t *testing.T) {
	for _, c := range []struct {
		sizes []int
		ys    []float64
		want  float64
		ok    bool
	}{
		{[]int{1_000_000, 3_000_000}, []float64{10, 30}, 10, true},
		{[]int{1_000_000, 3_000_000, 10_000_000}, []float64{5, 5, 5}, 0, true},
		{[]int{1_000_000, 2_000_000, 3_000_000}, []float64{1, 3, 2}, 0.5, true},
		{[]int{1_000_000}, []float64{7}, 0, false},
	} {
		got, ok := slopePerMillion(c.sizes, c.ys)
		if ok != c.ok || math.Abs(got-c.want) > 1e-9 {
			t.Errorf("slopePerMillion(%v, %v) = %v, %v; want %v, %v", c.sizes, c.ys, got, ok, c.want, c.ok)
		}
	}
}

// TestParseSizes: --scale takes positive event counts separated by
// commas, in any order, and refuses anything else.
func TestParseSizes(t *testing.T) {
	got, err := parseSizes("3000000, 1000000,10000000")
	if err != nil || len(got) != 3 || got[0] != 1000000 || got[1] != 3000000 || got[2] != 10000000 {
		t.Fatalf("parseSizes: %v, %v", got, err)
	}
	for _, bad := range []string{"", "0", "-5", "1e6", "1000,", "1000,,2000", "x"} {
		if _, err := parseSizes(bad); err == nil {
			t.Errorf("parseSizes(%q) accepted", bad)
		}
	}
}
