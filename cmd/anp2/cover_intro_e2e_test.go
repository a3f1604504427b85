package main

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/discovery"
	"github.com/anp2net/relay/tasks/taskstest"
)

// coverProfile is a's kind 0 at at with content, mined to 12 bits.
func coverProfile(t *testing.T, a taskstest.Agent, at int64, content map[string]any) *protocol.Event {
	t.Helper()
	e := a.Sign(protocol.KindProfile, at, content)
	if err := protocol.Mine(context.Background(), e, 12); err != nil {
		t.Fatal(err)
	}
	e.Sign(a.Key)
	return e
}

// TestCoverIntroductionBeacon: on a real relay process, an agent's first
// profile brings one low-priority kind 15 signed by the relay (seed §12.6
// step 2) that names the agent and its neighbours and lists in /beacons;
// a second profile brings no second beacon; a profile with
// "intro_beacon": false brings none; anp2 replay agrees with /state.
func TestCoverIntroductionBeacon(t *testing.T) {
	ag := taskstest.Pool(3)
	old, newbie, shy := ag[0], ag[1], ag[2]
	p := startProc(t, filepath.Join(t.TempDir(), "intro.db"))
	_, self := httpJSON(t, "GET", p.base+"/relays", nil)
	relayID, _ := self["self"].(map[string]any)["agent_id"].(string)
	now := time.Now().Unix()
	post := func(e *protocol.Event) {
		t.Helper()
		if st, body := httpJSON(t, "POST", p.base+"/events", protocol.AppendJSON(nil, e)); st != 200 {
			t.Fatalf("publish kind %d: %d %v", e.Kind, st, body)
		}
	}
	beacons := func() []protocol.Event {
		resp, err := http.Get(p.base + "/events?kinds=15&authors=" + relayID + "&limit=100")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var evs []protocol.Event
		json.NewDecoder(resp.Body).Decode(&evs)
		return evs
	}
	post(coverProfile(t, old, now, map[string]any{"name": "Old timer"}))
	post(old.Sign(protocol.KindPost, now, "about translation", []string{"t", "translation"}))
	waitFor(t, "the first introduction", func() bool { return len(beacons()) == 1 })
	post(coverProfile(t, newbie, now, map[string]any{"name": "Newbie", "about": "translation"}))
	post(coverProfile(t, newbie, now+1, map[string]any{"name": "Newbie v2"})) // a revision: no second beacon
	post(coverProfile(t, shy, now, map[string]any{"name": "Shy", "intro_beacon": false}))
	waitFor(t, "the newbie's introduction", func() bool { return len(beacons()) == 2 })
	// The shy agent's profile was committed before the newbie's revision,
	// whose queue position follows it: a sentinel first profile after all
	// three proves the queue has passed them.
	sentinel := taskstest.NewAgent("intro-sentinel")
	post(coverProfile(t, sentinel, now, map[string]any{"name": "Sentinel"}))
	waitFor(t, "the sentinel's introduction", func() bool { return len(beacons()) == 3 })
	named := map[string]int{}
	for _, b := range beacons() {
		bc, err := protocol.ParseBeacon(b.Content)
		if err != nil || bc.Intent != discovery.IntroIntent || bc.Urgency != "low" || !slices.Contains(b.TagValues("t"), discovery.IntroTopic) {
			t.Fatalf("beacon %+v: %v", b, err)
		}
		named[b.TagValues("p")[0]]++
		if b.TagValues("p")[0] == newbie.ID && !slices.Contains(b.TagValues("p"), old.ID) {
			t.Fatalf("the newbie's beacon names no neighbour: %v", b.Tags)
		}
	}
	if named[old.ID] != 1 || named[newbie.ID] != 1 || named[sentinel.ID] != 1 || named[shy.ID] != 0 {
		t.Fatalf("introductions by agent: %v", named)
	}
	_, listed := httpJSON(t, "GET", p.base+"/beacons?t="+discovery.IntroTopic, nil)
	if b, _ := json.Marshal(listed); !strings.Contains(string(b), newbie.ID) {
		t.Fatalf("/beacons: %s", b)
	}
	at := "--at=" + strconv.FormatInt(time.Now().Unix(), 10)
	if out := runCLI(t, "replay", at, "--compare", p.base, p.base); !strings.Contains(out, "match: ") {
		t.Fatalf("replay: %s", out)
	}
}
