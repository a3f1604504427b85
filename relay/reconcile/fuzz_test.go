package reconcile

import (
	"errors"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/anp2net/relay/protocol"
)

// fuzzIndex is a small set with busy timestamps near zero, so that fuzzed
// bounds land among its items.
func fuzzIndex() *Index {
	r := rand.New(rand.NewPCG(11, 12))
	items := randItems(r, 300, 0, 40)
	for i := range 20 { // ids sharing long prefixes at one timestamp
		items = append(items, Item{CreatedAt: 7, ID: [32]byte{0: 0xcd, 1: 0xcd, 2: byte(i)}})
	}
	return NewIndex(items)
}

// FuzzDecodeMessage: decoding never panics and rejects with a coded error;
// whatever decodes re-encodes to a message that decodes the same, no
// longer than the input; and both sides answer it with a valid message
// within their frame limit, or reject it.
func FuzzDecodeMessage(f *testing.F) {
	idx := fuzzIndex()
	f.Add([]byte{Version})
	f.Add(NewSession(idx).Initiate())
	f.Add(h("61 00 00 02 01", id32))
	p := Params{FrameLimit: minFrameLimit}
	f.Fuzz(func(t *testing.T, msg []byte) {
		ranges, err := DecodeMessage(msg)
		if err != nil {
			var pe *protocol.Error
			if !errors.As(err, &pe) || (pe.Code != CodeBadMessage && pe.Code != CodeUnsupportedVersion) {
				t.Fatalf("error without a known code: %v", err)
			}
			if validate(msg) == nil {
				t.Fatal("validate accepts what DecodeMessage rejects")
			}
			if reply, err := p.Respond(idx, msg); err == nil && string(reply) != string([]byte{Version}) {
				t.Fatalf("Respond answered a bad message with %x", reply)
			}
			return
		}
		enc, err := EncodeMessage(ranges)
		if err != nil {
			t.Fatalf("decoded ranges do not encode: %v", err)
		}
		again, err := DecodeMessage(enc)
		if err != nil || !reflect.DeepEqual(again, ranges) {
			t.Fatalf("re-encoded %x decodes to %+v, %v", enc, again, err)
		}
		if len(enc) > len(msg) {
			t.Fatalf("re-encoding grew from %d to %d bytes", len(msg), len(enc))
		}
		reply, err := p.Respond(idx, msg)
		if err != nil {
			t.Fatalf("Respond rejected a valid message: %v", err)
		}
		checkFrame(t, "reply", reply, p)
		next, _, _, err := p.NewSession(idx).Reconcile(msg)
		if err != nil {
			t.Fatalf("Reconcile rejected a valid message: %v", err)
		}
		if next != nil {
			checkFrame(t, "next", next, p)
		}
	})
}

func checkFrame(t *testing.T, what string, msg []byte, p Params) {
	t.Helper()
	if err := validate(msg); err != nil {
		t.Fatalf("%s %x is invalid: %v", what, msg, err)
	}
	if len(msg) > p.withDefaults().FrameLimit {
		t.Fatalf("%s of %d bytes exceeds the frame limit", what, len(msg))
	}
}
