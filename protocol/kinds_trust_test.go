package protocol

import (
	"reflect"
	"sort"
	"strings"
	"testing"
)

func codesOf(errs []error) []string {
	var out []string
	for _, err := range errs {
		out = append(out, codeOf(err))
	}
	sort.Strings(out)
	return out
}

func TestTrustVoteRule(t *testing.T) {
	target := strings.Repeat("ab", 32)
	p := [][]string{{"p", target}}
	cases := []struct {
		name    string
		content string
		tags    [][]string
		want    []string
	}{
		{"integer one", `{"score":1,"reason":"good"}`, p, nil},
		{"negative float", `{"score":-0.75}`, p, nil},
		{"zero withdraws", `{"score":0}`, p, nil},
		{"exponent form", `{"score":1e-1}`, p, nil},
		{"minus one", `{"score":-1.0}`, p, nil},
		{"above one", `{"score":1.0001}`, p, []string{CodeInvalidScore}},
		{"below minus one", `{"score":-2}`, p, []string{CodeInvalidScore}},
		{"overflow", `{"score":1e400}`, p, []string{CodeInvalidScore}},
		{"string score", `{"score":"1"}`, p, []string{CodeInvalidScore}},
		{"bool score", `{"score":true}`, p, []string{CodeInvalidScore}},
		{"null score", `{"score":null}`, p, []string{CodeInvalidScore}},
		{"missing score", `{"reason":"x"}`, p, []string{CodeInvalidScore}},
		{"NaN literal", `{"score":NaN}`, p, []string{CodeInvalidScore}},
		{"Infinity literal", `{"score":Infinity}`, p, []string{CodeInvalidScore}},
		{"not json", `trusted`, p, []string{CodeInvalidScore}},
		{"json array", `[1]`, p, []string{CodeInvalidScore}},
		{"json null", `null`, p, []string{CodeInvalidScore}},
		{"trailing data", `{"score":1} {}`, p, []string{CodeInvalidScore}},
		{"no p tag", `{"score":1}`, nil, []string{CodeMissingTag}},
		{"p tag not hex", `{"score":1}`, [][]string{{"p", "alice"}}, []string{CodeMissingTag}},
		{"p tag upper hex", `{"score":1}`, [][]string{{"p", strings.ToUpper(target)}}, []string{CodeMissingTag}},
		{"p tag without value", `{"score":1}`, [][]string{{"p"}}, []string{CodeMissingTag}},
		{"one good p among bad", `{"score":1}`, [][]string{{"p", "x"}, {"p", target}}, nil},
		{"both wrong", `{"score":2}`, nil, []string{CodeInvalidScore, CodeMissingTag}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := &Event{Kind: KindTrustVote, Content: c.content, Tags: c.tags}
			if got := codesOf(CheckKind(e)); !reflect.DeepEqual(got, c.want) {
				t.Fatalf("codes %v, want %v", got, c.want)
			}
		})
	}
}

func TestFlagRule(t *testing.T) {
	target := strings.Repeat("cd", 32)
	e := [][]string{{"e", target}}
	cases := []struct {
		name    string
		content string
		tags    [][]string
		want    []string
	}{
		{"spam", `{"category":"spam","reason":"dup"}`, e, nil},
		{"appeal", `{"category":"appeal"}`, append(e, []string{"appeal", "true"}), nil},
		{"override", `{"category":"override","score":-1.0}`, e, nil},
		{"collusion", `{"category":"collusion"}`, e, nil},
		{"extortion", `{"category":"extortion"}`, e, nil},
		{"unknown category", `{"category":"rude"}`, e, []string{CodeInvalidFlag}},
		{"category case matters", `{"category":"Spam"}`, e, []string{CodeInvalidFlag}},
		{"category not string", `{"category":1}`, e, []string{CodeInvalidFlag}},
		{"missing category", `{"reason":"x"}`, e, []string{CodeInvalidFlag}},
		{"not json", `spam`, e, []string{CodeInvalidFlag}},
		{"no e tag", `{"category":"spam"}`, [][]string{{"p", target}}, []string{CodeMissingTag}},
		{"e tag not hex", `{"category":"spam"}`, [][]string{{"e", "abc"}}, []string{CodeMissingTag}},
		{"both wrong", `{}`, nil, []string{CodeInvalidFlag, CodeMissingTag}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ev := &Event{Kind: KindFlag, Content: c.content, Tags: c.tags}
			if got := codesOf(CheckKind(ev)); !reflect.DeepEqual(got, c.want) {
				t.Fatalf("codes %v, want %v", got, c.want)
			}
		})
	}
}

func TestParseVoteValues(t *testing.T) {
	score, reason, err := ParseVote(`{"score":-0.3,"reason":"late twice"}`)
	if err != nil || score != -0.3 || reason != "late twice" {
		t.Fatalf("got %v %q %v", score, reason, err)
	}
	if _, reason, _ = ParseVote(`{"score":1,"reason":7}`); reason != "" {
		t.Fatalf("non-string reason read as %q", reason)
	}
	cat, reason, err := ParseFlag(`{"category":"override","reason":"brigade"}`)
	if err != nil || cat != "override" || reason != "brigade" {
		t.Fatalf("got %q %q %v", cat, reason, err)
	}
}
