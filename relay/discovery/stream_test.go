package discovery_test

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay"
	"github.com/anp2net/relay/relay/discovery"
	"github.com/anp2net/relay/relay/relaytest"
	"github.com/anp2net/relay/relay/stream"
	"github.com/anp2net/relay/tasks/taskstest"
)

// TestBeaconReachesStream: a stream subscriber filtering by cap_wanted gets
// a matching beacon and not another one.
func TestBeaconReachesStream(t *testing.T) {
	r := relaytest.Start(t, []relay.Module{discovery.NewModule(), stream.NewModule()})
	alice := taskstest.NewAgent("alice")
	now := int64(relaytest.VectorTime)
	other := alice.Sign(protocol.KindBeacon, now, map[string]any{"intent": "seek", "about": "rain data"}, []string{"cap_wanted", "data.weather"})
	match := alice.Sign(protocol.KindBeacon, now, map[string]any{"intent": "seek", "about": "a contract"}, []string{"cap_wanted", "translate.ja"})

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second) // a guard against a hang, not a measurement
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", r.URL+"/stream?cap_wanted=translate.ja", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("stream: %d", resp.StatusCode)
	}
	lines := bufio.NewScanner(resp.Body)
	lines.Buffer(make([]byte, 1<<20), 1<<20)
	r.PostAll(t, []*protocol.Event{other, match}, 1) // the subscription is live once the headers are in
	for lines.Scan() {
		line := lines.Text()
		if !strings.HasPrefix(line, "data:") {
			continue
		}
		if strings.Contains(line, other.ID) {
			t.Fatal("a beacon for another capability reached the subscriber")
		}
		if strings.Contains(line, match.ID) {
			return
		}
	}
	t.Fatalf("stream ended without the beacon: %v", lines.Err())
}
