package delivery

import (
	"encoding/json"
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
	for _, s := range []string{
		`{"match":{"kinds":[1]},"target":{"type":"mcp","url":"https://a.example/card"}}`,
		`{"match":{"kinds":[1]},"target":{"type":"a2a"}}`,
		`{"match":{"kinds":[1]},"target":{"type":"a2a","url":"/card"}}`,
		`{"match":{"kinds":[1]},"target":{"type":"a2a","url":"https://u:p@a.example/card"}}`,
		`{"match":{"kinds":[1]},"target":{"type":"a2a","url":"https://a.example/card#x"}}`,
		`{"match":{"kinds":[1]},"target":{"type":"a2a","url":"https://a.example/card","card":"x"}}`,
	} {
		if _, err := ParseSpec([]byte(s), true); !coded(err, CodeInvalidTrigger) {
			t.Errorf("%s: %v", s, err)
		}
	}
	a2aPlain := []byte(`{"match":{"kinds":[1]},"target":{"type":"a2a","url":"http://127.0.0.1:9/.well-known/agent-card.json"}}`)
	if _, err := ParseSpec(a2aPlain, false); !coded(err, CodeTargetRefused) {
		t.Errorf("http a2a target: %v", err)
	}
	if s, err := ParseSpec(a2aPlain, true); err != nil || s.Target.Type != TargetA2A {
		t.Errorf("http a2a target allowed: %v", err)
	}
}

// TestCardEndpoint: the JSON-RPC endpoint is the card's url unless the
// card prefers another transport, then its JSONRPC additional interface.
func TestCardEndpoint(t *testing.T) {
	for _, c := range []struct {
		card, want string
	}{
		{`{"url":"https://a/rpc"}`, "https://a/rpc"},
		{`{"url":"https://a/rpc","preferredTransport":"JSONRPC"}`, "https://a/rpc"},
		{`{"url":"https://a/grpc","preferredTransport":"GRPC","additionalInterfaces":[{"url":"https://a/x","transport":"HTTP+JSON"},{"url":"https://a/rpc","transport":"JSONRPC"}]}`, "https://a/rpc"},
		{`{"url":"https://a/grpc","preferredTransport":"GRPC"}`, ""},
		{`{"name":"no url"}`, ""},
	} {
		var card agentCard
		if err := json.Unmarshal([]byte(c.card), &card); err != nil {
			t.Fatal(err)
		}
		got, err := card.endpoint()
		if got != c.want || (err == nil) != (c.want != "") {
			t.Errorf("%s: %q %v", c.card, got, err)
		}
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
	f.Add([]byte(`{"match":{"tags":{"t":["x"]}},"target":{"type":"a2a","url":"https://agent.example/.well-known/agent-card.json"}}`), `{}`)
	f.Add([]byte(`{"match":{"kinds":[1]},"target":{"type":"a2a","url":"ftp://agent.example/card"}}`), `x`)
	f.Add([]byte(`{"match":{"kinds":[1]},"filter":[{"path":"$.s","operator":"regex","value":"(?:[\\p{L}\\p{N}]{100}.){3}z"}],"target":{"type":"webhook","url":"https://e.com"}}`), `{"s":"ab"}`)
	f.Add([]byte(`{"match":{"kinds":[1]},"filter":[{"path":"$.s","operator":"regex","value":"a{2,}b{0,100}(c|d{99})*"}],"target":{"type":"webhook","url":"https://e.com"}}`), `{"s":"aab"}`)
	f.Fuzz(func(t *testing.T, body []byte, content string) {
		s, err := ParseSpec(body, true)
		if err != nil {
			if !coded(err, CodeInvalidTrigger) && !coded(err, CodeTargetRefused) {
				t.Fatalf("uncoded error %v", err)
			}
			return
		}
		for _, g := range s.Filter {
			if g.re != nil && (g.ops > maxRegexOps || g.ops <= 0) {
				t.Fatalf("regex %q accepted with %d instructions", g.Value, g.ops)
			}
		}
		e := ev(content)
		e.Tags = [][]string{{"t", "x"}}
		s.MatchEvent(e)
		s.ThrottleKey(e)
	})
}
