package stream

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/anp2net/relay/protocol"
)

// sample is a small fixed population the filter tables refer to by index.
type sample struct {
	a, b, c string // agent ids
	ev      []*protocol.Event
}

func newSample() sample {
	ka, kb, kc := key(1), key(2), key(3)
	s := sample{a: protocol.AgentIDOf(ka), b: protocol.AgentIDOf(kb), c: protocol.AgentIDOf(kc)}
	e0 := mk(ka, 1000, 1, "rain", []string{"t", "weather"})
	e1 := mk(kb, 1001, 1, "headline", []string{"t", "news"}, []string{"p", s.a})
	e2 := mk(ka, 1002, 50, "{}", []string{"cap", "translate"}, []string{"t", "weather"}, []string{"e", e0.ID})
	e3 := mk(kb, 1003, 7, "{}", []string{"e", e2.ID}, []string{"p", s.a})
	e4 := mk(kc, 2000, 0, "{}")
	s.ev = []*protocol.Event{e0, e1, e2, e3, e4}
	return s
}

func TestFilterMatches(t *testing.T) {
	s := newSample()
	ids := func(i ...int) string {
		var out []string
		for _, x := range i {
			out = append(out, s.ev[x].ID)
		}
		return strings.Join(out, ",")
	}
	many := make([]string, 0, 12)
	for i := 0; i <= 20; i++ {
		many = append(many, fmt.Sprint(i))
	}
	manyAuthors := []string{s.b}
	for i := 10; i < 20; i++ {
		manyAuthors = append(manyAuthors, protocol.AgentIDOf(key(i)))
	}
	for _, tc := range []struct {
		query string
		want  []int
	}{
		{"", []int{0, 1, 2, 3, 4}},
		{"kinds=1", []int{0, 1}},
		{"kinds=1,7", []int{0, 1, 3}},
		{"kind=1,7", []int{0, 1, 3}}, // the network's clients' alias
		{"kinds=0", []int{4}},
		{"kinds=" + strings.Join(many, ","), []int{0, 1, 3, 4}}, // long list: matched through a map
		{"authors=" + s.a, []int{0, 2}},
		{"authors=" + strings.Join(manyAuthors, ","), []int{1, 3}},
		{"ids=" + ids(0, 4), []int{0, 4}},
		{"t=weather", []int{0, 2}},
		{"t=weather,news", []int{0, 1, 2}},
		{"cap=translate", []int{2}},
		{"p=" + s.a, []int{1, 3}},
		{"e=" + s.ev[0].ID, []int{2}},
		{"x=anything", nil},
		{"since=1002", []int{2, 3, 4}},
		{"until=1001", []int{0, 1}},
		{"since=1001&until=1002", []int{1, 2}},
		{"after=17", []int{0, 1, 2, 3, 4}},
		{"filter=kind:1", []int{0, 1}},
		{"filter=kind:1,t:weather", []int{0}},
		{"filter=t:weather,cap:translate", []int{2}},
		{"filter=t:weather,t:news", nil}, // AND: no event carries both
		{"filter=author:" + s.a + ",kind:50", []int{2}},
		{"filter=p:" + s.a + ",e:" + s.ev[2].ID, []int{3}},
		{"filter=id:" + s.ev[1].ID, []int{1}},
		{"filter=kind:1,kind:1", []int{0, 1}},
		{"filter=cap:translate:v2", nil}, // the value is everything after the first colon
		{"kinds=1,50&filter=author:" + s.a, []int{0, 2}},
		{"kinds=1,50&filter=kind:50", []int{2}},
		{"authors=" + s.a + "," + s.b + "&filter=author:" + s.b, []int{1, 3}},
		{"t=weather,news&filter=t:weather", []int{0, 2}},
		{"t=news&p=" + s.a, []int{1}},
	} {
		v, err := url.ParseQuery(tc.query)
		if err != nil {
			t.Fatal(err)
		}
		f, err := ParseFilter(v)
		if err != nil {
			t.Errorf("%s: %v", tc.query, err)
			continue
		}
		var got []int
		for i, e := range s.ev {
			if f.Match(e) {
				got = append(got, i)
			}
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: matched %v, want %v", tc.query, got, tc.want)
		}
	}
}

func TestFilterAfter(t *testing.T) {
	f, err := ParseFilter(url.Values{"after": {"42"}})
	if err != nil || f.After == nil || *f.After != 42 {
		t.Fatalf("after=42 gave %+v, %v", f, err)
	}
	f, err = ParseFilter(url.Values{})
	if err != nil || f.After != nil {
		t.Fatalf("no after gave %+v, %v", f, err)
	}
}

