package delivery

import (
	"errors"
	"testing"

	"github.com/anp2net/relay/protocol"
)

func ev(content string) *protocol.Event {
	return &protocol.Event{Kind: 1, Content: content, Tags: [][]string{}}
}

// TestGuards: each PAP operator on present, missing and mistyped fields.
func TestGuards(t *testing.T) {
	doc := `{"p":3,"s":"spot price","b":true,"n":null,"l":[1,2],"o":{"x":{"y":"z"}},"arr":[{"k":"v"}]}`
	cases := []struct {
		guard string
		want  bool
	}{
		{`{"path":"$.p","operator":"eq","value":3}`, true},
		{`{"path":"$.p","operator":"eq","value":"3"}`, false},
		{`{"path":"$.p","operator":"ne","value":4}`, true},
		{`{"path":"$.missing","operator":"ne","value":4}`, true},
		{`{"path":"$.missing","operator":"eq","value":4}`, false},
		{`{"path":"$.p","operator":"lt","value":3}`, false},
		{`{"path":"$.p","operator":"lte","value":3}`, true},
		{`{"path":"$.p","operator":"gt","value":2.5}`, true},
		{`{"path":"$.p","operator":"gte","value":3.5}`, false},
		{`{"path":"$.s","operator":"gt","value":1}`, false},
		{`{"path":"$.s","operator":"in","value":["a","spot price"]}`, true},
		{`{"path":"$.s","operator":"not_in","value":["a","spot price"]}`, false},
		{`{"path":"$.missing","operator":"not_in","value":["a"]}`, true},
		{`{"path":"$.s","operator":"contains","value":"price"}`, true},
		{`{"path":"$.p","operator":"contains","value":"3"}`, false},
		{`{"path":"$.n","operator":"exists"}`, false},
		{`{"path":"$.b","operator":"exists"}`, true},
		{`{"path":"$.o.x.y","operator":"eq","value":"z"}`, true},
		{`{"path":"$.arr.0.k","operator":"eq","value":"v"}`, true},
		{`{"path":"$.l","operator":"eq","value":[1,2]}`, true},
		{`{"path":"$.s","operator":"regex","value":"^spot\\s"}`, true},
		{`{"path":"$.s","operator":"regex","value":"^price"}`, false},
	}
	for _, c := range cases {
		spec := `{"match":{"kinds":[1]},"filter":[` + c.guard + `],"target":{"type":"webhook","url":"https://example.com/h"}}`
		s, err := ParseSpec([]byte(spec), false)
		if err != nil {
			t.Fatalf("%s: %v", c.guard, err)
		}
		if got := s.MatchEvent(ev(doc)); got != c.want {
			t.Errorf("%s: got %v want %v", c.guard, got, c.want)
		}
	}
}

// TestSpecRefusals: malformed triggers are invalid_trigger; a plain-http
// target is refused unless private targets are allowed.
func TestSpecRefusals(t *testing.T) {
	target := `"target":{"type":"webhook","url":"https://example.com/h"}`
	for _, s := range []string{
		`{` + target + `}`,
		`{"match":{"kinds":[1]}}`,
		`{"match":{"kinds":[1]},"filter":[{"path":"price","operator":"eq","value":1}],` + target + `}`,
		`{"match":{"kinds":[1]},"filter":[{"path":"$.p","operator":"like","value":1}],` + target + `}`,
		`{"match":{"kinds":[1]},"filter":[{"path":"$.p","operator":"regex","value":"("}],` + target + `}`,
		`{"match":{"kinds":[1]},"filter":[{"path":"$.p","operator":"in","value":1}],` + target + `}`,
		`{"match":{"kinds":[1]},"throttle":{"max_per_window":0,"window_seconds":10},` + target + `}`,
		`{"match":{"kinds":[1]},"extra":1,` + target + `}`,
		`{"match":{"authors":["xyz"]},` + target + `}`,
	} {
		if _, err := ParseSpec([]byte(s), false); !coded(err, CodeInvalidTrigger) {
			t.Errorf("%s: %v", s, err)
		}
	}
	plain := []byte(`{"match":{"kinds":[1]},"target":{"type":"webhook","url":"http://127.0.0.1:9/h"}}`)
	if _, err := ParseSpec(plain, false); !coded(err, CodeTargetRefused) {
		t.Errorf("http target: %v", err)
	}
	if _, err := ParseSpec(plain, true); err != nil {
		t.Errorf("http target allowed: %v", err)
	}
}

func coded(err error, code string) bool {
	var pe *protocol.Error
	return errors.As(err, &pe) && pe.Code == code
}

// FuzzParseSpec: any body is a valid spec or a coded refusal, and a
// valid spec matches any event without panicking.
func FuzzParseSpec(f *testing.F) {
	f.Add([]byte(`{"match":{"kinds":[1],"tags":{"t":["x"]}},"filter":[{"path":"$.a.0","operator":"regex","value":"^x"}],"throttle":{"max_per_window":1,"window_seconds":60,"window_key":"$.r"},"target":{"type":"webhook","url":"https://e.com"}}`), `{"a":["xy"],"r":1}`)
	f.Add([]byte(`{"match":{"authors":[]},"target":{}}`), `[]`)
	f.Add([]byte(`{"match":{"kinds":[1]},"filter":[{"path":"$","operator":"in","value":[1,"a",null,{"b":[]}]}],"target":{"type":"webhook","url":"http://[::1]/"}}`), `1`)
	f.Fuzz(func(t *testing.T, body []byte, content string) {
		s, err := ParseSpec(body, true)
		if err != nil {
			if !coded(err, CodeInvalidTrigger) && !coded(err, CodeTargetRefused) {
				t.Fatalf("uncoded error %v", err)
			}
			return
		}
		e := ev(content)
		e.Tags = [][]string{{"t", "x"}}
		s.MatchEvent(e)
		s.ThrottleKey(e)
	})
}
