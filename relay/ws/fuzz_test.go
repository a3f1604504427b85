package ws

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/stream"
)

// FuzzParseFrame: any message either parses into a frame of a known type
// with the documented shape, or fails with a coded invalid_frame error;
// a REQ's filter then converts to /stream parameters or fails coded too.
func FuzzParseFrame(f *testing.F) {
	for _, s := range []string{
		`["REQ","s",{"kinds":[1],"authors":["` + hex64 + `"],"#e":["` + hex64 + `"],"limit":5}]`,
		`["REQ","s"]`, `["REQ","s",{"after":0,"filter":"kind:1"}]`, `["CLOSE","s"]`,
		`["EVENT",{"id":"x"}]`, `["AUTH",{}]`, `[]`, `{}`, `["REQ",1]`, `["REQ","",{}]`,
		`["REQ","s",{"kinds":[]}]`, `["REQ","s",{"kinds":[-1]}]`, `["REQ","s",{"limit":0}]`,
		`["EVENT",{"a":1},2]`, `["PING"]`, `["REQ","s",{"kinds":"1","kind":"2"}]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		fr, err := ParseFrame(b)
		if err != nil {
			coded(t, err, CodeInvalidFrame)
			return
		}
		switch fr.Type {
		case TypeReq, TypeClose:
			if fr.SubID == "" || len(fr.SubID) > maxSubID {
				t.Fatalf("sub id %q accepted", fr.SubID)
			}
		case TypeEvent, TypeAuth:
			if !json.Valid(fr.Event) {
				t.Fatalf("event %q is not JSON", fr.Event)
			}
			return
		default:
			t.Fatalf("unknown type %q accepted", fr.Type)
		}
		q, limit, err := FilterQuery(fr.Filter)
		if err != nil {
			coded(t, err, CodeInvalidFrame)
			return
		}
		if limit < 1 || limit > maxLimit {
			t.Fatalf("limit %d", limit)
		}
		if _, err := stream.ParseFilter(q); err != nil {
			var pe *protocol.Error
			if !errors.As(err, &pe) {
				t.Fatalf("uncoded filter error %v", err)
			}
		}
	})
}

const hex64 = "0000000000000000000000000000000000000000000000000000000000000001"

func coded(t *testing.T, err error, code string) {
	t.Helper()
	var pe *protocol.Error
	if !errors.As(err, &pe) || pe.Code != code {
		t.Fatalf("error %v: want code %s", err, code)
	}
}
