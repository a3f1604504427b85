package discovery_test

import (
	"strings"
	"testing"
	"time"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/discovery"
	"github.com/anp2net/relay/relay/relaytest"
	"github.com/anp2net/relay/tasks/taskstest"
)

type beaconsAnswer struct {
	Count   int                `json:"count"`
	Beacons []discovery.Beacon `json:"beacons"`
}

func beacon(a taskstest.Agent, at int64, content map[string]any, tags ...[]string) *protocol.Event {
	return a.Sign(protocol.KindBeacon, at, content, tags...)
}

func TestBeacons(t *testing.T) {
	r, _ := start(t)
	a := taskstest.Pool(3)
	alice, bob, carol := a[0], a[1], a[2]
	now := int64(relaytest.VectorTime)
	seek := beacon(alice, now-10, map[string]any{"intent": "seek", "about": "coastal climate observations", "ttl_sec": 600},
		[]string{"t", "climate"}, []string{"cap_wanted", "data.observation.weather"})
	expired := beacon(bob, now-100, map[string]any{"intent": "offer", "about": "old", "ttl_sec": 60, "urgency": "critical"},
		[]string{"t", "climate"})
	urgent := beacon(carol, now-5, map[string]any{"intent": "help", "about": "translate a contract", "urgency": "high"},
		[]string{"cap_wanted", "translate.ja"})
	r.PostAll(t, []*protocol.Event{seek, expired, urgent}, 1)

	for _, bad := range []struct {
		e    *protocol.Event
		code string
	}{
		{beacon(alice, now, map[string]any{"intent": "seek", "about": "x", "ttl_sec": 10}, []string{"t", "x"}), protocol.CodeInvalidBeacon},
		{beacon(alice, now, map[string]any{"intent": "seek", "about": "x"}), protocol.CodeMissingTag},
		{alice.Sign(protocol.KindBeacon, now, "help me", []string{"t", "x"}), protocol.CodeInvalidBeacon},
	} {
		if ans := r.Post(t, bad.e); ans.Status != 400 || ans.Code(t) != bad.code {
			t.Fatalf("bad beacon: %d %s, want 400 %s", ans.Status, ans.Body, bad.code)
		}
	}

	var got beaconsAnswer
	ans := get(t, r, "/beacons", &got)
	if got.Count != 2 || got.Beacons[0].ID != urgent.ID || got.Beacons[1].ID != seek.ID {
		t.Fatalf("/beacons: %+v", got)
	}
	if b := got.Beacons[1]; b.ExpiresAt != now+590 || b.Intent != "seek" || b.Urgency != "normal" || b.CapWanted[0] != "data.observation.weather" {
		t.Fatalf("seek beacon: %+v", b)
	}
	if cc := ans.Header.Get("Cache-Control"); cc != "public, max-age=60" {
		t.Fatalf("Cache-Control %q", cc)
	}
	for path, want := range map[string]string{
		"/beacons?t=climate": seek.ID, "/api/beacons?cap_wanted=data.observation.weather": seek.ID,
		"/beacons?cap_wanted=translate.ja": urgent.ID, "/beacons?agent_id=" + carol.ID: urgent.ID,
	} {
		get(t, r, path, &got)
		if got.Count != 1 || got.Beacons[0].ID != want {
			t.Fatalf("%s: %+v", path, got)
		}
	}
	get(t, r, "/beacons?t=climate&cap_wanted=translate.ja", &got)
	if got.Count != 0 {
		t.Fatalf("AND of filters: %+v", got)
	}

	// cap_wanted is an indexed filter on GET /events; expired beacons stay in the log.
	r.Clock.Add(589 * time.Second) // one second before seek expires
	get(t, r, "/beacons?t=climate", &got)
	if got.Count != 1 || got.Beacons[0].ID != seek.ID {
		t.Fatalf("seek beacon before its expiry: %+v", got)
	}
	var evs []protocol.Event
	get(t, r, "/events?cap_wanted=data.observation.weather", &evs)
	if len(evs) != 1 || evs[0].ID != seek.ID {
		t.Fatalf("/events?cap_wanted: %+v", evs)
	}
	get(t, r, "/events?kinds=15&t=climate", &evs)
	if len(evs) != 2 {
		t.Fatalf("expired beacons must stay in the log: %d", len(evs))
	}
	r.Clock.Add(time.Second) // now+590 = created_at + ttl_sec: expired
	get(t, r, "/beacons?t=climate", &got)
	if got.Count != 0 {
		t.Fatalf("expired beacon still active: %+v", got)
	}

	refuse(t, r, "/beacons?x=1", 400, "unknown_parameter")
	refuse(t, r, "/beacons?limit=0", 400, "invalid_parameter")
	refuse(t, r, "/beacons?agent_id=alice", 400, "invalid_parameter")
	refuse(t, r, "/beacons?t=", 400, "invalid_parameter")
	refuse(t, r, "/beacons?t="+strings.Repeat("a", 1025), 400, "invalid_parameter")
}
