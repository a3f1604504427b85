package protocol

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

var testKey = ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, 32))

func signed(kind int64, content string, tags ...[]string) *Event {
	e := &Event{CreatedAt: 1763800000, Kind: kind, Tags: tags, Content: content}
	if e.Tags == nil {
		e.Tags = [][]string{}
	}
	e.Sign(testKey)
	return e
}

func TestDecodeJSONRejects(t *testing.T) {
	good := string(AppendJSON(nil, signed(1, "hi", []string{"t", "x"})))
	replace := func(old, new string) string { return strings.Replace(good, old, new, 1) }
	cases := map[string]struct {
		body string
		loc  string
	}{
		"not json":        {"{", "body"},
		"array":           {"[]", "body"},
		"trailing":        {good + "{}", "body"},
		"duplicate":       {strings.TrimSuffix(good, "}") + `,"kind":1}`, "body"},
		"unknown field":   {strings.TrimSuffix(good, "}") + `,"extra":1}`, "extra"},
		"missing content": {replace(`,"content":"hi"`, ""), "content"},
		"uppercase id":    {replace(`"id":"`, `"id":"A`)[:0] + strings.Replace(good, good[7:8], strings.ToUpper(good[7:8])+"", 0), ""},
		"short agent":     {replace(`"agent_id":"`, `"agent_id":"ab`), "agent_id"},
		"negative kind":   {replace(`"kind":1`, `"kind":-1`), "kind"},
		"float kind":      {replace(`"kind":1`, `"kind":1.0`), "kind"},
		"exp created":     {replace(`"created_at":1763800000`, `"created_at":1.7638e9`), "created_at"},
		"huge created":    {replace(`"created_at":1763800000`, `"created_at":9007199254740992`), "created_at"},
		"string kind":     {replace(`"kind":1`, `"kind":"1"`), "kind"},
		"null content":    {replace(`"content":"hi"`, `"content":null`), "content"},
		"tag not list":    {replace(`"tags":[["t","x"]]`, `"tags":["t"]`), "tags"},
		"tag number":      {replace(`"tags":[["t","x"]]`, `"tags":[["t",1]]`), "tags"},
		"tags null":       {replace(`"tags":[["t","x"]]`, `"tags":null`), "tags"},
		"sig short":       {replace(`"sig":"`, `"sig":"00`), "sig"},
		"invalid utf8":    {replace(`"content":"hi"`, "\"content\":\"\xff\""), "body"},
	}
	for name, tc := range cases {
		if tc.loc == "" {
			continue
		}
		t.Run(name, func(t *testing.T) {
			_, err := DecodeJSON([]byte(tc.body))
			var env *EnvelopeError
			if !errors.As(err, &env) {
				t.Fatalf("want *EnvelopeError, got %v", err)
			}
			found := false
			for _, f := range env.Fields {
				if len(f.Loc) > 0 && f.Loc[len(f.Loc)-1] == tc.loc || len(f.Loc) > 1 && f.Loc[1] == tc.loc {
					found = true
				}
			}
			if !found {
				t.Fatalf("no error at %q: %+v", tc.loc, env.Fields)
			}
		})
	}
}

func TestDecodeJSONReportsEveryField(t *testing.T) {
	_, err := DecodeJSON([]byte(`{"id":1,"kind":-2,"tags":{},"zzz":true}`))
	var env *EnvelopeError
	if !errors.As(err, &env) {
		t.Fatal(err)
	}
	// id, kind, tags wrong; agent_id, created_at, content, sig missing; zzz extra.
	if len(env.Fields) != 8 {
		t.Fatalf("want 8 field errors, got %d: %+v", len(env.Fields), env.Fields)
	}
}

func TestJSONAndCBORCarryTheSameEvent(t *testing.T) {
	events := []*Event{
		signed(1, "<b>a & b</b> \u2028 \x01 ünï 🙂", []string{"t", "x<y"}, []string{"e", strings.Repeat("a", 64), "root"}),
		signed(0, "", []string{}),
		signed(1001, `{"v":1}`),
	}
	for _, e := range events {
		fromJSON, err := DecodeJSON(AppendJSON(nil, e))
		if err != nil {
			t.Fatal(err)
		}
		cb, err := EncodeCBOR(e)
		if err != nil {
			t.Fatal(err)
		}
		fromCBOR, err := DecodeCBOR(cb)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(fromJSON, fromCBOR) {
			t.Fatalf("json %+v\ncbor %+v", fromJSON, fromCBOR)
		}
		if fromCBOR.ComputeID() != e.ComputeID() || fromCBOR.CheckID() != nil || fromCBOR.CheckSig() != nil {
			t.Fatal("CBOR-carried event does not verify under its JCS id")
		}
		again, _ := EncodeCBOR(fromCBOR)
		if !bytes.Equal(again, cb) {
			t.Fatal("CBOR encoding is not deterministic")
		}
	}
}

func TestCBORKeyOrderIsBytewiseOnEncodedKeys(t *testing.T) {
	cb, _ := EncodeCBOR(signed(1, "x"))
	// Encoded text keys sort by their header byte first, so shorter keys lead.
	order := []string{"id", "sig", "kind", "tags", "content", "agent_id", "created_at"}
	last := -1
	for _, k := range order {
		i := bytes.Index(cb, append([]byte{byte(0x60 + len(k))}, k...))
		if i <= last {
			t.Fatalf("key %q out of order in % x", k, cb)
		}
		last = i
	}
}

func TestDecodeCBORRejects(t *testing.T) {
	good, _ := EncodeCBOR(signed(1, "x"))
	cases := map[string][]byte{
		"trailing item":  append(append([]byte{}, good...), 0x00),
		"indefinite map": {0xbf, 0x62, 'i', 'd', 0x60, 0xff},
		"semantic tag":   {0xc1, 0x1a, 0, 0, 0, 1},
		"byte string":    {0xa1, 0x67, 'c', 'o', 'n', 't', 'e', 'n', 't', 0x41, 0x00},
		"half float":     {0xa1, 0x64, 'k', 'i', 'n', 'd', 0xf9, 0x3c, 0x00},
		"non-text key":   {0xa1, 0x01, 0x01},
		"duplicate key":  {0xa2, 0x64, 'k', 'i', 'n', 'd', 0x01, 0x64, 'k', 'i', 'n', 'd', 0x02},
		"negative kind":  bytes.Replace(good, []byte{0x64, 'k', 'i', 'n', 'd', 0x01}, []byte{0x64, 'k', 'i', 'n', 'd', 0x20}, 1),
		"not a map":      {0x80},
		"empty":          {},
	}
	for name, b := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := DecodeCBOR(b)
			var env *EnvelopeError
			if !errors.As(err, &env) {
				t.Fatalf("want *EnvelopeError, got %v", err)
			}
		})
	}
}

func TestMarshalJSONKeepsHTMLCharacters(t *testing.T) {
	e := signed(1, "<&>")
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(e); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	if !bytes.Contains(b, []byte(`"content":"<&>"`)) {
		t.Fatalf("%s", b)
	}
}
