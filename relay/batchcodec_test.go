package relay

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/anp2net/relay/protocol"
)

// FuzzSplitJSONArray: splitJSONArray answers exactly as json.Unmarshal into
// a []json.RawMessage (the batch route's former decoding), the same
// verdict and the same elements, except that a JSON null, which
// json.Unmarshal takes as an empty list, is refused: it is not an array.
func FuzzSplitJSONArray(f *testing.F) {
	for _, s := range []string{`[]`, ` [ ] `, `null`, ` null `, `[1,"a",{"b":[1,2]},[],null]`, `[{"x":"]\"},["}]`,
		`[ {"a" : "b\\"} , 2 ]`, "[\n{}\t,\r{}\n]", `{}`, `"[]"`, `[1,]`, `[1 2]`, `[`, `]`, ``, `nul`, `[1]x`, `[1] [2]`,
		`["\u00e9\ud800", true, false, -1.5e3]`, "[\"\xff\"]", `[{"id":"ab","sig":"cd"}]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var list []json.RawMessage
		wantErr := json.Unmarshal(body, &list) != nil || string(bytes.TrimSpace(body)) == "null"
		items, ok := splitJSONArray(body)
		if ok == wantErr {
			t.Fatalf("%q: split ok=%v, json.Unmarshal error=%v", body, ok, wantErr)
		}
		if !ok {
			return
		}
		if len(items) != len(list) {
			t.Fatalf("%q: %d items, json.Unmarshal %d", body, len(items), len(list))
		}
		for i := range items {
			if !bytes.Equal(items[i], list[i]) {
				t.Fatalf("%q: item %d is %q, json.Unmarshal %q", body, i, items[i], list[i])
			}
		}
	})
}

// TestBatchAnswerEncoding: appendBatchAnswer writes the bytes
// encoding/json's Encoder (c.JSON) writes, for accepted, duplicate and
// rejected results, details that need escaping, and a 422's field list.
func TestBatchAnswerEncoding(t *testing.T) {
	env := &protocol.EnvelopeError{Fields: []protocol.FieldError{{Loc: []any{"body", "sig"}, Msg: "bad <sig> & more", Type: "value_error"}}}
	_, code, detail := errorStatus(env)
	cases := []batchAnswer{
		{},
		{Results: []BatchResult{}},
		{Accepted: 1, Duplicate: 1, Rejected: 5, Results: []BatchResult{
			{Index: 0, ID: strings.Repeat("ab", 32), Status: 200, Accepted: true, Stored: true},
			{Index: 1, ID: strings.Repeat("cd", 32), Status: 200, Accepted: true, Duplicate: true, Stored: true},
			{Index: 2, Status: 400, Code: "invalid_parameter", Detail: "bad \"id\" <b> & \u2028 é \x01"},
			{Index: 3, Status: 422, Code: code, Detail: detail},
			{Index: 4, ID: "x", Status: 429, Code: "rate_limited", Detail: ""},
			{Index: 5, Status: 400, Code: "c<d", Detail: []string(nil)},
			{Index: 6, Status: 500, Code: "internal", Detail: "internal error\xff"},
		}},
	}
	for i, ans := range cases {
		var want bytes.Buffer
		if err := json.NewEncoder(&want).Encode(&ans); err != nil {
			t.Fatal(err)
		}
		got, err := appendBatchAnswer(nil, &ans)
		if err != nil || !bytes.Equal(got, want.Bytes()) {
			t.Fatalf("case %d: %v\n got %s\nwant %s", i, err, got, want.Bytes())
		}
	}
}
