package relay

import (
	"errors"
	"net/url"
	"testing"

	"github.com/anp2net/relay/protocol"
)

// FuzzParseQuery: any query string either parses or yields a coded
// *protocol.Error (a 4xx), never a panic.
func FuzzParseQuery(f *testing.F) {
	for _, s := range []string{"kinds=1,2&t=weather&limit=100", "authors=" + string(make([]byte, 64)), "since=1&until=2&as_of=3", "x=a,b&cap=q", "limit=-1", "e=%zz", "", "branch=main,b-deadbeef", "branch=all"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		v, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		q, err := ParseQuery(v)
		if err != nil {
			var pe *protocol.Error
			if !errors.As(err, &pe) || pe.Code == "" {
				t.Fatalf("uncoded error %v", err)
			}
			return
		}
		if q.Filter.Limit < 1 || q.Filter.Limit > 1000 {
			t.Fatalf("limit %d escaped validation", q.Filter.Limit)
		}
	})
}
