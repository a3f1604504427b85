package ws

import (
	"encoding/json"
	"testing"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/stream"
)

// TestFilterQueryItemWithComma: a REQ filter's list item may hold a comma
// (a tag value can): it is one value, not two, and matches only the event
// tagged with it.
func TestFilterQueryItemWithComma(t *testing.T) {
	q, _, err := FilterQuery(json.RawMessage(`{"#t":["red,green","blue\\"]}`))
	if err != nil {
		t.Fatal(err)
	}
	f, err := stream.ParseFilter(q)
	if err != nil {
		t.Fatal(err)
	}
	tagged := func(v string) *protocol.Event {
		return &protocol.Event{Kind: 1, Tags: [][]string{{"t", v}}}
	}
	for v, want := range map[string]bool{"red,green": true, `blue\`: true, "red": false, "green": false} {
		if f.Match(tagged(v)) != want {
			t.Errorf("t=%q matched %v, want %v", v, !want, want)
		}
	}
}
