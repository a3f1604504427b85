package stream

import (
	"net/url"
	"testing"
)

// TestFilterTagValueWithComma: a tag value holding a comma is asked for
// with the comma written \, , as a tag parameter and in a filter= clause;
// a plain comma still separates alternatives or clauses.
func TestFilterTagValueWithComma(t *testing.T) {
	k := key(1)
	both := mk(k, 1000, 1, "x", []string{"t", "red,green"})
	red := mk(k, 1001, 1, "y", []string{"t", "red"})
	for _, tc := range []struct {
		name, value string
		both, red   bool
	}{
		{"t", `red\,green`, true, false},
		{"t", `red,green`, false, true},
		{"t", `red\,green,red`, true, true},
		{"filter", `t:red\,green`, true, false},
		{"filter", `t:red\,green,kind:1`, true, false},
		{"filter", `t:red,kind:1`, false, true},
	} {
		f, err := ParseFilter(url.Values{tc.name: {tc.value}})
		if err != nil {
			t.Fatalf("%s=%s: %v", tc.name, tc.value, err)
		}
		if f.Match(both) != tc.both || f.Match(red) != tc.red {
			t.Errorf("%s=%s: matches red,green %v and red %v, want %v and %v", tc.name, tc.value, f.Match(both), f.Match(red), tc.both, tc.red)
		}
	}
}