func TestFilterErrors(t *testing.T) {
	hex := strings.Repeat("ab", 32)
	clauses := strings.TrimSuffix(strings.Repeat("t:x,", maxClauses+1), ",")
	for _, tc := range []struct {
		query, code string
	}{
		{"foo=1", CodeUnknownParam},
		{"limit=10", CodeUnknownParam},
		{"include_hidden=true", CodeUnknownParam},
		{"kinds=1&kinds=2", CodeBadParameter},
		{"filter=kind:1&filter=kind:1", CodeBadParameter},
		{"after=-1", CodeBadParameter},
		{"after=x", CodeBadParameter},
		{"after=", CodeBadParameter},
		{"after=+3", CodeBadParameter},
		{"filter=color:red", CodeFilterAxisUnknown},
		{"filter=Kind:1", CodeFilterAxisUnknown},
		{"filter=kinds:1", CodeFilterAxisUnknown},
		{"filter=:1", CodeFilterAxisUnknown},
		{"filter=kind:1,colour:red", CodeFilterAxisUnknown},
		{"filter=kind:x", CodeFilterValueInvalid},
		{"filter=kind:-1", CodeFilterValueInvalid},
		{"filter=kind:+1", CodeFilterValueInvalid},
		{"filter=kind: 1", CodeFilterValueInvalid},
		{"filter=kind:9007199254740992", CodeFilterValueInvalid},
		{"filter=kind:", CodeFilterValueInvalid},
		{"filter=author:abc", CodeFilterValueInvalid},
		{"filter=author:" + strings.ToUpper(hex), CodeFilterValueInvalid},
		{"filter=p:xyz", CodeFilterValueInvalid},
		{"filter=e:" + hex + "0", CodeFilterValueInvalid},
		{"filter=id:1", CodeFilterValueInvalid},
		{"filter=t:", CodeFilterValueInvalid},
		{"filter=cap:" + strings.Repeat("c", maxTagValue+1), CodeFilterValueInvalid},
		{"filter=", CodeFilterValueInvalid},
		{"filter=kind:1,", CodeFilterValueInvalid},
		{"filter=,kind:1", CodeFilterValueInvalid},
		{"filter=kind", CodeFilterValueInvalid},
		{"filter=" + clauses, CodeFilterValueInvalid},
		{"filter=kind:1,kind:2", CodeFilterValueInvalid}, // could never match
		{"filter=author:" + hex + ",author:" + strings.Repeat("cd", 32), CodeFilterValueInvalid},
		{"kinds=1&filter=kind:2", CodeFilterValueInvalid},
		{"kinds=", CodeFilterValueInvalid},
		{"kinds=1,,2", CodeFilterValueInvalid},
		{"kinds=1.5", CodeFilterValueInvalid},
		{"authors=zz", CodeFilterValueInvalid},
		{"authors=", CodeFilterValueInvalid},
		{"ids=" + hex + ",", CodeFilterValueInvalid},
		{"t=", CodeFilterValueInvalid},
		{"t=a,", CodeFilterValueInvalid},
		{"p=me", CodeFilterValueInvalid},
		{"t=" + strings.Repeat("x", maxTagValue+1), CodeFilterValueInvalid},
		{"t=" + strings.TrimSuffix(strings.Repeat("a,", maxTagValues+1), ","), CodeFilterValueInvalid},
		{"since=abc", CodeFilterValueInvalid},
		{"since=5&until=4", CodeFilterValueInvalid},
		{"kind=1&kinds=1", CodeBadParameter},
	} {
		v, err := url.ParseQuery(tc.query)
		if err != nil {
			t.Fatal(err)
		}
		_, err = ParseFilter(v)
		var pe *protocol.Error
		if !errors.As(err, &pe) || pe.Code != tc.code {
			t.Errorf("%.80s: got %v, want code %s", tc.query, err, tc.code)
		}
	}
}

// TestFilterLiteral: a Filter built by hand (no ParseFilter, so no maps)
// matches like a parsed one.
func TestFilterLiteral(t *testing.T) {
	s := newSample()
	f := &Filter{Kinds: []int64{1, 50}, Tags: []TagCond{{Name: "t", Values: []string{"weather"}}}}
	var got []int
	for i, e := range s.ev {
		if f.Match(e) {
			got = append(got, i)
		}
	}
	if !slices.Equal(got, []int{0, 2}) {
		t.Fatalf("matched %v", got)
	}
	if !(&Filter{}).Match(s.ev[4]) {
		t.Fatal("the zero Filter must match everything")
	}
}
