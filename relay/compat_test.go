package relay

import (
	"encoding/json"
	"testing"

	"github.com/anp2net/relay/protocol"
)

// TestKindAlias: GET /events takes kind= as the network's clients send it
// (alone, never beside kinds=).
func TestKindAlias(t *testing.T) {
	r := startRelay(t)
	a := key(1)
	post, profile := mk(a, vectorTime, 1, "hello"), mk(a, vectorTime, 4, `{"capabilities":[]}`)
	for _, e := range []*protocol.Event{post, profile} {
		if ans := r.post(t, e); ans.status != 200 {
			t.Fatalf("publish: %d %s", ans.status, ans.body)
		}
	}
	var list []protocol.Event
	ans := r.do(t, "GET", "/api/events?kind=4", "", nil)
	if ans.status != 200 || json.Unmarshal(ans.body, &list) != nil || len(list) != 1 || list[0].ID != profile.ID {
		t.Fatalf("kind=4: %d %s", ans.status, ans.body)
	}
	if ans := r.do(t, "GET", "/events?kind=4&kinds=1", "", nil); ans.status != 400 || ans.code(t) != CodeBadParameter {
		t.Fatalf("kind and kinds together: %d %s", ans.status, ans.body)
	}
}
