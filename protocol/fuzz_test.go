package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/gowebpki/jcs"
)

// FuzzCanonicalMatchesJCS checks the fixed-shape id preimage encoder against
// the general RFC 8785 implementation.
func FuzzCanonicalMatchesJCS(f *testing.F) {
	f.Add("d75a", int64(1763800000), int64(1), "t", "x<y&z", "hello\u2028\x7f\x01\"\\")
	f.Add("", int64(0), int64(0), "", "", "")
	f.Fuzz(func(t *testing.T, agent string, createdAt, kind int64, tagName, tagValue, content string) {
		if !utf8.ValidString(agent) || !utf8.ValidString(tagName) || !utf8.ValidString(tagValue) || !utf8.ValidString(content) {
			t.Skip()
		}
		if createdAt < 0 || createdAt > MaxSafeInteger || kind < 0 || kind > MaxSafeInteger {
			t.Skip()
		}
		e := &Event{AgentID: agent, CreatedAt: createdAt, Kind: kind, Tags: [][]string{{tagName, tagValue}, {}}, Content: content}
		plain, err := json.Marshal([]any{e.AgentID, e.CreatedAt, e.Kind, e.Tags, e.Content})
		if err != nil {
			t.Fatal(err)
		}
		want, err := jcs.Transform(plain)
		if err != nil {
			t.Fatal(err)
		}
		if got := e.CanonicalPayload(); !bytes.Equal(got, want) {
			t.Fatalf("canonical mismatch\n got %q\nwant %q", got, want)
		}
	})
}

// FuzzDecodeJSON: no panic; whatever decodes re-encodes to an equal event
// through both JSON and CBOR.
func FuzzDecodeJSON(f *testing.F) {
	f.Add(AppendJSON(nil, signed(1, "hi", []string{"t", "x"})))
	f.Add([]byte(`{"id":1}`))
	f.Add([]byte(`{"id":"","agent_id":"","created_at":0,"kind":0,"tags":[[]],"content":"","sig":""}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := DecodeJSON(b)
		if err != nil {
			return
		}
		roundTrip(t, e)
	})
}

// FuzzDecodeCBOR: no panic; whatever decodes re-encodes to an equal event.
func FuzzDecodeCBOR(f *testing.F) {
	good, _ := EncodeCBOR(signed(1, "hi", []string{"t", "x"}))
	f.Add(good)
	f.Add([]byte{0xa0})
	f.Add([]byte{0xbf, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := DecodeCBOR(b)
		if err != nil {
			return
		}
		roundTrip(t, e)
	})
}

func roundTrip(t *testing.T, e *Event) {
	t.Helper()
	j, err := DecodeJSON(AppendJSON(nil, e))
	if err != nil {
		t.Fatalf("re-decoding own JSON: %v", err)
	}
	cb, err := EncodeCBOR(e)
	if err != nil {
		t.Fatal(err)
	}
	c, err := DecodeCBOR(cb)
	if err != nil {
		t.Fatalf("re-decoding own CBOR: %v", err)
	}
	if !reflect.DeepEqual(j, c) || j.ComputeID() != e.ComputeID() {
		t.Fatalf("round trip changed the event: %+v vs %+v", j, c)
	}
}

// FuzzFastDecodeAgrees: whenever the one-pass decoder accepts an input,
// the reference decoder accepts it too and builds the same event.
func FuzzFastDecodeAgrees(f *testing.F) {
	f.Add(AppendJSON(nil, signed(1, "hi", []string{"t", "x"})))
	f.Add(AppendJSON(nil, signed(2, `{"score":1,"reason":"\u00e9\n"}`, []string{"p", strings.Repeat("a", 64)}, []string{})))
	f.Add([]byte(` { "tags" : [ [ "a" , "b\"" ] ] , "id":"` + strings.Repeat("0", 64) + `","agent_id":"` + strings.Repeat("1", 64) +
		`","created_at":0,"kind":9007199254740991,"content":"\ud83d\ude00","sig":"` + strings.Repeat("f", 128) + `"} `))
	f.Add([]byte(`{"id":"","agent_id":"","created_at":01,"kind":1e3,"tags":[[]],"content":"","sig":""}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		fast, ok := decodeFast(b)
		if !ok {
			return
		}
		slow, err := decodeSlow(b)
		if err != nil {
			t.Fatalf("fast path accepted what the reference rejects: %v\n%q", err, b)
		}
		if !reflect.DeepEqual(fast, slow) {
			t.Fatalf("decoders disagree on %q:\nfast %#v\nslow %#v", b, fast, slow)
		}
	})
}

// FuzzSplitCBORList feeds arbitrary bytes to the gossip batch splitter. It
// must not panic; when it accepts, the items it returns are, in order, the
// array's contents (b ends with them), and each is judged on its own by
// DecodeCBOR without a panic. A list it was given by EncodeCBORList comes
// back as the events' own encodings.
func FuzzSplitCBORList(f *testing.F) {
	a, b := signed(1, "hi", []string{"t", "x"}), signed(0, `{"name":"n"}`)
	list, err := EncodeCBORList([]*Event{a, b})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(list)
	f.Add([]byte{0x80})
	f.Add([]byte{0x9f, 0xff})
	f.Add([]byte{0x82, 0x01})
	f.Fuzz(func(t *testing.T, in []byte) {
		items, err := SplitCBORList(in)
		if err != nil {
			var env *EnvelopeError
			if !errors.As(err, &env) {
				t.Fatalf("error %v is not an *EnvelopeError", err)
			}
			return
		}
		if !bytes.HasSuffix(in, bytes.Join(items, nil)) {
			t.Fatalf("items are not the array's contents")
		}
		for _, it := range items {
			DecodeCBOR(it)
		}
		if bytes.Equal(in, list) {
			for i, e := range []*Event{a, b} {
				if want, _ := EncodeCBOR(e); !bytes.Equal(items[i], want) {
					t.Fatalf("item %d is not the event's encoding", i)
				}
			}
		}
	})
}
