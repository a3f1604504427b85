package relay

import (
	"encoding/json"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/anp2net/relay/protocol"
)

// TestSplitList: the escapes, and lists without them split as before.
func TestSplitList(t *testing.T) {
	for in, want := range map[string][]string{
		`a,b`:        {"a", "b"},
		`a\,b`:       {"a,b"},
		`a\,b,c`:     {"a,b", "c"},
		`a\\,b`:      {`a\`, "b"},
		`a\\\,b`:     {`a\,b`},
		`C:\dir,x`:   {`C:\dir`, "x"},
		`end\`:       {`end\`},
		`,`:          {"", ""},
		`\,`:         {","},
		`one`:        {"one"},
		`café,日本\,語`: {"café", "日本,語"},
	} {
		if got := SplitList(in); !slices.Equal(got, want) {
			t.Errorf("SplitList(%q) = %q, want %q", in, got, want)
		}
	}
}

// FuzzSplitList: SplitList never panics; it splits exactly on commas when
// the list holds no backslash; and escaping any values, joined with
// commas, gives the same values back.
func FuzzSplitList(f *testing.F) {
	for _, s := range []string{"", "a,b", `a\,b`, `a\\,b`, `\`, `\\\`, ",,", "x\x00,\xff"} {
		f.Add(s, "v,w")
	}
	f.Fuzz(func(t *testing.T, s, v string) {
		got := SplitList(s)
		if !strings.Contains(s, `\`) && !slices.Equal(got, strings.Split(s, ",")) {
			t.Fatalf("%q: %q", s, got)
		}
		vals := []string{v, s, v + "," + s}
		esc := make([]string, len(vals))
		for i, x := range vals {
			esc[i] = EscapeListValue(x)
		}
		if back := SplitList(strings.Join(esc, ",")); !slices.Equal(back, vals) {
			t.Fatalf("%q escaped %q split back to %q", vals, esc, back)
		}
	})
}

// TestTagValueWithCommaIsQueryable: a tag value holding a comma (accepted
// at publish, as the reference relay accepts it) is found by GET /events
// with the comma written \, ; a plain comma still separates alternatives
// and a lone backslash still stands for itself.
func TestTagValueWithCommaIsQueryable(t *testing.T) {
	r := startRelay(t)
	k := key(7)
	both := mk(k, vectorTime-3, 1, "both", []string{"t", "red,green"})
	red := mk(k, vectorTime-2, 1, "red", []string{"t", "red"})
	path := mk(k, vectorTime-1, 1, "path", []string{"t", `C:\dir,x`})
	for _, e := range []*protocol.Event{both, red, path} {
		if ans := r.post(t, e); ans.status != 200 {
			t.Fatalf("publish: %d %s", ans.status, ans.body)
		}
	}
	for q, want := range map[string][]string{
		`red\,green`:     {both.ID},
		`red`:            {red.ID},
		`red,green`:      {red.ID},
		`red\,green,red`: {red.ID, both.ID},
		`C:\dir\,x`:      {path.ID},
		`C:\\dir\,x`:     {path.ID},
	} {
		ans := r.do(t, "GET", "/events?"+url.Values{"t": {q}}.Encode(), "", nil)
		var evs []protocol.Event
		if ans.status != 200 || json.Unmarshal(ans.body, &evs) != nil {
			t.Fatalf("t=%s: %d %s", q, ans.status, ans.body)
		}
		var got []string
		for _, e := range evs {
			got = append(got, e.ID)
		}
		if !slices.Equal(got, want) {
			t.Errorf("t=%s: %d events %v, want %v", q, len(got), got, want)
		}
	}
}
