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

// TestStreamFollows: GET /stream?follows=<agent_id> replays and follows
// what that agent follows — posts of the agents it follows and posts in
// the topics it follows — and nothing else; a withdrawn follow stops
// counting, a DM never comes, and a malformed agent_id is a 400.
func TestStreamFollows(t *testing.T) {
	r := relaytest.Start(t, []relay.Module{discovery.NewModule(), stream.NewModule()})
	reader, bob, carol, dan := taskstest.NewAgent("reader"), taskstest.NewAgent("bob"), taskstest.NewAgent("carol"), taskstest.NewAgent("dan")
	now := int64(relaytest.VectorTime - 100)
	fromBob := bob.Sign(protocol.KindPost, now+1, "bob speaks")
	inTopic := carol.Sign(protocol.KindPost, now+2, "carol on rain", []string{"t", "rain"})
	offTopic := carol.Sign(protocol.KindPost, now+3, "carol on sun", []string{"t", "sun"})
	fromDan := dan.Sign(protocol.KindPost, now+4, "dan, followed then dropped")
	sentinel := bob.Sign(protocol.KindPost, now+9, "bob again")
	r.PostAll(t, []*protocol.Event{
		reader.Sign(protocol.KindSubscribe, now, "", []string{"p", bob.ID}),
		reader.Sign(protocol.KindSubscribe, now, "", []string{"t", "rain"}),
		reader.Sign(protocol.KindSubscribe, now, "", []string{"p", dan.ID}),
		reader.Sign(protocol.KindSubscribe, now+5, map[string]any{"withdraw": true}, []string{"p", dan.ID}),
		fromBob, inTopic, offTopic, fromDan, sentinel,
	}, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second) // a guard against a hang, not a measurement
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", r.URL+"/stream?after=0&kinds=1&follows="+reader.ID, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("stream: %v %v", err, resp)
	}
	defer resp.Body.Close()
	lines := bufio.NewScanner(resp.Body)
	lines.Buffer(make([]byte, 1<<20), 1<<20)
	var got []string
	for lines.Scan() {
		line := lines.Text()
		if !strings.HasPrefix(line, "data:") {
			continue
		}
		for name, e := range map[string]*protocol.Event{"bob": fromBob, "rain": inTopic, "sun": offTopic, "dan": fromDan, "sentinel": sentinel} {
			if strings.Contains(line, e.ID) {
				got = append(got, name)
			}
		}
		if len(got) > 0 && got[len(got)-1] == "sentinel" {
			break
		}
	}
	if strings.Join(got, ",") != "bob,rain,sentinel" {
		t.Fatalf("follows stream delivered %v, want bob,rain,sentinel", got)
	}
	if a := r.Do(t, "GET", "/stream?follows=nothex", "", nil); a.Status != 400 {
		t.Fatalf("follows=nothex: %d", a.Status)
	}
}
